package etl

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ohler55/ojg/jp"
)

// jsonpathProc evaluates a JSONPath expression over a JSON response (first
// in a chain), over the JSON value a previous jsonpath or jsonld selected,
// or over JSON text from a previous step, such as a <script> blob picked by
// xpath. Scalars yield their text; objects and arrays yield compact JSON
// and can be walked further by another jsonpath.
//
// Parameters: expression (required, e.g. "$.person.name"), first (bool).
type jsonpathProc struct {
	expr  jp.Expr
	src   string
	first bool
}

// jsonpathParams are the jsonpath processor's parameters.
type jsonpathParams struct {
	Expression string `json:"expression" required:"true" pattern:"\\S" doc:"JSONPath expression, e.g. $.profile.links[*].url."`
	First      bool   `json:"first" doc:"Only the first result."`
}

func init() {
	registerProc(procSpec{
		name:    "jsonpath",
		group:   groupSelect,
		summary: "Evaluates a JSONPath on a JSON response, on JSON text from the previous step (a <script> blob picked by xpath) or on the object a previous jsonpath/jsonld selected. Objects and arrays come out as compact JSON.",
		doc: "A blob in a page's script comes out through xpath first: " +
			"`[{\"type\": \"xpath\", \"parameters\": {\"expression\": \"//script[@id='__DATA__']/text()\"}}, {\"type\": \"jsonpath\", \"parameters\": {\"expression\": \"$.profile.links[*].url\"}}]`. " +
			"Objects and arrays come out as compact JSON that another jsonpath can walk.",
		example: `{"expression": "$.profile.name"}`,
	}, newJSONPath)
	registerProc(procSpec{
		name:    "jsonld",
		group:   groupSelect,
		summary: "schema.org objects from <script type=\"application/ld+json\"> blocks (@graph and nested objects included).",
		doc:     "Blocks that are not valid JSON are skipped. Without `property` the objects themselves come out, for a jsonpath to pick from.",
		example: `{"type": "Person", "property": "sameAs"}`,
	}, newJSONLD)
}

func newJSONPath(p jsonpathParams) (Processor, error) {
	if strings.TrimSpace(p.Expression) == "" {
		return nil, errors.New(`parameter "expression" is required`)
	}
	x, err := parseJSONPath(p.Expression)
	if err != nil {
		return nil, fmt.Errorf("invalid JSONPath %q: %v", p.Expression, err)
	}
	return &jsonpathProc{expr: x, src: p.Expression, first: p.First}, nil
}

func parseJSONPath(s string) (x jp.Expr, err error) {
	defer func() {
		if r := recover(); r != nil {
			x, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return jp.ParseString(s)
}

func (j *jsonpathProc) Process(in []Value, doc *Document) (out []Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("jsonpath %q: %v", j.src, r)
		}
	}()
	for _, v := range in {
		data, err := jsonInput(v, doc)
		if err != nil {
			return nil, err
		}
		for _, r := range j.expr.Get(data) {
			if jv, ok := jsonValue(r); ok {
				out = append(out, jv)
				if j.first {
					return out, nil
				}
			}
		}
	}
	return out, nil
}

// jsonInput finds the JSON a processor should work on for one value.
func jsonInput(v Value, doc *Document) (any, error) {
	if v.doc {
		if doc.parseErr != nil {
			return nil, fmt.Errorf("document did not parse: %v", doc.parseErr)
		}
		if doc.Root != nil {
			return nil, errors.New("the document is HTML, not JSON: select the JSON text first (e.g. xpath //script[@id='data']/text())")
		}
		return doc.JSON, nil
	}
	if v.JSON != nil {
		return v.JSON, nil
	}
	data, err := decodeJSON([]byte(v.Text))
	if err != nil {
		return nil, fmt.Errorf("value is not JSON: %v", err)
	}
	return data, nil
}

// jsonValue turns a JSON value into a Value; null yields nothing.
func jsonValue(r any) (Value, bool) {
	switch t := r.(type) {
	case nil:
		return Value{}, false
	case string:
		return Value{Text: t, JSON: t}, true
	case bool:
		return Value{Text: strconv.FormatBool(t), JSON: t}, true
	case int64:
		return Value{Text: strconv.FormatInt(t, 10), JSON: t}, true
	case float64:
		return Value{Text: strconv.FormatFloat(t, 'f', -1, 64), JSON: t}, true
	}
	b, err := json.Marshal(r)
	if err != nil {
		return Value{}, false
	}
	return Value{Text: string(b), JSON: r}, true
}

// jsonldProc reads the schema.org objects a page publishes in
// <script type="application/ld+json"> blocks (or JSON-LD text from a
// previous step). "type" keeps objects of those @types ("Person",
// ["Organization", "Corporation"]), nested ones included; "property" takes a
// property of each ("name", "address.addressLocality", "sameAs"), arrays
// expanded. Without "property" the objects themselves are returned for a
// jsonpath to pick from. Blocks that are not valid JSON are skipped.
type jsonldProc struct {
	types []string
	prop  []string
}

