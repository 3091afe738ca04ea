package etl

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"backfill/mappings"
)

// The mapping format's JSON Schema lives in mappings/schema.json, beside
// the mappings, so that editors find it; loading validates every file
// against it before compiling. The schema says what the format's shape is
// (keys, types, required members, each processor's parameters); the
// compiler then checks what a schema cannot (regular expressions, XPath and
// JSONPath compile, group numbers exist, names are unique). Both report
// through LoadError, and when they complain about the same value the
// compiler's more specific message is kept.

const schemaURL = "https://backfill.invalid/mappings/schema.json"

// formatSchema is the compiled schema plus its raw form, which is walked
// for descriptions (hints) and allowed keys.
type formatSchema struct {
	compiled *jsonschema.Schema
	raw      map[string]any
}

var loadFormatSchema = sync.OnceValues(func() (*formatSchema, error) {
	return compileSchema(mappings.Schema)
})

func compileSchema(data []byte) (*formatSchema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("mapping schema: %w", err)
	}
	raw, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("mapping schema: not an object")
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("mapping schema: %w", err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("mapping schema: %w", err)
	}
	return &formatSchema{compiled: sch, raw: raw}, nil
}

// Schema returns the mapping format's JSON Schema (mappings/schema.json).
func Schema() []byte { return bytes.Clone(mappings.Schema) }

// schemaIssue is one schema violation located in the file.
type schemaIssue struct {
	ptr  []string
	node *jnode
	msg  string
	hint string
}

// validate checks a parsed mapping file against the schema and returns
// every violation, in document order.
func (fs *formatSchema) validate(root *jnode) []schemaIssue {
	err := fs.compiled.Validate(root.value())
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []schemaIssue{{node: root, msg: err.Error()}}
	}
	var out []schemaIssue
	seen := map[string]bool{}
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		for _, is := range fs.describe(root, e) {
			k := strings.Join(is.ptr, "/") + "\x00" + is.msg
			if !seen[k] {
				seen[k] = true
				out = append(out, is)
			}
		}
	}
	walk(ve)
	sort.SliceStable(out, func(i, j int) bool { return out[i].node.off < out[j].node.off })
	return out
}

var printer = message.NewPrinter(language.English)

// describe turns one leaf validation error into messages in the loader's
// words, each with a hint taken from the schema.
func (fs *formatSchema) describe(root *jnode, e *jsonschema.ValidationError) []schemaIssue {
	loc := e.InstanceLocation
	node := root.at(loc)
	sch := fs.fragment(e.SchemaURL)
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		var out []schemaIssue
		allowed := schemaKeys(sch)
		for _, p := range k.Properties {
			n := node
			if m := node.get(p); m != nil {
				n = m
			}
			msg := fmt.Sprintf("unknown key %q", p)
			if s := closest(p, allowed); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			out = append(out, schemaIssue{ptr: append(append([]string(nil), loc...), p), node: n, msg: msg,
				hint: "allowed keys: " + strings.Join(allowed, ", ")})
		}
		return out
	case *kind.Required:
		var out []schemaIssue
		for _, p := range k.Missing {
			hint := description(fs.walkSchema(sch, nil, []string{p}))
			out = append(out, schemaIssue{ptr: loc, node: node, msg: fmt.Sprintf("missing %q", p), hint: hint})
		}
		return out
	case *kind.Type:
		return []schemaIssue{{ptr: loc, node: node, msg: fmt.Sprintf("want %s, got %s", strings.Join(k.Want, " or "), k.Got), hint: description(sch)}}
	case *kind.Enum:
		if s, ok := k.Got.(string); ok && isProcessorType(loc) && registry[s] != nil {
			// The registry is the authority on processor types; the
			// schema lists the built-in ones for editors. A type
			// registered beyond those (a test's) is not an error.
			return nil
		}
		var want []string
		for _, w := range k.Want {
			want = append(want, fmt.Sprint(w))
		}
		msg := fmt.Sprintf("%v is not one of %s", displayJSON(k.Got), strings.Join(want, ", "))
		if s, ok := k.Got.(string); ok {
			if c := closest(s, want); c != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", c)
			}
		}
		return []schemaIssue{{ptr: loc, node: node, msg: msg, hint: description(sch)}}
	}
	return []schemaIssue{{ptr: loc, node: node, msg: e.ErrorKind.LocalizedString(printer), hint: description(sch)}}
}

// isProcessorType reports whether an instance location is the type of a
// processor: …/processors/N/type.
func isProcessorType(loc []string) bool {
	n := len(loc)
	return n >= 3 && loc[n-1] == "type" && loc[n-3] == "processors"
}

