package etl

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Set is a loaded, compiled, validated set of mappings. Safe for concurrent
// use: Extract may be called from many workers at once.
type Set struct {
	mappings []*Mapping
	digest   string
	fields   []string
	// planTags are the tags the mappings' XPath plans look up; plan has
	// the parser collect their elements as it makes them.
	planTags []string
	plan     *scanPlan
	parser   HTMLParser // see WithHTMLParser
}

// Mapping is one compiled site mapping.
type Mapping struct {
	Name   string
	File   string     // where it was loaded from, for messages
	Render RenderMode // when its pages are rendered in a browser (see RenderMode)
	// RenderResources lists the resource kinds (RenderResourceKinds) a
	// browser rendering the mapping's pages may fetch besides scripts and
	// their requests.
	RenderResources []string
	Priority        int  // higher is crawled first
	Follow          bool // generic outbound links of matching pages are followed (default true)
	Description     string

	nameOff  int
	patterns []*pattern // none: the mapping applies to every page but marks no URL as wanted
	parsers  []*rule
	fields   []*rule
	fixtures []Fixture
}

// Generic reports whether the mapping has no url_patterns: it runs on every
// page but does not make a URL count as matching (see Set.Matches).
func (m *Mapping) Generic() bool { return len(m.patterns) == 0 }

// Fixtures returns the mapping's saved-page tests.
func (m *Mapping) Fixtures() []Fixture { return m.fixtures }

// FieldNames lists the mapping's field names in declaration order.
func (m *Mapping) FieldNames() []string {
	out := make([]string, len(m.fields))
	for i, f := range m.fields {
		out[i] = f.name
	}
	return out
}

// FieldType is the type the mapping's field name declares (TypeString when
// it declares none), "" when the mapping has no such field.
func (m *Mapping) FieldType(name string) string {
	for _, f := range m.fields {
		if f.name == name {
			if f.typ == "" {
				return TypeString
			}
			return f.typ
		}
	}
	return ""
}

// MatchURL reports whether one of the mapping's url_patterns matches
// rawURL (a generic mapping matches every URL).
func (m *Mapping) MatchURL(rawURL string) bool {
	if len(m.patterns) == 0 {
		return true
	}
	for _, p := range m.patterns {
		if p.MatchString(rawURL) {
			return true
		}
	}
	return false
}

// Extraction is what the mappings found on one page.
type Extraction struct {
	Mappings []string      // names of mappings whose url_patterns matched
	Fields   []FieldValues // one entry per matched mapping field that yielded values
	Links    []string      // from url_parsers: absolute, normalized, deduplicated
	OutLinks []string      // every http(s) link on the page (a/area href): absolute, normalized, deduplicated, binary file types removed
	Errors   []FieldError  // processors that failed; other fields went on

	// JSOnly says the page looks like a shell whose content JavaScript
	// writes (see JSOnly). It is looked for only when a rendering could
	// add something: a mapping with url_patterns and render auto matched
	// the page and left one of its fields empty.
	JSOnly bool `json:",omitempty"`

	// Fingerprint is the page's content fingerprint for the content-seen
	// test (see PageFingerprint), taken by Extract from the tree it
	// parsed anyway, so a crawled page is parsed once. Traces and fixture
	// runs leave it zero, and it is not part of an extraction shown as
	// JSON (goldens, `mappings try`): it identifies the page, it is not
	// something the mappings found.
	Fingerprint Fingerprint `json:"-"`
}

// FieldValues is one field of one mapping on one page.
type FieldValues struct {
	Mapping string
	Field   string
	Values  []string
	Match   bool // the field is a match key (attribution)
}

// FieldError says where extraction failed on a page.
type FieldError struct {
	Mapping   string
	Field     string // or "url_parsers[i]"
	Processor string // "processors[i] (type)"
	Err       string
}

func (e FieldError) String() string {
	return e.Mapping + "/" + e.Field + "/" + e.Processor + ": " + e.Err
}

// LoadDir loads every *.json file in dir (a file may hold one mapping object
// or an array of them). Errors are collected for all files and returned
// together (errors.Join), each naming file, mapping, field and processor.
// Files named schema.json or *.schema.json are JSON Schemas, not mappings,
// and are skipped.
func LoadDir(dir string) (*Set, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("load mappings: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("load mappings: %s is not a directory", dir)
	}
	return load(os.DirFS(dir), ".", func(name string) string { return filepath.Join(dir, name) })
}