// jsonldParams are the jsonld processor's parameters.
type jsonldParams struct {
	Type     ldTypes `json:"type" minLength:"1" doc:"Keep objects of this schema.org type (or any of these types); schema: and URL prefixes are ignored."`
	Property string  `json:"property" doc:"Dotted property path taken from each object, e.g. address.addressLocality; arrays are expanded. Without it the objects come out for a jsonpath."`
}

// ldTypes is one schema.org type name or a list of them.
type ldTypes []string

func (t *ldTypes) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*t = ldTypes{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return paramError(fmt.Sprintf(`parameter "type": want a string or an array of strings, got %s`, b))
	}
	*t = many
	return nil
}

func (ldTypes) jsonSchema() orderedJSON {
	return orderedJSON{{"type", []string{"string", "array"}}, {"items", orderedJSON{{"type", "string"}, {"minLength", json.Number("1")}}}}
}

func newJSONLD(p jsonldParams) (Processor, error) {
	j := &jsonldProc{types: p.Type}
	for _, t := range j.types {
		if strings.TrimSpace(t) == "" {
			return nil, errors.New(`parameter "type": empty type name`)
		}
	}
	if p.Property != "" {
		j.prop = strings.Split(p.Property, ".")
		for _, s := range j.prop {
			if s == "" {
				return nil, fmt.Errorf(`parameter "property": %q has an empty segment`, p.Property)
			}
		}
	}
	return j, nil
}

func (j *jsonldProc) Process(in []Value, doc *Document) ([]Value, error) {
	var objs []map[string]any
	for _, v := range in {
		var roots []any
		switch {
		case v.doc:
			if doc.Root == nil {
				if doc.JSON != nil {
					roots = []any{doc.JSON}
				}
				break
			}
			roots = doc.jsonLD()
		case v.JSON != nil:
			roots = []any{v.JSON}
		default:
			if d, err := decodeJSON([]byte(v.Text)); err == nil {
				roots = []any{d}
			}
		}
		for _, r := range roots {
			collectLD(r, j.types, &objs, 0)
		}
	}
	var out []Value
	for _, o := range objs {
		if j.prop == nil {
			if jv, ok := jsonValue(o); ok {
				out = append(out, jv)
			}
			continue
		}
		var cur any = o
		for _, seg := range j.prop {
			cur = ldGet(cur, seg)
		}
		out = appendLDValues(out, cur)
	}
	return out, nil
}

// ldGet reads a property, looking through a one-element array and
// tolerating "schema:" prefixes.
func ldGet(v any, key string) any {
	if a, ok := v.([]any); ok && len(a) > 0 {
		v = a[0]
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if x, ok := m[key]; ok {
		return x
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if ldLocal(k) == key {
			return m[k]
		}
	}
	return nil
}

// appendLDValues expands arrays; a {"@value": …} or {"@id": …} node yields
// its value.
func appendLDValues(out []Value, v any) []Value {
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			out = appendLDValues(out, e)
		}
		return out
	case map[string]any:
		if x, ok := t["@value"]; ok {
			return appendLDValues(out, x)
		}
		if x, ok := t["@id"]; ok && len(t) == 1 {
			return appendLDValues(out, x)
		}
	}
	if jv, ok := jsonValue(v); ok {
		out = append(out, jv)
	}
	return out
}

// ldLocal strips a vocabulary prefix: "schema:Person",
// "http://schema.org/Person" → "Person".
func ldLocal(s string) string {
	if i := strings.LastIndexAny(s, "/:#"); i >= 0 {
		return s[i+1:]
	}
	return s
}

// collectLD walks v and keeps every object whose @type is one of types
// (every typed object when types is empty), in document order.
func collectLD(v any, types []string, out *[]map[string]any, depth int) {
	if depth > 32 || len(*out) > 1000 {
		return
	}
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			collectLD(e, types, out, depth+1)
		}
	case map[string]any:
		if ldHasType(t, types) {
			*out = append(*out, t)
		}
		if g, ok := t["@graph"]; ok {
			collectLD(g, types, out, depth+1)
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys) // maps have no order; output must be stable
		for _, k := range keys {
			if k == "@graph" {
				continue
			}
			e := t[k]
			switch e.(type) {
			case map[string]any, []any:
				collectLD(e, types, out, depth+1)
			}
		}
	}
}

func ldHasType(m map[string]any, types []string) bool {
	t, ok := m["@type"]
	if !ok {
		return false
	}
	if len(types) == 0 {
		return true
	}
	var names []string
	switch x := t.(type) {
	case string:
		names = []string{x}
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok {
				names = append(names, s)
			}
		}
	}
	for _, n := range names {
		for _, want := range types {
			if strings.EqualFold(ldLocal(n), ldLocal(want)) {
				return true
			}
		}
	}
	return false
}

// jsonLD returns the decoded JSON-LD blocks of the page, parsed once.
func (d *Document) jsonLD() []any {
	if d.jsonldOK || d.Root == nil {
		return d.jsonld
	}
	d.jsonldOK = true
	d.scan()
	for _, text := range d.ldTexts {
		if v, err := decodeJSON([]byte(strings.TrimSpace(text))); err == nil {
			d.jsonld = append(d.jsonld, v)
		}
	}
	return d.jsonld
}
