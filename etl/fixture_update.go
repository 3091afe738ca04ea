package etl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// mappingKeyOrder is the order UpdateFixtures writes a mapping's keys in;
// keys not listed (there are none in a valid file) follow in file order.
var mappingKeyOrder = []string{"$schema", "$comment", "name", "description", "url_patterns", "url_parsers", "fields", "render", "render_resources", "priority", "follow", "fixtures"}

// UpdateFixtures rewrites the expectations of every fixture in the mapping
// file at path with what the mapping produces from the fixture's saved page
// now, for `backfill mappings test --update`. Fields are always written;
// links are written when the fixture listed links before or the mapping
// has url_parsers. It returns how many fixtures changed; the file is left
// untouched when none did.
//
// The rest of the file is kept: every value, and the key order of every
// object, except that a mapping's keys are put in the canonical order
// (mappingKeyOrder). The file is re-indented with two spaces.
//
// A fixture whose page cannot be read stops the update before anything is
// written. Problems that new expectations cannot fix (processor errors on
// the page, a URL the mapping does not match) do not stop it: the file is
// written and they are returned as an error alongside the count.
func UpdateFixtures(path string) (changed int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("update fixtures: %w", err)
	}
	set, err := Load(map[string][]byte{path: data})
	if err != nil {
		return 0, fmt.Errorf("update fixtures: %w", err)
	}
	root, err := parseJSONTree(data) // cannot fail: Load parsed it
	if err != nil {
		return 0, fmt.Errorf("update fixtures: %s: %w", path, err)
	}
	objs := []*jnode{root}
	if root.kind == 'a' {
		objs = root.elems
	}
	var problems []error
	for _, obj := range objs {
		m := set.Mapping(obj.get("name").str)
		fx := obj.get("fixtures")
		if m == nil || fx == nil {
			continue
		}
		for i, f := range m.Fixtures() {
			body, err := os.ReadFile(filepath.Join(filepath.Dir(path), filepath.FromSlash(f.File)))
			if err != nil {
				return 0, fmt.Errorf("update fixtures: mapping %q fixtures[%d]: %w", m.Name, i, err)
			}
			res := set.RunFixture(m, f, body)
			for _, d := range res.Diff {
				if strings.HasPrefix(d, "error: ") || strings.HasPrefix(d, "url ") {
					problems = append(problems, fmt.Errorf("%s: mapping %q fixtures[%d]: %s", path, m.Name, i, d))
				}
			}
			withLinks := f.Links != nil || len(m.parsers) > 0
			if sameExpectation(f, res, withLinks) {
				continue
			}
			changed++
			setMember(fx.elems[i], "expect", expectNode(res, withLinks))
		}
	}
	if changed > 0 {
		var b bytes.Buffer
		writeNode(&b, root, 0, root.kind == 'o')
		b.WriteByte('\n')
		if err := writeFileAtomic(path, b.Bytes()); err != nil {
			return 0, fmt.Errorf("update fixtures: %w", err)
		}
	}
	return changed, errors.Join(problems...)
}

func sameExpectation(f Fixture, res FixtureResult, withLinks bool) bool {
	if len(f.Fields) != len(res.Fields) {
		return false
	}
	for k, v := range res.Fields {
		if !reflect.DeepEqual(nilIfEmpty(f.Fields[k]), nilIfEmpty(v)) {
			return false
		}
	}
	if withLinks != (f.Links != nil) {
		return false
	}
	return !withLinks || reflect.DeepEqual(nilIfEmpty(f.Links), nilIfEmpty(res.Links))
}

// expectNode builds {"fields": {name: [values]}, "links": [...]}, field
// names sorted so that the output is stable.
func expectNode(res FixtureResult, withLinks bool) *jnode {
	fields := &jnode{kind: 'o'}
	names := make([]string, 0, len(res.Fields))
	for k := range res.Fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fields.keys = append(fields.keys, k)
		fields.members = append(fields.members, stringsNode(res.Fields[k]))
	}
	e := &jnode{kind: 'o', keys: []string{"fields"}, members: []*jnode{fields}}
	if withLinks {
		e.keys = append(e.keys, "links")
		e.members = append(e.members, stringsNode(res.Links))
	}
	return e
}

func stringsNode(ss []string) *jnode {
	n := &jnode{kind: 'a'}
	for _, s := range ss {
		n.elems = append(n.elems, &jnode{kind: 's', str: s})
	}
	return n
}

// setMember replaces or appends an object member.
func setMember(obj *jnode, key string, v *jnode) {
	for i, k := range obj.keys {
		if k == key {
			obj.members[i] = v
			return
		}
	}
	obj.keys = append(obj.keys, key)
	obj.members = append(obj.members, v)
}

// writeNode writes a node as indented JSON. A mapping object (isMapping)
// has its keys written in mappingKeyOrder.
func writeNode(b *bytes.Buffer, n *jnode, depth int, isMapping bool) {
	indent := func(d int) {
		b.WriteByte('\n')
		for range d {
			b.WriteString("  ")
		}
	}
	switch n.kind {
	case 'o':
		if len(n.keys) == 0 {
			b.WriteString("{}")
			return
		}
		order := make([]int, len(n.keys))
		for i := range order {
			order[i] = i
		}
		if isMapping {
			rank := func(k string) int {
				for r, o := range mappingKeyOrder {
					if o == k {
						return r
					}
				}
				return len(mappingKeyOrder)
			}
			sort.SliceStable(order, func(a, c int) bool { return rank(n.keys[order[a]]) < rank(n.keys[order[c]]) })
		}
		b.WriteByte('{')
		for j, i := range order {
			if j > 0 {
				b.WriteByte(',')
			}
			indent(depth + 1)
			writeString(b, n.keys[i])
			b.WriteString(": ")
			writeNode(b, n.members[i], depth+1, false)
		}
		indent(depth)
		b.WriteByte('}')
	case 'a':
		if len(n.elems) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			indent(depth + 1)
			// Only the root is written at depth 0: its elements are mappings.
			writeNode(b, e, depth+1, depth == 0)
		}
		indent(depth)
		b.WriteByte(']')
	case 's':
		writeString(b, n.str)
	case 'n':
		b.WriteString(n.num.String())
	case 'b':
		b.WriteString(strconv.FormatBool(n.b))
	default:
		b.WriteString("null")
	}
}

// writeString writes s as a JSON string without escaping <, > and &, which
// XPath expressions and URLs are full of.
func writeString(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)       // a string always encodes
	b.Truncate(b.Len() - 1) // the encoder's newline
}

// writeFileAtomic replaces path with data through a temporary file in the
// same directory, keeping the file's mode.
func writeFileAtomic(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
