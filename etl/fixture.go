package etl

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
)

// FixtureResult is the outcome of one mapping fixture.
type FixtureResult struct {
	Mapping string
	Fixture Fixture
	Fields  map[string][]string // what the mapping produced
	Links   []string
	Diff    []string // one line per mismatch; empty when the fixture passes
	Err     error    // the saved page could not be read
}

// OK reports whether the fixture passed.
func (r FixtureResult) OK() bool { return r.Err == nil && len(r.Diff) == 0 }

// RunFixture runs mapping m alone on a fixture's saved page and compares
// the result with the expectation: every expected field must have exactly
// the expected values, a field produced but not expected is a mismatch
// too, and links are compared when the fixture lists them.
func (s *Set) RunFixture(m *Mapping, f Fixture, body []byte) FixtureResult {
	res := FixtureResult{Mapping: m.Name, Fixture: f, Fields: map[string][]string{}}
	ex := s.extract(f.URL, body, f.ContentType, extractOpts{only: m.Name})
	if !m.MatchURL(f.URL) {
		res.Diff = append(res.Diff, fmt.Sprintf("url %s does not match the mapping's url_patterns", f.URL))
	}
	for _, fv := range ex.Fields {
		res.Fields[fv.Field] = fv.Values
	}
	res.Links = ex.Links
	for _, e := range ex.Errors {
		res.Diff = append(res.Diff, "error: "+e.String())
	}
	names := map[string]bool{}
	for k := range f.Fields {
		names[k] = true
	}
	for k := range res.Fields {
		names[k] = true
	}
	for _, k := range sortedUnique(keys(names)) {
		want, got := f.Fields[k], res.Fields[k]
		if !reflect.DeepEqual(nilIfEmpty(want), nilIfEmpty(got)) {
			res.Diff = append(res.Diff, fmt.Sprintf("field %s:\n  - want %q\n  + got  %q", k, want, got))
		}
	}
	if f.Links != nil && !reflect.DeepEqual(nilIfEmpty(f.Links), nilIfEmpty(res.Links)) {
		res.Diff = append(res.Diff, fmt.Sprintf("links:\n  - want %q\n  + got  %q", f.Links, res.Links))
	}
	return res
}

// TestFixtures runs every fixture of every mapping, reading saved pages
// relative to the mapping's file (mapping files loaded by LoadDir carry a
// path of the host file system).
func (s *Set) TestFixtures() []FixtureResult {
	return s.testFixtures(func(m *Mapping, f Fixture) ([]byte, error) {
		return os.ReadFile(filepath.Join(filepath.Dir(m.File), filepath.FromSlash(f.File)))
	})
}

// TestFixturesFS is TestFixtures for a set loaded with LoadFS from fsys.
func (s *Set) TestFixturesFS(fsys fs.FS) []FixtureResult {
	return s.testFixtures(func(m *Mapping, f Fixture) ([]byte, error) {
		return fs.ReadFile(fsys, path.Join(path.Dir(m.File), f.File))
	})
}

func (s *Set) testFixtures(read func(*Mapping, Fixture) ([]byte, error)) []FixtureResult {
	var out []FixtureResult
	for _, m := range s.Mappings() {
		for _, f := range m.fixtures {
			body, err := read(m, f)
			if err != nil {
				out = append(out, FixtureResult{Mapping: m.Name, Fixture: f, Err: fmt.Errorf("fixture %s: %w", f.File, err)})
				continue
			}
			out = append(out, s.RunFixture(m, f, body))
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func nilIfEmpty(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	return ss
}

// String renders a result like a test report.
func (r FixtureResult) String() string {
	if r.Err != nil {
		return fmt.Sprintf("FAIL %s %s: %v", r.Mapping, r.Fixture.File, r.Err)
	}
	if len(r.Diff) == 0 {
		return fmt.Sprintf("ok   %s %s", r.Mapping, r.Fixture.File)
	}
	return fmt.Sprintf("FAIL %s %s\n%s", r.Mapping, r.Fixture.File, strings.Join(r.Diff, "\n"))
}
