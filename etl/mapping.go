package etl

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Field types a field may declare. A value that cannot be read as its
// field's type is dropped and the reason recorded.
const (
	TypeString = "string"
	TypeURL    = "url"
	TypeEmail  = "email"
	TypeNumber = "number"
	TypeDate   = "date"
	TypeList   = "list"
)

// rule is one compiled url_parser or field: a chain of processors and, for
// fields, what to do with the chain's output.
type rule struct {
	name        string
	description string
	label       string // `fields[1] "name"` or `url_parsers[0]`, for messages
	match       bool
	all         bool
	typ         string
	validate    *pattern
	steps       []step
}

// step is one processor of a chain.
type step struct {
	label string // `processors[0] (xpath)`
	typ   string
	proc  Processor
}

// Fixture is a saved page with the fields and links a mapping must get
// from it; `mappings test` runs them.
type Fixture struct {
	URL         string              // where the page came from
	File        string              // the saved page, relative to the mapping file
	ContentType string              // optional; HTML when empty
	Fields      map[string][]string // expected values per field
	Links       []string            // expected url_parsers links (nil: not checked)
	Description string
}

// LoadError is one problem in one mapping file, with enough context to go
// straight to it.
type LoadError struct {
	File    string
	Line    int // 1-based; 0 when the problem is the file as a whole
	Col     int
	Pointer string // JSON pointer of the offending value, e.g. /fields/1/processors/0
	Mapping string // the mapping's name, when known
	Where   string // e.g. `fields[1] "name": processors[0] (xpath)`
	Err     error
	Hint    string // what the format expects there, from the schema's descriptions
}

