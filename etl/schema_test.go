package etl

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"backfill/mappings"
)

func testSchema(t *testing.T) *formatSchema {
	t.Helper()
	fs, err := loadFormatSchema()
	if err != nil {
		t.Fatalf("schema does not compile: %v", err)
	}
	return fs
}

// schemaIssues validates data against the schema alone.
func schemaIssues(t *testing.T, data string) []schemaIssue {
	t.Helper()
	root, err := parseJSONTree([]byte(data))
	if err != nil {
		t.Fatalf("test input is not JSON: %v\n%s", err, data)
	}
	return testSchema(t).validate(root)
}

// loaderErrors runs the compiler's own checks alone, without the schema.
func loaderErrors(t *testing.T, data string) []error {
	t.Helper()
	root, err := parseJSONTree([]byte(data))
	if err != nil {
		t.Fatalf("test input is not JSON: %v", err)
	}
	l := &fileLoader{file: "x.json", data: []byte(data)}
	switch root.kind {
	case 'o':
		l.decodeMapping(root, "")
	case 'a':
		for _, n := range root.elems {
			if n.kind == 'o' {
				l.decodeMapping(n, "")
			} else {
				l.fail(n, "", "", "not an object")
			}
		}
		if len(root.elems) == 0 {
			l.fail(root, "", "", "empty")
		}
	default:
		l.fail(root, "", "", "not a mapping")
	}
	return l.errs
}

func TestSchemaIsEmbeddedAndCompiles(t *testing.T) {
	fs := testSchema(t)
	if got := fs.raw["$schema"]; got != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v, want draft 2020-12", got)
	}
	if string(Schema()) != string(mappings.Schema) || len(Schema()) == 0 {
		t.Error("Schema() does not return the embedded mappings/schema.json")
	}
	disk, err := os.ReadFile(filepath.Join("..", "mappings", "schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(disk) != string(mappings.Schema) {
		t.Error("embedded schema differs from mappings/schema.json")
	}
}

// TestSchemaKnowsEveryProcessor keeps the schema and the registry in step:
// every registered processor type (but the tests' own) is offered by the
// schema with a parameters definition, and nothing else is.
func TestSchemaKnowsEveryProcessor(t *testing.T) {
	fs := testSchema(t)
	proc := fs.fragment("#/$defs/processor")
	enum, _ := asMap(asMap(proc["properties"])["type"])["enum"].([]any)
	var inSchema []string
	for _, e := range enum {
		inSchema = append(inSchema, fmt.Sprint(e))
	}
	sort.Strings(inSchema)
	var registered []string
	for _, n := range ProcessorTypes() {
		if !strings.HasPrefix(n, "test-") {
			registered = append(registered, n)
		}
	}
	if strings.Join(inSchema, ",") != strings.Join(registered, ",") {
		t.Errorf("schema processor types\n  %v\nregistry\n  %v", inSchema, registered)
	}
	descs, _ := asMap(asMap(proc["properties"])["type"])["enumDescriptions"].([]any)
	if len(descs) != len(enum) {
		t.Errorf("%d enumDescriptions for %d processor types", len(descs), len(enum))
	}
	for _, n := range registered {
		p := fs.fragment("#/$defs/parameters/" + n)
		if p == nil || description(p) == "" {
			t.Errorf("processor %q has no described parameters definition in the schema", n)
			continue
		}
		// Each parameter the schema offers must be one the processor takes:
		// the loader must not call it unknown.
		for k, v := range asMap(p["properties"]) {
			if k == "$comment" {
				continue
			}
			if asMap(v)["description"] == nil {
				t.Errorf("%s parameter %q has no description", n, k)
			}
			params := fmt.Sprintf(`{%q: null}`, k)
			for _, e := range loaderErrors(t, fmt.Sprintf(`{"name":"m","fields":[{"name":"f","processors":[{"type":%q,"parameters":%s}]}]}`, n, params)) {
				if strings.Contains(e.Error(), "unknown parameter") {
					t.Errorf("schema offers %s parameter %q, the processor refuses it: %v", n, k, e)
				}
			}
		}
	}
}

// TestSchemaAcceptsValidMappings: every bundled and test mapping is valid
// under the schema (the loader accepts them, so the two must agree).
func TestSchemaAcceptsValidMappings(t *testing.T) {
	var files []string
	for _, g := range []string{"../mappings/*.json", "testdata/mappings/*.json"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	n := 0
	for _, f := range files {
		if filepath.Base(f) == "schema.json" || filepath.Ext(f) != ".json" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), `"name"`) { // a saved JSON page, not a mapping
			continue
		}
		n++
		for _, is := range schemaIssues(t, string(data)) {
			t.Errorf("%s: %s: %s", f, joinPointer(is.ptr), is.msg)
		}
	}
	if n < 6 {
		t.Errorf("only %d mapping files checked", n)
	}
}

