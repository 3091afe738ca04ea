package etl

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

var (
	schemaFile = filepath.Join("..", "mappings", "schema.json")
	docsFile   = filepath.Join("..", "docs", "mappings.md")
)

// TestGeneratedSchemaAndDocs holds mappings/schema.json and the processor
// reference of docs/mappings.md to what the processors' files say: the
// generator run on the files on disk must leave them as they are. With
// -update (go generate ./etl) it rewrites them.
func TestGeneratedSchemaAndDocs(t *testing.T) {
	for _, f := range []struct {
		path string
		gen  func([]byte) ([]byte, error)
	}{{schemaFile, generateSchema}, {docsFile, generateDocs}} {
		disk, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := f.gen(disk)
		if err != nil {
			t.Fatalf("%s: %v", f.path, err)
		}
		if *update && !bytes.Equal(disk, want) {
			if err := os.WriteFile(f.path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote %s", f.path)
			continue
		}
		if line, got, exp := firstDiff(disk, want); line > 0 {
			t.Errorf("%s is stale at line %d (run go generate ./etl):\n have %q\n want %q", f.path, line, got, exp)
		}
	}
}

// firstDiff returns the first line where a and b differ (1-based), 0 when
// they are equal.
func firstDiff(a, b []byte) (int, string, string) {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < max(len(la), len(lb)); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y || (i >= len(la)) != (i >= len(lb)) {
			return i + 1, x, y
		}
	}
	return 0, "", ""
}

// registeredTypes is every registered processor type but the tests' own.
func registeredTypes(t *testing.T) []string {
	var out []string
	for _, n := range ProcessorTypes() {
		if strings.HasPrefix(n, "test-") {
			continue
		}
		if specs[n] == nil {
			t.Errorf("processor %q is registered without a procSpec (use registerProc)", n)
			continue
		}
		out = append(out, n)
	}
	return out
}

func goParams(n string) (names, required []string) {
	for _, p := range paramsOf(specs[n].params) {
		names = append(names, p.name)
		if p.required {
			required = append(required, p.name)
		}
	}
	sort.Strings(names)
	sort.Strings(required)
	return names, required
}

// TestDocsAgreeWithProcessors reads the processor reference in
// docs/mappings.md on its own and checks it both ways against the Go
// parameter structs: every processor and parameter in the docs exists, and
// every one that exists is in the docs, required where the struct says so.
func TestDocsAgreeWithProcessors(t *testing.T) {
	data, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	md := string(data)
	begin, end := strings.Index(md, docsBegin), strings.Index(md, docsEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no generated processor reference", docsFile)
	}
	heading := regexp.MustCompile(`(?m)^#### (\S+)$`)
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| [^|]* \\| (yes)? \\|")
	docs := map[string][]string{}   // processor → parameters
	docReq := map[string][]string{} // processor → required parameters
	sections := heading.FindAllStringSubmatchIndex(md[begin:end], -1)
	for i, m := range sections {
		name := md[begin+m[2] : begin+m[3]]
		stop := end - begin
		if i+1 < len(sections) {
			stop = sections[i+1][0]
		}
		docs[name] = []string{}
		for _, r := range row.FindAllStringSubmatch(md[begin+m[1]:begin+stop], -1) {
			docs[name] = append(docs[name], r[1])
			if r[2] == "yes" {
				docReq[name] = append(docReq[name], r[1])
			}
		}
	}
	reg := registeredTypes(t)
	for _, n := range reg {
		ps, ok := docs[n]
		if !ok {
			t.Errorf("processor %q is not in %s", n, docsFile)
			continue
		}
		want, wantReq := goParams(n)
		sort.Strings(ps)
		got := docReq[n]
		sort.Strings(got)
		if fmt.Sprint(ps) != fmt.Sprint(want) && !(len(ps) == 0 && len(want) == 0) {
			t.Errorf("%s parameters: docs %v, Go %v", n, ps, want)
		}
		if fmt.Sprint(got) != fmt.Sprint(wantReq) && !(len(got) == 0 && len(wantReq) == 0) {
			t.Errorf("%s required parameters: docs %v, Go %v", n, got, wantReq)
		}
	}
	for n := range docs {
		if !slices.Contains(reg, n) {
			t.Errorf("%s documents processor %q, which is not registered", docsFile, n)
		}
	}
}

// TestSchemaAgreesWithProcessors checks the schema's parameter definitions
// both ways against the Go parameter structs: the same names, the same
// required ones, and a processor needing parameters where one is required.
func TestSchemaAgreesWithProcessors(t *testing.T) {
	fs := testSchema(t)
	defs := asMap(asMap(fs.raw["$defs"])["parameters"])
	reg := registeredTypes(t)
	for _, n := range reg {
		def := asMap(defs[n])
		if def == nil {
			t.Errorf("schema has no parameters of %q", n)
			continue
		}
		var names []string
		for k := range asMap(def["properties"]) {
			if k != "$comment" {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		var req []string
		for _, r := range asSlice(def["required"]) {
			req = append(req, fmt.Sprint(r))
		}
		sort.Strings(req)
		want, wantReq := goParams(n)
		if fmt.Sprint(names) != fmt.Sprint(want) && !(len(names) == 0 && len(want) == 0) {
			t.Errorf("%s parameters: schema %v, Go %v", n, names, want)
		}
		if fmt.Sprint(req) != fmt.Sprint(wantReq) && !(len(req) == 0 && len(wantReq) == 0) {
			t.Errorf("%s required parameters: schema %v, Go %v", n, req, wantReq)
		}
		// The loader accepts every parameter of the struct and a comment.
		for _, p := range append(want, "$comment") {
			data := fmt.Sprintf(`{"name":"m","fields":[{"name":"f","processors":[{"type":%q,"parameters":{%q: null}}]}]}`, n, p)
			for _, e := range loaderErrors(t, data) {
				if strings.Contains(e.Error(), "unknown parameter") {
					t.Errorf("%s refuses its own parameter %q: %v", n, p, e)
				}
			}
		}
	}
	for n := range defs {
		if !slices.Contains(reg, n) {
			t.Errorf("schema defines parameters of %q, which is not registered", n)
		}
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