func (e *LoadError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}
	b.WriteString(": ")
	if e.Mapping != "" {
		fmt.Fprintf(&b, "mapping %q: ", e.Mapping)
	}
	if e.Where != "" {
		b.WriteString(e.Where)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	if e.Pointer != "" {
		b.WriteString(" [at ")
		b.WriteString(e.Pointer)
		b.WriteString("]")
	}
	if e.Hint != "" {
		b.WriteString("; hint: ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

func (e *LoadError) Unwrap() error { return e.Err }

// fileLoader decodes the mappings of one file, collecting every error.
type fileLoader struct {
	file    string
	data    []byte
	mapping string // name of the mapping being decoded
	errs    []error
}

func (l *fileLoader) fail(n *jnode, ptr, where string, format string, args ...any) {
	e := &LoadError{File: l.file, Pointer: ptr, Mapping: l.mapping, Where: where, Err: fmt.Errorf(format, args...)}
	if n != nil {
		e.Line, e.Col = lineCol(l.data, n.off)
	}
	l.errs = append(l.errs, e)
}

// loadMappings decodes and compiles every mapping in one file.
func loadMappings(file string, data []byte) ([]*Mapping, []error) {
	l := &fileLoader{file: file, data: data}
	root, err := parseJSONTree(data)
	if err != nil {
		var se *syntaxError
		e := &LoadError{File: file, Err: fmt.Errorf("JSON syntax error: %v", err)}
		if errors.As(err, &se) {
			e.Line, e.Col = lineCol(data, se.off)
			e.Err = fmt.Errorf("JSON syntax error: %s", se.msg)
		}
		return nil, []error{e}
	}
	schema, err := loadFormatSchema()
	if err != nil {
		return nil, []error{&LoadError{File: file, Err: err}}
	}
	var out []*Mapping
	switch root.kind {
	case 'o':
		if m := l.decodeMapping(root, ""); m != nil {
			out = append(out, m)
		}
	case 'a':
		if len(root.elems) == 0 {
			l.fail(root, "", "", "the file holds an empty array; want a mapping object or an array of them")
		}
		for i, n := range root.elems {
			if n.kind != 'o' {
				l.fail(n, "/"+strconv.Itoa(i), fmt.Sprintf("[%d]", i), "want a mapping object, got %s", n.kindName())
				continue
			}
			if m := l.decodeMapping(n, "/"+strconv.Itoa(i)); m != nil {
				out = append(out, m)
			}
		}
	default:
		l.fail(root, "", "", "want a mapping object or an array of them, got %s", root.kindName())
	}
	errs := l.merge(schema, root)
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// merge joins the compiler's errors with the schema's, in document order.
// Where both complain about the same value (or the schema about something
// inside a value the compiler already refused), the compiler's message,
// the more specific one, is kept. Every error gets a hint from the schema.
func (l *fileLoader) merge(schema *formatSchema, root *jnode) []error {
	errs := make([]*LoadError, 0, len(l.errs))
	for _, e := range l.errs {
		le := e.(*LoadError)
		if le.Hint == "" {
			le.Hint = schema.hintAt(root, le.Pointer)
		}
		errs = append(errs, le)
	}
	for _, is := range schema.validate(root) {
		ptr := joinPointer(is.ptr)
		line, col := lineCol(l.data, is.node.off)
		covered := false
		for _, e := range l.errs {
			le := e.(*LoadError)
			if le.Line == line && le.Col == col || le.Pointer == ptr || strings.HasPrefix(ptr, le.Pointer+"/") || le.Pointer == "" && len(is.ptr) == 0 {
				covered = true
				break
			}
		}
		if covered {
			continue
		}
		mapping, where := describePointer(root, is.ptr)
		e := &LoadError{File: l.file, Line: line, Col: col, Pointer: ptr, Mapping: mapping, Where: where, Err: errors.New(is.msg), Hint: is.hint}
		errs = append(errs, e)
	}
	sort.SliceStable(errs, func(i, j int) bool {
		if errs[i].Line != errs[j].Line {
			return errs[i].Line < errs[j].Line
		}
		return errs[i].Col < errs[j].Col
	})
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return out
}

// describePointer names the mapping and the place within it that a JSON
// pointer designates, in the words the compiler's messages use:
// `fields[1] "name": processors[0] (xpath): parameters`.
func describePointer(root *jnode, toks []string) (mapping, where string) {
	cur := root
	var parts []string
	if root.kind == 'a' && len(toks) > 0 {
		cur = root.child(toks[0])
		toks = toks[1:]
		if cur == nil {
			return "", ""
		}
	}
	if n := cur.get("name"); cur.kind == 'o' && n != nil && n.kind == 's' {
		mapping = n.str
	}
	for len(toks) > 0 {
		tok := toks[0]
		switch tok {
		case "fields", "url_parsers", "url_patterns", "fixtures", "processors":
			if len(toks) < 2 {
				parts = append(parts, tok)
				toks = nil
				continue
			}
			el := cur.child(tok).child(toks[1])
			label := fmt.Sprintf("%s[%s]", tok, toks[1])
			if el != nil && el.kind == 'o' {
				if n := el.get("name"); tok == "fields" && n != nil && n.kind == 's' {
					label += fmt.Sprintf(" %q", n.str)
				}
				if t := el.get("type"); tok == "processors" && t != nil && t.kind == 's' {
					label += fmt.Sprintf(" (%s)", t.str)
				}
			}
			parts = append(parts, label)
			cur = el
			toks = toks[2:]
		default:
			parts = append(parts, strings.Join(toks, "."))
			toks = nil
		}
		if cur == nil {
			break
		}
	}
	return mapping, strings.Join(parts, ": ")
}

var (
	mappingKeys   = []string{"$schema", "$comment", "name", "description", "url_patterns", "url_parsers", "fields", "render", "render_resources", "priority", "follow", "fixtures"}
	patternKeys   = []string{"$comment", "type", "pattern", "description"}
	parserKeys    = []string{"$comment", "name", "description", "processors"}
	fieldKeys     = []string{"$comment", "name", "description", "processors", "match", "type", "validate", "all"}
	processorKeys = []string{"$comment", "type", "parameters", "description"}
	fixtureKeys   = []string{"$comment", "url", "file", "content_type", "description", "expect"}
	expectKeys    = []string{"$comment", "fields", "links"}
	fieldTypes    = []string{TypeString, TypeURL, TypeEmail, TypeNumber, TypeDate, TypeList}
)

// checkKeys reports members of an object that the format does not know.
func (l *fileLoader) checkKeys(n *jnode, ptr, where string, allowed []string) {
	for i, k := range n.keys {
		if contains(allowed, k) {
			continue
		}
		hint := ""
		if s := closest(k, allowed); s != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", s)
		}
		l.fail(n.members[i], ptr+"/"+escapePointer(k), where, "unknown key %q%s", k, hint)
	}
}

func (l *fileLoader) decodeMapping(n *jnode, ptr string) *Mapping {
	before := len(l.errs)
	l.mapping = ""
	m := &Mapping{File: l.file, Follow: true}
	if nn := n.get("name"); nn == nil {
		l.fail(n, ptr, "", `missing "name"`)
	} else if nn.kind != 's' || strings.TrimSpace(nn.str) == "" {
		l.fail(nn, ptr+"/name", "", `"name" must be a non-empty string`)
	} else {
		m.Name = nn.str
		l.mapping = nn.str
		m.nameOff = nn.off
	}
	l.checkKeys(n, ptr, "", mappingKeys)
	if d := n.get("description"); d != nil {
		m.Description, _ = l.str(d, ptr+"/description", "description")
	}
	if r := n.get("render"); r != nil {
		m.Render = l.decodeRender(r, ptr+"/render")
	}
	if r := n.get("render_resources"); r != nil {
		m.RenderResources = l.decodeRenderResources(r, ptr+"/render_resources")
	}
	if f := n.get("follow"); f != nil {
		m.Follow = l.boolean(f, ptr+"/follow", "follow")
	}
	if p := n.get("priority"); p != nil {
		if p.kind != 'n' {
			l.fail(p, ptr+"/priority", "priority", "want an integer, got %s", p.kindName())
		} else if v, err := strconv.Atoi(p.num.String()); err != nil {
			l.fail(p, ptr+"/priority", "priority", "want an integer, got %s", p.num)
		} else {
			m.Priority = v
		}
	}
	if ups := n.get("url_patterns"); ups != nil {
		for i, up := range l.array(ups, ptr+"/url_patterns", "url_patterns") {
			where := fmt.Sprintf("url_patterns[%d]", i)
			pp := fmt.Sprintf("%s/url_patterns/%d", ptr, i)
			if up.kind != 'o' {
				l.fail(up, pp, where, "want an object {type, pattern}, got %s", up.kindName())
				continue
			}
			l.checkKeys(up, pp, where, patternKeys)
			if t := up.get("type"); t != nil {
				if s, ok := l.str(t, pp+"/type", where); ok && s != "regex" {
					l.fail(t, pp+"/type", where, `unknown url pattern type %q (want "regex")`, s)
				}
			}
			pn := up.get("pattern")
			if pn == nil {
				l.fail(up, pp, where, `missing "pattern"`)
				continue
			}
			src, ok := l.str(pn, pp+"/pattern", where)
			if !ok {
				continue
			}
			re, err := compilePattern(src)
			if err != nil {
				l.fail(pn, pp+"/pattern", where, "%v", err)
				continue
			}
			m.patterns = append(m.patterns, re)
		}
	}
	if ps := n.get("url_parsers"); ps != nil {
		for i, pn := range l.array(ps, ptr+"/url_parsers", "url_parsers") {
			label := fmt.Sprintf("url_parsers[%d]", i)
			if r := l.decodeRule(pn, fmt.Sprintf("%s/url_parsers/%d", ptr, i), label, false); r != nil {
				m.parsers = append(m.parsers, r)
			}
		}
	}
	if fs := n.get("fields"); fs != nil {
		seen := map[string]bool{}
		for i, fn := range l.array(fs, ptr+"/fields", "fields") {
			label := fmt.Sprintf("fields[%d]", i)
			r := l.decodeRule(fn, fmt.Sprintf("%s/fields/%d", ptr, i), label, true)
			if r == nil {
				continue
			}
			if seen[r.name] {
				l.fail(fn, fmt.Sprintf("%s/fields/%d", ptr, i), r.label, "field %q is defined twice in this mapping", r.name)
				continue
			}
			seen[r.name] = true
			m.fields = append(m.fields, r)
		}
	}
	switch fs, ps := n.get("fields"), n.get("url_parsers"); {
	case fs == nil && ps == nil:
		l.fail(n, ptr, "", `the mapping has neither "fields" nor "url_parsers"`)
	case isEmptyArray(fs) && (ps == nil || isEmptyArray(ps)):
		// An empty list is a mapping that would extract nothing and follow
		// nothing: the run would refuse the set, so the author hears it here.
		l.fail(fs, ptr+"/fields", "", `"fields" is empty and the mapping has no "url_parsers": it would fill nothing and follow nothing`)
	}
	if fx := n.get("fixtures"); fx != nil {
		for i, f := range l.array(fx, ptr+"/fixtures", "fixtures") {
			if x, ok := l.decodeFixture(f, fmt.Sprintf("%s/fixtures/%d", ptr, i), fmt.Sprintf("fixtures[%d]", i)); ok {
				m.fixtures = append(m.fixtures, x)
			}
		}
	}
	if len(l.errs) > before {
		return nil
	}
	return m
}

func (l *fileLoader) decodeRule(n *jnode, ptr, label string, isField bool) *rule {
	if n.kind != 'o' {
		l.fail(n, ptr, label, "want an object {name, processors}, got %s", n.kindName())
		return nil
	}
	before := len(l.errs)
	r := &rule{label: label}
	if nn := n.get("name"); nn != nil {
		if s, ok := l.str(nn, ptr+"/name", label); ok {
			r.name = s
			if isField {
				label = fmt.Sprintf("%s %q", label, s)
				r.label = label
			}
		}
	}
	if isField && r.name == "" && n.get("name") == nil {
		l.fail(n, ptr, label, `a field needs a "name"`)
	} else if isField && strings.TrimSpace(r.name) == "" && n.get("name") != nil {
		l.fail(n.get("name"), ptr+"/name", label, `"name" must be a non-empty string`)
	}
	if isField {
		l.checkKeys(n, ptr, label, fieldKeys)
	} else {
		l.checkKeys(n, ptr, label, parserKeys)
	}
	if d := n.get("description"); d != nil {
		r.description, _ = l.str(d, ptr+"/description", label)
	}
	if isField {
		if v := n.get("match"); v != nil {
			r.match = l.boolean(v, ptr+"/match", label)
		}
		if v := n.get("all"); v != nil {
			r.all = l.boolean(v, ptr+"/all", label)
		}
		if v := n.get("type"); v != nil {
			if s, ok := l.str(v, ptr+"/type", label); ok {
				if !contains(fieldTypes, s) {
					l.fail(v, ptr+"/type", label, "unknown field type %q (want one of %s)", s, strings.Join(fieldTypes, ", "))
				} else {
					r.typ = s
				}
			}
		}
		if r.typ == TypeList {
			r.all = true
		}
		if v := n.get("validate"); v != nil {
			if s, ok := l.str(v, ptr+"/validate", label); ok {
				re, err := compilePattern(s)
				if err != nil {
					l.fail(v, ptr+"/validate", label, "validate: %v", err)
				} else {
					r.validate = re
				}
			}
		}
	}
	pn := n.get("processors")
	if pn == nil {
		l.fail(n, ptr, label, `missing "processors"`)
		return nil
	}
	procs := l.array(pn, ptr+"/processors", label)
	if pn.kind == 'a' && len(procs) == 0 {
		l.fail(pn, ptr+"/processors", label, `"processors" is empty; a chain needs at least one processor`)
	}
	for i, p := range procs {
		pp := fmt.Sprintf("%s/processors/%d", ptr, i)
		if p.kind != 'o' {
			l.fail(p, pp, fmt.Sprintf("%s: processors[%d]", label, i), "want an object {type, parameters}, got %s", p.kindName())
			continue
		}
		typ := ""
		if t := p.get("type"); t == nil {
			l.fail(p, pp, fmt.Sprintf("%s: processors[%d]", label, i), `missing "type"`)
			continue
		} else if s, ok := l.str(t, pp+"/type", fmt.Sprintf("%s: processors[%d]", label, i)); !ok {
			continue
		} else {
			typ = s
		}
		sl := fmt.Sprintf("processors[%d] (%s)", i, typ)
		where := label + ": " + sl
		l.checkKeys(p, pp, where, processorKeys)
		factory, ok := registry[typ]
		if !ok {
			hint := ""
			if s := closest(typ, ProcessorTypes()); s != "" {
				hint = fmt.Sprintf("; did you mean %q?", s)
			}
			l.fail(p.get("type"), pp+"/type", where, "unknown processor type %q%s (known: %s)", typ, hint, strings.Join(ProcessorTypes(), ", "))
			continue
		}
		var raw json.RawMessage
		at := p
		if params := p.get("parameters"); params != nil {
			at = params
			if params.kind != 'o' && params.kind != 'z' {
				l.fail(params, pp+"/parameters", where, `"parameters" must be an object, got %s`, params.kindName())
				continue
			}
			raw = json.RawMessage(l.data[params.off:params.end])
		}
		proc, err := buildProcessor(factory, raw)
		if err != nil {
			l.fail(at, pp+"/parameters", where, "%v", err)
			continue
		}
		r.steps = append(r.steps, step{label: sl, typ: typ, proc: proc})
	}
	if len(l.errs) > before {
		return nil
	}
	return r
}

// buildProcessor runs a factory, turning a panic into an error so a
// processor bug cannot take the loader down.
func buildProcessor(f Factory, raw json.RawMessage) (p Processor, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("processor setup failed: %v", r)
		}
	}()
	return f(raw)
}

func (l *fileLoader) decodeFixture(n *jnode, ptr, where string) (Fixture, bool) {
	var f Fixture
	if n.kind != 'o' {
		l.fail(n, ptr, where, "want an object {url, file, expect}, got %s", n.kindName())
		return f, false
	}
	before := len(l.errs)
	l.checkKeys(n, ptr, where, fixtureKeys)
	for _, k := range []string{"url", "file"} {
		v := n.get(k)
		if v == nil {
			l.fail(n, ptr, where, "missing %q", k)
			continue
		}
		s, _ := l.str(v, ptr+"/"+k, where)
		if k == "url" {
			f.URL = s
		} else {
			f.File = s
		}
	}
	if v := n.get("content_type"); v != nil {
		f.ContentType, _ = l.str(v, ptr+"/content_type", where)
	}
	if v := n.get("description"); v != nil {
		f.Description, _ = l.str(v, ptr+"/description", where)
	}
	if e := n.get("expect"); e != nil {
		if e.kind != 'o' {
			l.fail(e, ptr+"/expect", where, "want an object {fields, links}, got %s", e.kindName())
		} else {
			l.checkKeys(e, ptr+"/expect", where, expectKeys)
			if fs := e.get("fields"); fs != nil {
				if fs.kind != 'o' {
					l.fail(fs, ptr+"/expect/fields", where, "want an object of field name to values, got %s", fs.kindName())
				} else {
					f.Fields = map[string][]string{}
					for i, k := range fs.keys {
						f.Fields[k] = l.strings(fs.members[i], ptr+"/expect/fields/"+escapePointer(k), where)
					}
				}
			}
			if ls := e.get("links"); ls != nil {
				f.Links = l.strings(ls, ptr+"/expect/links", where)
				if f.Links == nil {
					f.Links = []string{}
				}
			}
		}
	}
	return f, len(l.errs) == before
}

func (l *fileLoader) str(n *jnode, ptr, where string) (string, bool) {
	if n.kind != 's' {
		l.fail(n, ptr, where, "%s: want a string, got %s", lastPointerToken(ptr), n.kindName())
		return "", false
	}
	return n.str, true
}

func (l *fileLoader) boolean(n *jnode, ptr, where string) bool {
	if n.kind != 'b' {
		l.fail(n, ptr, where, "%s: want true or false, got %s", lastPointerToken(ptr), n.kindName())
		return false
	}
	return n.b
}

// isEmptyArray reports whether n is a JSON array with no element.
func isEmptyArray(n *jnode) bool {
	return n != nil && n.kind == 'a' && len(n.elems) == 0
}

func (l *fileLoader) array(n *jnode, ptr, where string) []*jnode {
	if n.kind != 'a' {
		l.fail(n, ptr, where, "%s: want an array, got %s", lastPointerToken(ptr), n.kindName())
		return nil
	}
	return n.elems
}

// strings reads a string or an array of strings.
func (l *fileLoader) strings(n *jnode, ptr, where string) []string {
	if n.kind == 's' {
		return []string{n.str}
	}
	var out []string
	for i, e := range l.array(n, ptr, where) {
		if s, ok := l.str(e, fmt.Sprintf("%s/%d", ptr, i), where); ok {
			out = append(out, s)
		}
	}
	return out
}

func lastPointerToken(ptr string) string {
	if i := strings.LastIndexByte(ptr, '/'); i >= 0 {
		return strings.NewReplacer("~1", "/", "~0", "~").Replace(ptr[i+1:])
	}
	return ptr
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// closest returns the candidate within edit distance 2 of s, if any.
func closest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// sortedUnique sorts and deduplicates in place.
func sortedUnique(ss []string) []string {
	sort.Strings(ss)
	out := ss[:0]
	for i, s := range ss {
		if i == 0 || s != ss[i-1] {
			out = append(out, s)
		}
	}
	return out
}