// TestSchemaAndLoaderAgree runs a table of broken mappings through the
// schema alone and through the compiler's checks alone: both must refuse
// each one, except the problems a schema cannot see (marked semantic),
// which only the compiler refuses.
func TestSchemaAndLoaderAgree(t *testing.T) {
	const ok = `{"name":"m","fields":[{"name":"f","processors":[{"type":"trim"}]}]}`
	field := func(f string) string { return `{"name":"m","fields":[` + f + `]}` }
	proc := func(p string) string { return field(`{"name":"f","processors":[` + p + `]}`) }
	for _, tc := range []struct {
		name, data string
		semantic   bool
	}{
		{"no name", `{"fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"blank name", `{"name":"  ","fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"name not string", `{"name":3,"fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"neither fields nor parsers", `{"name":"m"}`, false},
		{"unknown mapping key", `{"name":"m","feilds":[],"fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"render unknown mode", `{"name":"m","render":"yes","fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"render number", `{"name":"m","render":1,"fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"render_resources not array", `{"name":"m","render_resources":"image","fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"render_resources unknown kind", `{"name":"m","render_resources":["image","favicon"],"fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"render_resources not string", `{"name":"m","render_resources":[3],"fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"follow not bool", `{"name":"m","follow":1,"fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"priority fraction", `{"name":"m","priority":1.5,"fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"priority string", `{"name":"m","priority":"1","fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"url_patterns not array", `{"name":"m","url_patterns":"x","fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"url pattern type", `{"name":"m","url_patterns":[{"type":"glob","pattern":"x"}],"fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"url pattern missing", `{"name":"m","url_patterns":[{"type":"regex"}],"fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"url pattern not object", `{"name":"m","url_patterns":["x"],"fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, false},
		{"bad url regex", `{"name":"m","url_patterns":[{"pattern":"(x"}],"fields":[{"name":"f","processors":[{"type":"trim"}]}]}`, true},
		{"parser no processors", `{"name":"m","url_parsers":[{"name":"p"}]}`, false},
		{"parser unknown key", `{"name":"m","url_parsers":[{"match":true,"processors":[{"type":"trim"}]}]}`, false},
		{"field no name", field(`{"processors":[{"type":"trim"}]}`), false},
		{"field not object", field(`"f"`), false},
		{"field empty processors", field(`{"name":"f","processors":[]}`), false},
		{"field type", field(`{"name":"f","type":"phone","processors":[{"type":"trim"}]}`), false},
		{"field match", field(`{"name":"f","match":"yes","processors":[{"type":"trim"}]}`), false},
		{"field all", field(`{"name":"f","all":1,"processors":[{"type":"trim"}]}`), false},
		{"field validate type", field(`{"name":"f","validate":1,"processors":[{"type":"trim"}]}`), false},
		{"field validate regex", field(`{"name":"f","validate":"[x","processors":[{"type":"trim"}]}`), true},
		{"field twice", field(`{"name":"f","processors":[{"type":"trim"}]},{"name":"f","processors":[{"type":"trim"}]}`), true},
		{"processor no type", proc(`{"parameters":{}}`), false},
		{"processor unknown type", proc(`{"type":"trimm"}`), false},
		{"processor unknown key", proc(`{"type":"trim","params":{}}`), false},
		{"parameters not object", proc(`{"type":"trim","parameters":"x"}`), false},
		{"xpath no parameters", proc(`{"type":"xpath"}`), false},
		{"xpath no expression", proc(`{"type":"xpath","parameters":{}}`), false},
		{"xpath blank expression", proc(`{"type":"xpath","parameters":{"expression":"  "}}`), false},
		{"xpath expression number", proc(`{"type":"xpath","parameters":{"expression":1}}`), false},
		{"xpath html", proc(`{"type":"xpath","parameters":{"expression":"//a","html":"all"}}`), false},
		{"xpath typo", proc(`{"type":"xpath","parameters":{"expresion":"//a"}}`), false},
		{"xpath invalid", proc(`{"type":"xpath","parameters":{"expression":"//a[["}}`), true},
		{"regex no pattern", proc(`{"type":"regex","parameters":{"group":1}}`), false},
		{"regex group negative", proc(`{"type":"regex","parameters":{"pattern":"(a)","group":-1}}`), false},
		{"regex group bool", proc(`{"type":"regex","parameters":{"pattern":"(a)","group":true}}`), false},
		{"regex group out of range", proc(`{"type":"regex","parameters":{"pattern":"(a)","group":2}}`), true},
		{"replace no replacement", proc(`{"type":"replace","parameters":{"pattern":"a"}}`), false},
		{"trim cutset number", proc(`{"type":"trim","parameters":{"cutset":1}}`), false},
		{"lower takes nothing", proc(`{"type":"lower","parameters":{"x":1}}`), false},
		{"split neither", proc(`{"type":"split","parameters":{}}`), false},
		{"split both", proc(`{"type":"split","parameters":{"separator":",","pattern":";"}}`), false},
		{"nth no index", proc(`{"type":"nth"}`), false},
		{"nth fraction", proc(`{"type":"nth","parameters":{"index":1.5}}`), false},
		{"first index", proc(`{"type":"first","parameters":{"index":1}}`), false},
		{"default no value", proc(`{"type":"default","parameters":{}}`), false},
		{"jsonpath no expression", proc(`{"type":"jsonpath"}`), false},
		{"jsonpath invalid", proc(`{"type":"jsonpath","parameters":{"expression":"$.["}}`), true},
		{"jsonld type number", proc(`{"type":"jsonld","parameters":{"type":3}}`), false},
		{"jsonld empty type", proc(`{"type":"jsonld","parameters":{"type":[""]}}`), false},
		{"meta no name", proc(`{"type":"meta"}`), false},
		{"number decimal", proc(`{"type":"number","parameters":{"decimal":"'"}}`), false},
		{"date order", proc(`{"type":"date","parameters":{"order":"ymd"}}`), false},
		{"fixture not object", `{"name":"m","fields":[{"name":"f","processors":[{"type":"trim"}]}],"fixtures":[1]}`, false},
		{"fixture no url", `{"name":"m","fields":[{"name":"f","processors":[{"type":"trim"}]}],"fixtures":[{"file":"a.html"}]}`, false},
		{"fixture expect key", `{"name":"m","fields":[{"name":"f","processors":[{"type":"trim"}]}],"fixtures":[{"url":"u","file":"f","expect":{"field":{}}}]}`, false},
		{"fixture expect value", `{"name":"m","fields":[{"name":"f","processors":[{"type":"trim"}]}],"fixtures":[{"url":"u","file":"f","expect":{"fields":{"f":1}}}]}`, false},
		{"fixture links", `{"name":"m","fields":[{"name":"f","processors":[{"type":"trim"}]}],"fixtures":[{"url":"u","file":"f","expect":{"links":[1]}}]}`, false},
		{"empty array", `[]`, false},
		{"array of junk", `[` + ok + `, 1]`, false},
		{"not an object", `"mapping"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(loaderErrors(t, tc.data)) == 0 {
				t.Errorf("the compiler accepts %s", tc.data)
			}
			issues := schemaIssues(t, tc.data)
			if tc.semantic && len(issues) > 0 {
				t.Errorf("schema refuses a problem marked semantic: %s", issues[0].msg)
			}
			if !tc.semantic && len(issues) == 0 {
				t.Errorf("the schema accepts %s", tc.data)
			}
			// Through Load, every problem comes back located.
			_, err := Load(map[string][]byte{"x.json": []byte(tc.data)})
			if err == nil {
				t.Fatal("Load accepted it")
			}
			for _, e := range Unjoin(err) {
				if !strings.HasPrefix(e.Error(), "x.json:1:") {
					t.Errorf("error without line:col: %v", e)
				}
			}
		})
	}
	if len(loaderErrors(t, ok)) > 0 || len(schemaIssues(t, ok)) > 0 {
		t.Error("the valid base case is refused")
	}
}

// TestSchemaErrorsLocated checks how schema violations are placed and
// worded: line:col of the offending value, its JSON pointer, a hint.
func TestSchemaErrorsLocated(t *testing.T) {
	data := "[\n {\"name\": \"a\",\n  \"fields\": [{\"name\": \"f\", \"processors\": [{\"type\": \"xpath\", \"parameters\": {\"expresion\": \"//a\"}}]}],\n  \"priority\": \"high\"},\n {\"name\": \"b\", \"url_parsers\": [{\"processors\": [{\"type\": \"nthh\"}]}]}\n]"
	issues := schemaIssues(t, data)
	root, _ := parseJSONTree([]byte(data))
	var got []string
	for _, is := range issues {
		line, col := lineCol([]byte(data), is.node.off)
		m, where := describePointer(root, is.ptr)
		got = append(got, fmt.Sprintf("%d:%d %s %s | %s | %s | %s", line, col, joinPointer(is.ptr), m, where, is.msg, is.hint))
	}
	want := []string{
		`3:75 /0/fields/0/processors/0/parameters a | fields[0] "f": processors[0] (xpath): parameters | missing "expression" | XPath 1.0 expression, e.g.`,
		`3:89 /0/fields/0/processors/0/parameters/expresion a | fields[0] "f": processors[0] (xpath): parameters.expresion | unknown key "expresion" (did you mean "expression"?) | allowed keys: $comment, expression, first, html`,
		`4:15 /0/priority a | priority | want integer, got string | Links matching a higher-priority mapping are crawled first.`,
		`5:57 /1/url_parsers/0/processors/0/type b | url_parsers[0]: processors[0] (nthh): type | "nthh" is not one of concat, date, default, email, first, html-unescape, join, jsonld, jsonpath, last, lower, meta, nth, number, regex, replace, split, trim, unique, upper, url, xpath (did you mean "nth"?) | The processor type.`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d issues, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("issue %d\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}
