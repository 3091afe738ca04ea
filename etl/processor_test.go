package etl

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// chainOf builds the processors of a chain from JSON, as the loader does.
func chainOf(t testing.TB, procs string) []Processor {
	t.Helper()
	var raw []struct {
		Type       string          `json:"type"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal([]byte(procs), &raw); err != nil {
		t.Fatalf("bad test chain %s: %v", procs, err)
	}
	var out []Processor
	for _, r := range raw {
		f, ok := registry[r.Type]
		if !ok {
			t.Fatalf("no processor %q", r.Type)
		}
		p, err := f(r.Parameters)
		if err != nil {
			t.Fatalf("build %s: %v", r.Type, err)
		}
		out = append(out, p)
	}
	return out
}

func runProcessors(t testing.TB, procs, pageURL, body, ctype string) ([]string, error) {
	doc := NewDocument(pageURL, []byte(body), ctype)
	vals := doc.docValue()
	for _, p := range chainOf(t, procs) {
		var err error
		if vals, err = p.Process(vals, doc); err != nil {
			return nil, err
		}
	}
	out := []string{}
	for _, v := range vals {
		out = append(out, v.Text)
	}
	return out, nil
}

const page = `<!DOCTYPE html><html><head>
<title>T</title>
<base href="https://base.example/dir/">
<meta property="og:title" content="Ada Example">
<meta name="twitter:creator" content="@ada">
<meta name="description" content="  A   person ">
<script type="application/ld+json">
{"@context":"https://schema.org","@graph":[
 {"@type":"Person","name":"Ada Example","jobTitle":"Engineer",
  "address":{"@type":"PostalAddress","addressLocality":"Lisbon"},
  "sameAs":["https://social.example/ada","https://code.example/ada"],
  "worksFor":{"@type":"Organization","name":"Analytical Engines Ltd"}},
 {"@type":["schema:Organization"],"name":"Other Org"}]}
</script>
<script type="application/ld+json">{ broken json</script>
<script id="data" type="application/json">{"person":{"name":"Ada","langs":["go","c"],"age":36,"ok":true,"none":null}}</script>
</head><body>
<div class="card" id="c1"><h2>Ada <b>Example</b></h2><a href="/ada">profile</a><span class="mail">ada [at] ada [dot] example</span></div>
<div class="card" id="c2"><h2>Bob Example</h2><a href="../bob#x">profile</a><span class="mail">Bob.Example(at)bob.example</span></div>
<p class="born">Born on March 3rd, 1980 &amp; raised</p>
<p class="n">Salary: 1.234.567,89 €</p>
<ul><li>go</li><li> c </li><li>go</li></ul>
</body></html>`

// concatPage holds values in pieces: two addresses in JSON-LD, the
// second without a country, and a name in three elements.
const concatPage = `<html><head><script type="application/ld+json">
{"@type":"Person","name":"Ada","address":[{"@type":"PostalAddress","addressLocality":"Medellín","addressCountry":"Colombia"},
 {"@type":"PostalAddress","addressLocality":"Lyon","postalCode":"69001","addressCountry":" France "}]}
</script></head><body><h2><span class="given">Ada</span> <span class="family">Lovelace</span> <span class="suffix"> PhD </span></h2></body></html>`

// processorCase is one chain of processors run on a page, and what it
// must give.
type processorCase struct {
	name  string
	procs string
	body  string // page when empty
	ctype string
	want  []string
	err   string // substring of the expected error
}

// processorCases are TestProcessors' table; TestEveryProcessorIsTested
// holds it to the processor specs.
var processorCases = []processorCase{
	// xpath
	{name: "xpath text", procs: `[{"type":"xpath","parameters":{"expression":"//div[@class='card']/h2"}}]`, want: []string{"Ada Example", "Bob Example"}},
	{name: "xpath first", procs: `[{"type":"xpath","parameters":{"expression":"//h2","first":true}}]`, want: []string{"Ada Example"}},
	{name: "xpath attribute", procs: `[{"type":"xpath","parameters":{"expression":"//div/a/@href"}}]`, want: []string{"/ada", "../bob#x"}},
	{name: "xpath text nodes", procs: `[{"type":"xpath","parameters":{"expression":"//h2/text()"}}]`, want: []string{"Ada ", "Bob Example"}},
	{name: "xpath inner html", procs: `[{"type":"xpath","parameters":{"expression":"//div[@id='c1']/h2","html":"inner"}}]`, want: []string{"Ada <b>Example</b>"}},
	{name: "xpath outer html", procs: `[{"type":"xpath","parameters":{"expression":"//div[@id='c1']/h2","html":"outer"}}]`, want: []string{"<h2>Ada <b>Example</b></h2>"}},
	{name: "xpath scalar count", procs: `[{"type":"xpath","parameters":{"expression":"count(//div[@class='card'])"}}]`, want: []string{"2"}},
	{name: "xpath scalar string", procs: `[{"type":"xpath","parameters":{"expression":"normalize-space(//p[@class='born'])"}}]`, want: []string{"Born on March 3rd, 1980 & raised"}},
	{name: "xpath relative", procs: `[{"type":"xpath","parameters":{"expression":"//div[@class='card']"}},{"type":"xpath","parameters":{"expression":"./a/@href"}}]`, want: []string{"/ada", "../bob#x"}},
	{name: "xpath over text", procs: `[{"type":"xpath","parameters":{"expression":"//div[@id='c1']","html":"inner"}},{"type":"xpath","parameters":{"expression":"//b"}}]`, want: []string{"Example"}},
	{name: "xpath none", procs: `[{"type":"xpath","parameters":{"expression":"//nothing"}}]`, want: []string{}},
	{name: "xpath on json", procs: `[{"type":"xpath","parameters":{"expression":"//a"}}]`, body: `{"a":1}`, ctype: "application/json", err: "xpath needs an HTML document"},
	// regex
	{name: "regex whole", procs: `[{"type":"xpath","parameters":{"expression":"//h2"}},{"type":"regex","parameters":{"pattern":"\\w+ Ex"}}]`, want: []string{"Ada Ex", "Bob Ex"}},
	{name: "regex group default 1", procs: `[{"type":"xpath","parameters":{"expression":"//h2"}},{"type":"regex","parameters":{"pattern":"(\\w+) Example"}}]`, want: []string{"Ada", "Bob"}},
	{name: "regex group 0", procs: `[{"type":"xpath","parameters":{"expression":"//h2"}},{"type":"regex","parameters":{"pattern":"(\\w+) Example","group":0}}]`, want: []string{"Ada Example", "Bob Example"}},
	{name: "regex named group", procs: `[{"type":"xpath","parameters":{"expression":"//h2"}},{"type":"regex","parameters":{"pattern":"(?P<first>\\w+) (?P<last>\\w+)","group":"last"}}]`, want: []string{"Example", "Example"}},
	{name: "regex all", procs: `[{"type":"xpath","parameters":{"expression":"//p[@class='born']"}},{"type":"regex","parameters":{"pattern":"\\d+","all":true}}]`, want: []string{"3", "1980"}},
	{name: "regex filters", procs: `[{"type":"xpath","parameters":{"expression":"//h2"}},{"type":"regex","parameters":{"pattern":"^Bob"}}]`, want: []string{"Bob"}},
	{name: "regex lookahead", procs: `[{"type":"xpath","parameters":{"expression":"//h2"}},{"type":"regex","parameters":{"pattern":"^(?!Bob)\\w+"}}]`, want: []string{"Ada"}},
	{name: "regex on body", procs: `[{"type":"regex","parameters":{"pattern":"<title>(.*?)</title>"}}]`, want: []string{"T"}},
	// replace, trim, case
	{name: "replace", procs: `[{"type":"xpath","parameters":{"expression":"//h2"}},{"type":"replace","parameters":{"pattern":"(\\w+) (\\w+)","replacement":"$2, $1"}}]`, want: []string{"Example, Ada", "Example, Bob"}},
	{name: "replace delete", procs: `[{"type":"xpath","parameters":{"expression":"//h2"}},{"type":"replace","parameters":{"pattern":"Example","replacement":""}}]`, want: []string{"Ada ", "Bob "}},
	{name: "trim", procs: `[{"type":"meta","parameters":{"name":"description"}},{"type":"trim"}]`, want: []string{"A person"}},
	{name: "trim cutset", procs: `[{"type":"meta","parameters":{"name":"twitter:creator"}},{"type":"trim","parameters":{"cutset":"@"}}]`, want: []string{"ada"}},
	{name: "lower upper", procs: `[{"type":"xpath","parameters":{"expression":"//h2","first":true}},{"type":"lower"}]`, want: []string{"ada example"}},
	{name: "upper", procs: `[{"type":"xpath","parameters":{"expression":"//h2","first":true}},{"type":"upper"}]`, want: []string{"ADA EXAMPLE"}},
	{name: "html-unescape", procs: `[{"type":"xpath","parameters":{"expression":"//p[@class='born']","html":"inner"}},{"type":"html-unescape"}]`, want: []string{"Born on March 3rd, 1980 & raised"}},
	// list processors
	{name: "split", procs: `[{"type":"xpath","parameters":{"expression":"//p[@class='born']"}},{"type":"split","parameters":{"separator":","}}]`, want: []string{"Born on March 3rd", "1980 & raised"}},
	{name: "split pattern", procs: `[{"type":"xpath","parameters":{"expression":"//p[@class='born']"}},{"type":"split","parameters":{"pattern":"\\s+(?:on|&)\\s+"}}]`, want: []string{"Born", "March 3rd, 1980", "raised"}},
	{name: "join", procs: `[{"type":"xpath","parameters":{"expression":"//li"}},{"type":"trim"},{"type":"join","parameters":{"separator":"|"}}]`, want: []string{"go|c|go"}},
	{name: "join default", procs: `[{"type":"xpath","parameters":{"expression":"//li"}},{"type":"trim"},{"type":"join"}]`, want: []string{"go, c, go"}},
	{name: "unique", procs: `[{"type":"xpath","parameters":{"expression":"//li"}},{"type":"trim"},{"type":"unique"}]`, want: []string{"go", "c"}},
	{name: "first", procs: `[{"type":"xpath","parameters":{"expression":"//li"}},{"type":"first"}]`, want: []string{"go"}},
	{name: "last", procs: `[{"type":"xpath","parameters":{"expression":"//li"}},{"type":"last"}]`, want: []string{"go"}},
	{name: "nth", procs: `[{"type":"xpath","parameters":{"expression":"//li"}},{"type":"nth","parameters":{"index":1}}]`, want: []string{" c "}},
	{name: "nth negative", procs: `[{"type":"xpath","parameters":{"expression":"//li"}},{"type":"nth","parameters":{"index":-2}}]`, want: []string{" c "}},
	{name: "nth out of range", procs: `[{"type":"xpath","parameters":{"expression":"//li"}},{"type":"nth","parameters":{"index":7}}]`, want: []string{}},
	{name: "default used", procs: `[{"type":"xpath","parameters":{"expression":"//nothing"}},{"type":"default","parameters":{"value":"n/a"}}]`, want: []string{"n/a"}},
	{name: "default unused", procs: `[{"type":"xpath","parameters":{"expression":"//h2","first":true}},{"type":"default","parameters":{"value":"n/a"}}]`, want: []string{"Ada Example"}},
	// url
	{name: "url resolves against base href", procs: `[{"type":"xpath","parameters":{"expression":"//div/a/@href"}},{"type":"url"}]`, want: []string{"https://base.example/ada", "https://base.example/bob"}},
	{name: "url drops junk", procs: `[{"type":"default","parameters":{"value":"javascript:void(0)"}},{"type":"url"}]`, want: []string{}},
	// jsonpath
	{name: "jsonpath on json doc", procs: `[{"type":"jsonpath","parameters":{"expression":"$.people[*].name"}}]`, body: `{"people":[{"name":"Ada"},{"name":"Bob"}]}`, ctype: "application/json; charset=utf-8", want: []string{"Ada", "Bob"}},
	{name: "jsonpath big int exact", procs: `[{"type":"jsonpath","parameters":{"expression":"$.id"}}]`, body: `{"id":12345678901234567}`, ctype: "application/json", want: []string{"12345678901234567"}},
	{name: "jsonpath on script blob", procs: `[{"type":"xpath","parameters":{"expression":"//script[@id='data']/text()"}},{"type":"jsonpath","parameters":{"expression":"$.person.langs[*]"}}]`, want: []string{"go", "c"}},
	{name: "jsonpath scalars", procs: `[{"type":"xpath","parameters":{"expression":"//script[@id='data']"}},{"type":"jsonpath","parameters":{"expression":"$.person['age','ok','none']"}}]`, want: []string{"36", "true"}},
	{name: "jsonpath object then jsonpath", procs: `[{"type":"xpath","parameters":{"expression":"//script[@id='data']"}},{"type":"jsonpath","parameters":{"expression":"$.person"}},{"type":"jsonpath","parameters":{"expression":"$.name"}}]`, want: []string{"Ada"}},
	{name: "jsonpath on html doc", procs: `[{"type":"jsonpath","parameters":{"expression":"$.a"}}]`, err: "the document is HTML"},
	{name: "jsonpath on non-json value", procs: `[{"type":"xpath","parameters":{"expression":"//h2","first":true}},{"type":"jsonpath","parameters":{"expression":"$.a"}}]`, err: "value is not JSON"},
	// jsonld
	{name: "jsonld property", procs: `[{"type":"jsonld","parameters":{"type":"Person","property":"name"}}]`, want: []string{"Ada Example"}},
	{name: "jsonld nested property", procs: `[{"type":"jsonld","parameters":{"type":"Person","property":"address.addressLocality"}}]`, want: []string{"Lisbon"}},
	{name: "jsonld array property", procs: `[{"type":"jsonld","parameters":{"type":"Person","property":"sameAs"}}]`, want: []string{"https://social.example/ada", "https://code.example/ada"}},
	{name: "jsonld nested objects and prefixed types", procs: `[{"type":"jsonld","parameters":{"type":["Organization"],"property":"name"}}]`, want: []string{"Analytical Engines Ltd", "Other Org"}},
	{name: "jsonld objects then jsonpath", procs: `[{"type":"jsonld","parameters":{"type":"Person"}},{"type":"jsonpath","parameters":{"expression":"$.jobTitle"}}]`, want: []string{"Engineer"}},
	{name: "jsonld none", procs: `[{"type":"jsonld","parameters":{"type":"Event","property":"name"}}]`, want: []string{}},
	// concat
	{name: "concat jsonld pieces", procs: `[{"type":"concat","parameters":{"separator":", ","parts":[[{"type":"jsonld","parameters":{"type":"PostalAddress","property":"addressLocality"}}],[{"type":"jsonld","parameters":{"type":"PostalAddress","property":"addressCountry"}}]]}}]`,
		body: concatPage, want: []string{"Medellín, Colombia"}},
	{name: "concat per object", procs: `[{"type":"jsonld","parameters":{"type":"PostalAddress"}},{"type":"concat","parameters":{"separator":", ","parts":[[{"type":"jsonpath","parameters":{"expression":"$.addressLocality"}}],[{"type":"jsonpath","parameters":{"expression":"$.addressCountry"}}]]}}]`,
		body: concatPage, want: []string{"Medellín, Colombia", "Lyon, France"}},
	{name: "concat missing piece", procs: `[{"type":"jsonld","parameters":{"type":"PostalAddress"}},{"type":"concat","parameters":{"parts":[[{"type":"jsonpath","parameters":{"expression":"$.addressLocality"}}],[{"type":"jsonpath","parameters":{"expression":"$.postalCode"}}]]}}]`,
		body: concatPage, want: []string{"Lyon 69001"}},
	{name: "concat three with separators", procs: `[{"type":"concat","parameters":{"separators":[" ",", "],"parts":[[{"type":"xpath","parameters":{"expression":"//span[@class='given']"}}],[{"type":"xpath","parameters":{"expression":"//span[@class='family']"}},{"type":"upper"}],[{"type":"xpath","parameters":{"expression":"//span[@class='suffix']"}}]]}}]`,
		body: concatPage, want: []string{"Ada LOVELACE, PhD"}},
	{name: "concat part error", procs: `[{"type":"concat","parameters":{"parts":[[{"type":"jsonpath","parameters":{"expression":"$.a"}}],[{"type":"xpath","parameters":{"expression":"//h2"}}]]}}]`,
		err: "parts[0]: the document is HTML"},
	// meta
	{name: "meta og", procs: `[{"type":"meta","parameters":{"name":"og:title"}}]`, want: []string{"Ada Example"}},
	{name: "meta twitter case-insensitive", procs: `[{"type":"meta","parameters":{"name":"Twitter:Creator"}}]`, want: []string{"@ada"}},
	{name: "meta missing", procs: `[{"type":"meta","parameters":{"name":"og:image"}}]`, want: []string{}},
	// email
	{name: "email deobfuscated", procs: `[{"type":"xpath","parameters":{"expression":"//span[@class='mail']"}},{"type":"email"}]`, want: []string{"ada@ada.example", "bob.example@bob.example"}},
	{name: "email forms", procs: `[{"type":"default","parameters":{"value":"write to ADA AT mail DOT example, or x{at}y{dot}test; look at this; mailto:z@z.example?subject=hi &#64; no"}},{"type":"email"}]`, want: []string{"ada@mail.example", "x@y.test", "z@z.example"}},
	// number
	{name: "number european", procs: `[{"type":"xpath","parameters":{"expression":"//p[@class='n']"}},{"type":"number"}]`, want: []string{"1234567.89"}},
	{name: "number forms", procs: `[{"type":"xpath","parameters":{"expression":"//li"}},{"type":"number"}]`, want: []string{}},
	{name: "number decimal param", procs: `[{"type":"default","parameters":{"value":"3,5 kg"}},{"type":"number","parameters":{"decimal":","}}]`, want: []string{"3.5"}},
	// date
	{name: "date ordinal", procs: `[{"type":"xpath","parameters":{"expression":"//p[@class='born']"}},{"type":"regex","parameters":{"pattern":"on (.*?) &"}},{"type":"date"}]`, want: []string{"1980-03-03"}},
	{name: "date layout", procs: `[{"type":"default","parameters":{"value":"03|04|1980"}},{"type":"date","parameters":{"layout":"02|01|2006"}}]`, want: []string{"1980-04-03"}},
	{name: "date dmy", procs: `[{"type":"default","parameters":{"value":"03/04/1980"}},{"type":"date","parameters":{"order":"dmy"}}]`, want: []string{"1980-04-03"}},
	{name: "date not a date", procs: `[{"type":"default","parameters":{"value":"someday"}},{"type":"date"}]`, want: []string{}},
}

func TestProcessors(t *testing.T) {
	const u = "https://site.example/people/ada"
	for _, tc := range processorCases {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if body == "" {
				body = page
			}
			got, err := runProcessors(t, tc.procs, u, body, tc.ctype)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseNumber(t *testing.T) {
	tests := []struct{ in, want string }{
		{"42", "42"}, {"-3.5", "-3.5"}, {"1,234", "1234"}, {"1,234,567.5", "1234567.5"},
		{"1.234.567", "1234567"}, {"3,14", "3.14"}, {"12 345,6", "12345.6"}, {"CHF 1'250.50", "1250.5"},
		{"−7", "-7"}, {"about 12%", "12"}, {"none", ""}, {"1.2.3,4,5", ""},
	}
	for _, tc := range tests {
		got, ok := parseNumber(tc.in, "")
		if tc.want == "" {
			if ok {
				t.Errorf("parseNumber(%q) = %q, want no number", tc.in, got)
			}
			continue
		}
		if !ok || got != tc.want {
			t.Errorf("parseNumber(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

func TestParseDate(t *testing.T) {
	tests := []struct{ in, want string }{
		{"2020-02-29", "2020-02-29"},
		{"2020-02-30", ""},
		{"2020-02-29T10:11:12Z", "2020-02-29T10:11:12Z"},
		{"2020-02-29T10:11:12+02:00", "2020-02-29T10:11:12+02:00"},
		{"2020-02-29 10:11", "2020-02-29T10:11:00"},
		{"Sat, 29 Feb 2020 10:11:12 GMT", "2020-02-29T10:11:12Z"},
		{"29 February 2020", "2020-02-29"},
		{"Feb 29, 2020", "2020-02-29"},
		{"February 29th, 2020", "2020-02-29"},
		{"Saturday, February 29, 2020", "2020-02-29"},
		{"29.02.2020", "2020-02-29"},
		{"02/29/2020", "2020-02-29"},
		{"29/02/2020", "2020-02-29"},
		{"13/13/2020", ""},
		{"March 2019", "2019-03"},
		{"1999", "1999"},
		{"20200229", "2020-02-29"},
		{"yesterday", ""},
	}
	for _, tc := range tests {
		got, ok := parseDate(tc.in, nil)
		if tc.want == "" {
			if ok {
				t.Errorf("parseDate(%q) = %q, want no date", tc.in, got)
			}
			continue
		}
		if !ok || got != tc.want {
			t.Errorf("parseDate(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

// TestProcessorParameters checks that every processor refuses bad
// parameters at build time.
func TestProcessorParameters(t *testing.T) {
	tests := []struct {
		typ, params, err string
	}{
		{"xpath", `{}`, `"expression" is required`},
		{"xpath", `{"expression":"//a["}`, "invalid XPath"},
		{"xpath", `{"expression":"//a","html":"both"}`, `"html" must be`},
		{"xpath", `{"expresion":"//a"}`, `unknown parameter "expresion"`},
		{"xpath", `{"expression":42}`, `parameter "expression": want string, got number`},
		{"regex", `{"pattern":"("}`, "invalid regex"},
		{"regex", `{"pattern":"(a)","group":2}`, "out of range"},
		{"regex", `{"pattern":"(?P<x>a)","group":"y"}`, `no group named "y"`},
		{"regex", `{"pattern":"a","group":true}`, "want a group number or name"},
		{"replace", `{"pattern":"a"}`, `"replacement" is required`},
		{"replace", `{"pattern":"[","replacement":""}`, "invalid regex"},
		{"trim", `{"x":1}`, "unknown parameter"},
		{"lower", `{"x":1}`, "unknown parameter"},
		{"split", `{}`, "is required"},
		{"split", `{"separator":",","pattern":","}`, "not both"},
		{"nth", `{}`, `"index" is required`},
		{"first", `{"index":1}`, `unknown parameter "index"`},
		{"default", `{}`, `"value" is required`},
		{"jsonpath", `{"expression":"$.a[?("}`, "invalid JSONPath"},
		{"jsonpath", `{}`, "is required"},
		{"jsonld", `{"type":3}`, "want a string or an array"},
		{"jsonld", `{"property":"a..b"}`, "empty segment"},
		{"meta", `{}`, "is required"},
		{"concat", `{}`, `"parts" is required`},
		{"concat", `{"parts":[[{"type":"trim"}]]}`, "want two chains or more, got 1"},
		{"concat", `{"parts":[[{"type":"trim"}],[]]}`, "parts[1]: a part needs at least one processor"},
		{"concat", `{"parts":[[{"type":"trim"}],[{"type":"xpath","parameters":{"expression":"//a["}}]]}`, "parts[1][0] (xpath): invalid XPath"},
		{"concat", `{"parts":[[{"type":"trim"}],[{"type":"trimm"}]]}`, `parts[1][0]: unknown processor type "trimm"`},
		{"concat", `{"parts":[[{"type":"trim"}],[{"typ":"trim"}]]}`, "parts[1]: want an array of processors"},
		{"concat", `{"parts":[[{"type":"trim"}],[{"type":"trim"}]],"separator":" ","separators":[" "]}`, "not both"},
		{"concat", `{"parts":[[{"type":"trim"}],[{"type":"trim"}]],"separators":[" ",","]}`, "want 1 (one between each two parts), got 2"},
		{"number", `{"decimal":";"}`, `"decimal" must be`},
		{"date", `{"order":"ymd"}`, `"order" must be`},
		{"date", `{"layout":"xx"}`, "no date elements"},
		{"email", `{"all":true}`, "unknown parameter"},
		{"url", `{"base":"x"}`, "unknown parameter"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s %s", tc.typ, tc.params), func(t *testing.T) {
			_, err := registry[tc.typ](json.RawMessage(tc.params))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.err)
			}
		})
	}
}

func TestEveryProcessorIsTested(t *testing.T) {
	// Guards against a processor added without a case in processorCases:
	// every type the specs describe (each processor's own file) runs in
	// at least one chain of the table.
	used := map[string]bool{}
	for _, tc := range processorCases {
		var chain []struct{ Type string }
		if err := json.Unmarshal([]byte(tc.procs), &chain); err != nil {
			t.Fatalf("case %q: %v", tc.name, err)
		}
		for _, p := range chain {
			used[p.Type] = true
		}
	}
	if len(specs) == 0 {
		t.Fatal("no processor specs registered")
	}
	for name := range specs {
		if !used[name] {
			t.Errorf("processor %q has no case in processorCases", name)
		}
	}
	for _, typ := range ProcessorTypes() {
		if specs[typ] == nil && !strings.HasPrefix(typ, "test-") {
			t.Errorf("processor %q is registered without a spec", typ)
		}
	}
}

// TestConcatInAMapping: a mapping's concat takes its pieces through the
// same extraction as any field, its parts' XPaths on the page's index.
func TestConcatInAMapping(t *testing.T) {
	set, err := Load(map[string][]byte{"m.json": []byte(`{"name": "m", "fields": [
 {"name": "name", "processors": [{"type": "concat", "parameters": {"parts": [
   [{"type": "xpath", "parameters": {"expression": "//span[@class='given']"}}],
   [{"type": "xpath", "parameters": {"expression": "//span[@class='family']"}}]]}}]},
 {"name": "place", "all": true, "processors": [{"type": "jsonld", "parameters": {"type": "PostalAddress"}},
   {"type": "concat", "parameters": {"separator": ", ", "parts": [[{"type": "jsonpath", "parameters": {"expression": "$.addressLocality"}}],
   [{"type": "jsonpath", "parameters": {"expression": "$.addressCountry"}}]]}}]}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, f := range set.Extract("https://a.example/", []byte(concatPage), "text/html").Fields {
		got[f.Field] = f.Values
	}
	want := map[string][]string{"name": {"Ada Lovelace"}, "place": {"Medellín, Colombia", "Lyon, France"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("extracted %q, want %q", got, want)
	}
}