// LoadFS is LoadDir over a file system (the embedded bundled mappings).
func LoadFS(fsys fs.FS, dir string) (*Set, error) {
	if dir == "" {
		dir = "."
	}
	return load(fsys, dir, func(name string) string { return path.Join(dir, name) })
}

// Check loads dir and returns every problem found, for `mappings check`.
func Check(dir string) []error {
	_, err := LoadDir(dir)
	return Unjoin(err)
}

// Unjoin splits an error made by errors.Join into its parts.
func Unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Load compiles mappings from in-memory files (name → content), for tests
// and tools that hold mappings outside a directory.
func Load(files map[string][]byte) (*Set, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return build(names, func(n string) ([]byte, error) { return files[n], nil }, func(n string) string { return n })
}

func isMappingFile(name string) bool {
	return strings.HasSuffix(name, ".json") && name != "schema.json" && !strings.HasSuffix(name, ".schema.json")
}

func load(fsys fs.FS, dir string, label func(string) string) (*Set, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("load mappings: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && isMappingFile(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	read := func(n string) ([]byte, error) { return fs.ReadFile(fsys, path.Join(dir, n)) }
	return build(names, read, label)
}

func build(names []string, read func(string) ([]byte, error), label func(string) string) (*Set, error) {
	s := &Set{}
	var errs []error
	h := sha256.New()
	byName := map[string]*Mapping{}
	for _, n := range names {
		file := label(n)
		data, err := read(n)
		if err != nil {
			errs = append(errs, &LoadError{File: file, Err: fmt.Errorf("read: %w", err)})
			continue
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(data))
		h.Write(data)
		ms, fileErrs := loadMappings(file, data)
		errs = append(errs, fileErrs...)
		for _, m := range ms {
			if prev, dup := byName[m.Name]; dup {
				e := &LoadError{File: file, Mapping: m.Name, Err: fmt.Errorf("duplicate mapping name, already defined in %s", prev.File)}
				e.Line, e.Col = lineCol(data, m.nameOff)
				errs = append(errs, e)
				continue
			}
			byName[m.Name] = m
			s.mappings = append(s.mappings, m)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s.digest = hex.EncodeToString(h.Sum(nil))
	for _, m := range s.mappings {
		for _, f := range m.fields {
			s.fields = append(s.fields, f.name)
		}
		for _, r := range slices.Concat(m.parsers, m.fields) {
			for _, st := range r.steps {
				s.planTags = append(s.planTags, planTags(st.proc)...)
			}
		}
	}
	s.planTags = sortedUnique(s.planTags)
	s.plan = newScanPlan(s.planTags)
	s.fields = sortedUnique(s.fields)
	return s, nil
}

// planTags are the tags the fast XPath plans of p (and of the chains
// inside it) look elements up by.
func planTags(p Processor) []string {
	switch x := p.(type) {
	case *xpathProc:
		if x.plan != nil {
			return []string{x.plan.tag}
		}
	case *concatProc:
		var out []string
		for _, q := range x.processors() {
			out = append(out, planTags(q)...)
		}
		return out
	}
	return nil
}

// Mappings lists the mappings in load order (sorted by file name, then position).
func (s *Set) Mappings() []*Mapping {
	if s == nil {
		return nil
	}
	return s.mappings
}

// Mapping returns the mapping called name, or nil.
func (s *Set) Mapping(name string) *Mapping {
	for _, m := range s.Mappings() {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Digest identifies the set's content; dispatcher and supervisors compare it.
func (s *Set) Digest() string {
	if s == nil {
		return ""
	}
	return s.digest
}

// FieldNames lists, sorted, every field name some mapping can produce.
func (s *Set) FieldNames() []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s.fields...)
}

// MatchFields lists, sorted, the field names some mapping marks as a match
// key: the only values of a record that attribution compares pages with.
func (s *Set) MatchFields() []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, m := range s.Mappings() {
		for _, f := range m.fields {
			if f.match {
				out = append(out, f.name)
			}
		}
	}
	return sortedUnique(out)
}

// Matches reports whether any mapping's url_patterns match rawURL, and the
// highest Priority among those that do. Generic mappings (no url_patterns)
// run on every page but do not count here: they say nothing about whether
// a link is worth crawling first.
func (s *Set) Matches(rawURL string) (matched bool, priority int) {
	for _, m := range s.Mappings() {
		if m.Generic() || !m.MatchURL(rawURL) {
			continue
		}
		if !matched || m.Priority > priority {
			priority = m.Priority
		}
		matched = true
	}
	return matched, priority
}