func displayJSON(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// fragment resolves a schema location (URL#/json/pointer) in the raw schema.
func (fs *formatSchema) fragment(loc string) map[string]any {
	_, frag, _ := strings.Cut(loc, "#")
	cur := any(fs.raw)
	for _, tok := range splitPointer(frag) {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	m, _ := cur.(map[string]any)
	return m
}

// hintAt finds the schema description that applies to the value at ptr of
// a mapping file, for messages from the compiler; "" when none does.
func (fs *formatSchema) hintAt(root *jnode, ptr string) string {
	toks := splitPointer(ptr)
	sch := fs.walkSchema(fs.raw, root, toks)
	if sch == nil {
		return ""
	}
	return description(sch)
}

// walkSchema follows instance tokens through the schema, through $ref,
// properties, items and the if/then branches whose condition the instance
// meets (the format's schema uses only `type` and a const `type` member in
// conditions). It returns the deepest schema reached, nil when none.
func (fs *formatSchema) walkSchema(sch map[string]any, inst *jnode, toks []string) map[string]any {
	for _, tok := range toks {
		var next map[string]any
		app := fs.applicable(sch, inst)
		for i := len(app) - 1; i >= 0 && next == nil; i-- {
			s := app[i]
			if props, ok := s["properties"].(map[string]any); ok {
				if p, ok := props[tok].(map[string]any); ok {
					next = p
					continue
				}
			}
			if it, ok := s["items"].(map[string]any); ok {
				if _, err := strconv.Atoi(tok); err == nil {
					next = it
					continue
				}
			}
			if ap, ok := s["additionalProperties"].(map[string]any); ok {
				next = ap
			}
		}
		if next == nil {
			return described(app)
		}
		sch = next
		if inst != nil {
			inst = inst.child(tok)
		}
	}
	return described(fs.applicable(sch, inst))
}

// described picks the most specific schema that has a description.
func described(app []map[string]any) map[string]any {
	for i := len(app) - 1; i >= 0; i-- {
		if _, ok := app[i]["description"]; ok {
			return app[i]
		}
	}
	if len(app) > 0 {
		return app[len(app)-1]
	}
	return nil
}

// applicable expands a schema into itself, what it refers to and the
// conditional branches that apply to inst, most specific last.
func (fs *formatSchema) applicable(sch map[string]any, inst *jnode) []map[string]any {
	var out []map[string]any
	var add func(map[string]any, int)
	add = func(s map[string]any, depth int) {
		if s == nil || depth > 8 {
			return
		}
		out = append(out, s)
		if ref, ok := s["$ref"].(string); ok {
			add(fs.fragment(ref), depth+1)
		}
		if cond, ok := s["if"].(map[string]any); ok {
			if meets(cond, inst) {
				add(asMap(s["then"]), depth+1)
			} else if inst != nil {
				add(asMap(s["else"]), depth+1)
			}
		}
		if all, ok := s["allOf"].([]any); ok {
			for _, a := range all {
				add(asMap(a), depth+1)
			}
		}
	}
	add(sch, 0)
	return out
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

// meets evaluates the simple conditions the format's schema uses.
func meets(cond map[string]any, inst *jnode) bool {
	if inst == nil {
		return false
	}
	if t, ok := cond["type"].(string); ok && inst.kindName() != t {
		return false
	}
	if props, ok := cond["properties"].(map[string]any); ok {
		for k, v := range props {
			c, ok := asMap(v)["const"]
			if !ok {
				continue
			}
			m := inst.get(k)
			if m == nil || m.kind != 's' || m.str != fmt.Sprint(c) {
				return false
			}
		}
	}
	return true
}

func schemaKeys(sch map[string]any) []string {
	props, _ := sch["properties"].(map[string]any)
	out := make([]string, 0, len(props))
	for k := range props {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// description is a schema's description, cut to its first sentence, and
// for an object the keys it takes, required ones marked.
func description(sch map[string]any) string {
	d, _ := sch["description"].(string)
	if i := strings.Index(d, ". "); i >= 0 {
		d = d[:i+1]
	}
	keys := schemaKeys(sch)
	if len(keys) == 0 {
		return d
	}
	req := map[string]bool{}
	if r, ok := sch["required"].([]any); ok {
		for _, k := range r {
			req[fmt.Sprint(k)] = true
		}
	}
	var b strings.Builder
	for _, k := range keys {
		if strings.HasPrefix(k, "$") {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
		if req[k] {
			b.WriteString(" (required)")
		}
	}
	if b.Len() == 0 {
		return d + " Takes no parameters."
	}
	return strings.TrimSpace(d + " Keys: " + b.String() + ".")
}

func splitPointer(p string) []string {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return nil
	}
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(s)
	}
	return parts
}

func joinPointer(toks []string) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteByte('/')
		b.WriteString(escapePointer(t))
	}
	return b.String()
}

// value converts the node tree into the plain values the validator takes.
func (n *jnode) value() any {
	switch n.kind {
	case 'o':
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			m[k] = n.members[i].value()
		}
		return m
	case 'a':
		a := make([]any, len(n.elems))
		for i, e := range n.elems {
			a[i] = e.value()
		}
		return a
	case 's':
		return n.str
	case 'n':
		return n.num
	case 'b':
		return n.b
	}
	return nil
}

// child is the member or element a pointer token names, or nil.
func (n *jnode) child(tok string) *jnode {
	if n == nil {
		return nil
	}
	switch n.kind {
	case 'o':
		return n.get(tok)
	case 'a':
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || i >= len(n.elems) {
			return nil
		}
		return n.elems[i]
	}
	return nil
}

// at follows pointer tokens as far as the tree goes.
func (n *jnode) at(toks []string) *jnode {
	cur := n
	for _, t := range toks {
		c := cur.child(t)
		if c == nil {
			return cur
		}
		cur = c
	}
	return cur
}
