package etl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// `go generate ./etl` rewrites the parts of mappings/schema.json and
// docs/mappings.md that describe processors from the registered specs
// (procspec.go); TestGeneratedSchemaAndDocs runs the same code and fails
// when a file on disk differs from what it would write.
//
//go:generate go test -run ^TestGeneratedSchemaAndDocs$ -update .

// Where the generated processor reference sits in docs/mappings.md; the
// text around it is written by hand.
const (
	docsBegin = "<!-- BEGIN processors: written by `go generate ./etl` from etl/proc_*.go; edit those files, not this part. -->"
	docsEnd   = "<!-- END processors -->"
)

// specNames lists the described processor types, sorted.
func specNames() []string {
	names := make([]string, 0, len(specs))
	for n := range specs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// generateSchema returns base (mappings/schema.json) with its processor
// parts rewritten from the specs: the processor type enum and its
// descriptions, the if/then that ties each type to its parameters, and
// $defs/parameters. Everything else in base is kept as it is.
func generateSchema(base []byte) ([]byte, error) {
	v, err := decodeOrdered(base)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	root, ok := v.(orderedJSON)
	defs := root.object("$defs")
	proc := defs.object("processor")
	props := proc.object("properties")
	typ := props.object("type")
	if !ok || typ == nil {
		return nil, fmt.Errorf("schema: no $defs/processor/properties/type to rewrite")
	}
	names := specNames()
	var descs []string
	var allOf []any
	params := orderedJSON{}
	for _, n := range names {
		s := specs[n]
		descs = append(descs, s.summary)
		ps, required, err := s.parametersSchema()
		if err != nil {
			return nil, fmt.Errorf("processor %s: %w", n, err)
		}
		params = append(params, orderedMember{n, ps})
		then := orderedJSON{{"properties", orderedJSON{{"parameters", orderedJSON{{"$ref", "#/$defs/parameters/" + n}}}}}}
		if required {
			then = append(then, orderedMember{"required", []string{"parameters"}})
		}
		allOf = append(allOf, orderedJSON{
			{"if", orderedJSON{{"properties", orderedJSON{{"type", orderedJSON{{"const", n}}}}}, {"required", []string{"type"}}}},
			{"then", then},
		})
	}
	typ = typ.with("enum", names).with("enumDescriptions", descs)
	props = props.with("type", typ)
	proc = proc.with("properties", props).with("allOf", allOf)
	defs = defs.with("processor", proc).with("parameters", params)
	root = root.with("$defs", defs)
	return EncodeFile(root)
}

// parametersSchema is the JSON Schema of a processor's parameters object,
// and whether the processor needs one (it has a required parameter).
func (s *procSpec) parametersSchema() (orderedJSON, bool, error) {
	props := orderedJSON{{"$comment", orderedJSON{{"description", "Free text for humans; ignored."}, {"type", "string"}}}}
	var required []string
	for _, p := range paramsOf(s.params) {
		ps := orderedJSON{{"description", p.doc}}
		if len(p.enum) > 0 {
			ps = append(ps, orderedMember{"enum", p.enum})
		} else {
			kw, err := schemaType(p.typ)
			if err != nil {
				return nil, false, err
			}
			ps = append(ps, kw...)
		}
		if p.pattern != "" {
			ps = append(ps, orderedMember{"pattern", p.pattern})
		}
		if p.minLen != "" {
			ps = append(ps, orderedMember{"minLength", json.Number(p.minLen)})
		}
		if p.minimum != "" {
			ps = append(ps, orderedMember{"minimum", json.Number(p.minimum)})
		}
		props = append(props, orderedMember{p.name, ps})
		if p.required {
			required = append(required, p.name)
		}
	}
	out := orderedJSON{
		{"description", s.summary},
		{"type", []string{"object", "null"}},
		{"properties", props},
	}
	if len(required) > 0 {
		out = append(out, orderedMember{"required", required})
	}
	out = append(out, orderedMember{"additionalProperties", false})
	if s.constraints != "" {
		c, err := decodeOrdered([]byte(s.constraints))
		if err != nil {
			return nil, false, fmt.Errorf("constraints: %w", err)
		}
		co, ok := c.(orderedJSON)
		if !ok {
			return nil, false, fmt.Errorf("constraints: not an object")
		}
		out = append(out, co...)
	}
	if s.example != "" {
		ex, err := decodeOrdered([]byte(s.example))
		if err != nil {
			return nil, false, fmt.Errorf("example: %w", err)
		}
		out = append(out, orderedMember{"examples", []any{ex}})
	}
	return out, len(required) > 0, nil
}

// generateDocs returns md (docs/mappings.md) with the part between
// docsBegin and docsEnd rewritten from the specs.
func generateDocs(md []byte) ([]byte, error) {
	begin := bytes.Index(md, []byte(docsBegin))
	end := bytes.Index(md, []byte(docsEnd))
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("docs: no %q … %q markers", docsBegin, docsEnd)
	}
	var b bytes.Buffer
	b.Write(md[:begin])
	b.WriteString(docsBegin)
	b.WriteString("\n")
	for _, g := range docGroups {
		fmt.Fprintf(&b, "\n### %s\n\n%s\n", g.title, wrapText(g.intro, docsWidth))
		for _, n := range specNames() {
			if s := specs[n]; s.group == g.group {
				s.writeDocs(&b)
			}
		}
	}
	b.WriteString("\n")
	b.Write(md[end:])
	return b.Bytes(), nil
}

func (s *procSpec) writeDocs(b *bytes.Buffer) {
	fmt.Fprintf(b, "\n#### %s\n\n%s\n", s.name, wrapText(mdEscape(s.summary), docsWidth))
	if s.doc != "" {
		fmt.Fprintf(b, "\n%s\n", wrapText(s.doc, docsWidth))
	}
	ps := paramsOf(s.params)
	if len(ps) == 0 {
		if !strings.Contains(s.summary, "No parameters.") {
			b.WriteString("\nNo parameters.\n")
		}
	} else {
		b.WriteString("\n| parameter | type | required | meaning |\n|-----------|------|----------|---------|\n")
		for _, p := range ps {
			req := ""
			if p.required {
				req = "yes"
			}
			fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", p.name, p.typeWords(), req, strings.ReplaceAll(mdEscape(p.doc), "|", `\|`))
		}
	}
	b.WriteString("\n```json\n")
	if s.example != "" {
		fmt.Fprintf(b, "{\"type\": %q, \"parameters\": %s}\n", s.name, s.example)
	} else {
		fmt.Fprintf(b, "{\"type\": %q}\n", s.name)
	}
	b.WriteString("```\n")
}

// docsWidth is where the generated prose wraps, as the hand-written text
// around it does.
const docsWidth = 76

// wrapText fills s's words into lines of at most width columns (a longer
// word gets a line of its own).
func wrapText(s string, width int) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(s) {
		l := utf8.RuneCountInString(w)
		switch {
		case n == 0:
		case n+1+l > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += l
	}
	return b.String()
}

// mdEscape keeps the schema's plain text plain in Markdown, where <meta>
// would be a tag and &amp; an ampersand.
func mdEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
