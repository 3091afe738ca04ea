package etl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// concatProc makes one value of a value the page holds in pieces: a city
// and a country in two JSON-LD properties, a given and a family name in
// two elements. Each of its parts is a chain of processors run on every
// value concat receives (the document, when it comes first); the first
// non-blank value of each part, trimmed, is joined to the next with the
// separator between them. A received value for which any part yields
// nothing yields nothing: a piece missing is not a shorter value.
type concatProc struct {
	parts [][]Processor
	seps  []string // len(parts)-1
}

// concatParams are the concat processor's parameters.
type concatParams struct {
	Parts      chains     `json:"parts" required:"true" doc:"Two or more chains of processors (each an array like a field's processors), each run on the value concat receives."`
	Separator  *string    `json:"separator" doc:"Text between every two parts; default \" \"."`
	Separators separators `json:"separators" doc:"Text between each two parts, one fewer than the parts (\", \" then \" \"). Give separator or separators, not both."`
}

func init() {
	registerProc(procSpec{
		name:  "concat",
		group: groupSelect,
		summary: "Joins the pieces of one value, each taken by its own chain of processors, with separators between them " +
			"(a JSON-LD addressLocality and addressCountry as \"Lisbon, Portugal\").",
		doc: "Each part runs on every value concat receives: first in a chain, on the document; after an xpath or a jsonld, " +
			"on each selected node or object, so that the pieces of one value come from one place " +
			"(`jsonld` of type `PostalAddress`, then parts `$.addressLocality` and `$.addressCountry`). " +
			"A part's first non-blank value is taken, trimmed; when a part yields nothing, so does concat for that value.",
		example:     `{"parts": [[{"type": "jsonld", "parameters": {"type": "PostalAddress", "property": "addressLocality"}}], [{"type": "jsonld", "parameters": {"type": "PostalAddress", "property": "addressCountry"}}]], "separator": ", "}`,
		constraints: `{"not": {"required": ["separator", "separators"]}}`,
	}, newConcat)
}

func newConcat(p concatParams) (Processor, error) {
	if p.Parts == nil {
		return nil, errors.New(`parameter "parts" is required`)
	}
	if len(p.Parts) < 2 {
		return nil, fmt.Errorf(`parameter "parts": want two chains or more, got %d`, len(p.Parts))
	}
	c := &concatProc{}
	for i, raw := range p.Parts {
		chain, err := buildChain(raw)
		if err != nil {
			return nil, fmt.Errorf("parts[%d]%w", i, err)
		}
		c.parts = append(c.parts, chain)
	}
	switch {
	case p.Separator != nil && p.Separators != nil:
		return nil, errors.New(`give "separator" or "separators", not both`)
	case p.Separators != nil:
		if len(p.Separators) != len(p.Parts)-1 {
			return nil, fmt.Errorf(`parameter "separators": want %d (one between each two parts), got %d`, len(p.Parts)-1, len(p.Separators))
		}
		c.seps = p.Separators
	default:
		sep := " "
		if p.Separator != nil {
			sep = *p.Separator
		}
		for range len(p.Parts) - 1 {
			c.seps = append(c.seps, sep)
		}
	}
	return c, nil
}

// buildChain builds the processors of one part, as the loader builds a
// field's; an error starts with the step's place ("[1] (xpath): …").
func buildChain(raw json.RawMessage) ([]Processor, error) {
	var steps []struct {
		Comment     string          `json:"$comment"`
		Type        string          `json:"type"`
		Parameters  json.RawMessage `json:"parameters"`
		Description string          `json:"description"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&steps); err != nil {
		return nil, fmt.Errorf(": want an array of processors {type, parameters}: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if len(steps) == 0 {
		return nil, errors.New(": a part needs at least one processor")
	}
	var out []Processor
	for i, s := range steps {
		factory, ok := registry[s.Type]
		if !ok {
			return nil, fmt.Errorf("[%d]: unknown processor type %q", i, s.Type)
		}
		p, err := buildProcessor(factory, s.Parameters)
		if err != nil {
			return nil, fmt.Errorf("[%d] (%s): %w", i, s.Type, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func (c *concatProc) Process(in []Value, doc *Document) ([]Value, error) {
	var out []Value
	var b strings.Builder
	for _, v := range in {
		b.Reset()
		whole := true
		for i, part := range c.parts {
			s, err := firstOf(part, v, doc)
			if err != nil {
				return nil, fmt.Errorf("parts[%d]: %w", i, err)
			}
			if s == "" {
				whole = false
				break
			}
			if i > 0 {
				b.WriteString(c.seps[i-1])
			}
			b.WriteString(s)
		}
		if whole {
			out = append(out, Value{Text: b.String()})
		}
	}
	return out, nil
}

// firstOf runs a part's chain on one value and returns its first
// non-blank value, trimmed ("" when none).
func firstOf(chain []Processor, v Value, doc *Document) (string, error) {
	vals := []Value{v}
	for _, p := range chain {
		var err error
		if vals, err = p.Process(vals, doc); err != nil {
			return "", err
		}
	}
	for _, v := range vals {
		if s := strings.TrimSpace(v.Text); s != "" {
			return s, nil
		}
	}
	return "", nil
}

// processors are the processors of every part, for what the loader
// learns from a set's processors (the tags its XPaths index).
func (c *concatProc) processors() []Processor {
	var out []Processor
	for _, part := range c.parts {
		out = append(out, part...)
	}
	return out
}

// chains is the parts parameter: chains of processors, each kept as JSON
// until built.
type chains []json.RawMessage

func (chains) jsonSchema() orderedJSON {
	return orderedJSON{{"type", "array"}, {"minItems", json.Number("2")},
		{"items", orderedJSON{{"type", "array"}, {"minItems", json.Number("1")}, {"items", orderedJSON{{"$ref", "#/$defs/processor"}}}}}}
}

// separators is the separators parameter: strings.
type separators []string

func (separators) jsonSchema() orderedJSON {
	return orderedJSON{{"type", "array"}, {"items", orderedJSON{{"type", "string"}}}}
}
