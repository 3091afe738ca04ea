package etl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/net/html"
)

// Processor is one step of a chain. Process receives the previous step's
// values (the first step receives a single value standing for the whole
// document) and returns its own. A processor is built once at load, is
// immutable afterwards and must be safe for concurrent use.
type Processor interface {
	Process(in []Value, doc *Document) ([]Value, error)
}

// Value is what flows between processors: text, plus the HTML node or JSON
// value it came from when there is one, so that an xpath after an xpath
// works relative to the selected node and a jsonpath after a jsonpath works
// on the selected object.
type Value struct {
	Text string
	Node *html.Node // set when the value is an HTML element selected by xpath
	JSON any        // set when the value is a JSON object, array or scalar
	doc  bool       // the value stands for the whole document
}

// String is the value's text; for the document value it is the body.
func (v Value) String() string { return v.Text }

// TextValues wraps plain strings as values.
func TextValues(ss ...string) []Value {
	out := make([]Value, len(ss))
	for i, s := range ss {
		out[i] = Value{Text: s}
	}
	return out
}

// Factory builds a processor from its JSON parameters (nil when absent),
// compiling and validating everything it can so that a bad parameter is
// refused at load, never found on a page.
type Factory func(params json.RawMessage) (Processor, error)

var registry = map[string]Factory{}

// register adds a processor type built by f. The processors' own files
// call registerProc (procspec.go), which describes the type's parameters
// for the schema and the docs; register alone is for the tests' own
// processor types, named "test-…".
func register(name string, f Factory) {
	if _, dup := registry[name]; dup {
		panic("etl: processor registered twice: " + name)
	}
	registry[name] = f
}

// ProcessorTypes lists the registered processor type names, sorted.
func ProcessorTypes() []string {
	out := make([]string, 0, len(registry))
	for name := range registry {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// decodeParams decodes a processor's parameters strictly: an unknown
// parameter is a typo the author wants to hear about. "$comment" is the
// one key every parameters object may hold besides the parameters, as
// everywhere in the format: it is for humans and is dropped.
func decodeParams(raw json.RawMessage, into any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if bytes.Contains(raw, []byte(`"$comment"`)) {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) == nil {
			delete(m, "$comment")
			if b, err := json.Marshal(m); err == nil {
				raw = b
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		var pe paramError
		if errors.As(err, &pe) {
			return pe
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("parameter %q: want %s, got %s", te.Field, jsonTypeName(te.Type.Kind().String()), te.Value)
		}
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if strings.HasPrefix(msg, "unknown field ") {
			return fmt.Errorf("unknown parameter %s", strings.TrimPrefix(msg, "unknown field "))
		}
		return fmt.Errorf("parameters: %s", msg)
	}
	return nil
}

// paramError is a parameter's own complaint about its value, from a
// parameter type's UnmarshalJSON; it is reported as it is.
type paramError string

func (e paramError) Error() string { return string(e) }

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "map", "struct":
		return "object"
	case "int", "int64", "int32", "uint", "float64":
		return "number"
	}
	return kind
}

// mapText applies f to the text of every value, keeping values for which
// f reports ok.
func mapText(in []Value, f func(string) (string, bool)) []Value {
	out := make([]Value, 0, len(in))
	for _, v := range in {
		if s, ok := f(v.Text); ok {
			out = append(out, Value{Text: s})
		}
	}
	return out
}
