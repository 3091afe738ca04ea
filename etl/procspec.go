package etl

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// A processor type is described once, in its own file: a parameter struct
// whose fields (with their json names and tags) are the parameters the
// loader decodes, and a procSpec saying what the type does. The registry
// builds the processor from exactly that struct, and `go generate ./etl`
// writes the processor part of mappings/schema.json and the processor
// reference of docs/mappings.md from the same two things (procgen.go), so
// the three cannot disagree; TestGeneratedSchemaAndDocs fails when the
// files on disk are stale.
//
// Tags of a parameter field, besides json:
//
//	doc:"…"          what the parameter means (required)
//	required:"true"  the processor cannot do without it
//	enum:"a|b"       the only values allowed (a string parameter)
//	pattern:"\\S"    a regular expression a string value must match
//	minLength:"1"    the shortest string allowed
//	minimum:"0"      the smallest number allowed
//
// A parameter of a type other than string, bool, int and pointers to them
// implements schemaTyper to say how the schema describes it.

// procSpec describes one processor type.
type procSpec struct {
	name  string
	group docGroup
	// summary is one or two sentences: the schema's description of the
	// type and of its parameters object, and the first line in the docs.
	summary string
	// doc is Markdown shown in docs/mappings.md after the summary: the
	// details a user needs beyond the parameter table.
	doc string
	// example is the parameters of the example shown in the schema and
	// the docs, as JSON; "" shows the processor without parameters.
	example string
	// constraints are extra JSON Schema keywords of the parameters
	// object, as a JSON object ("" for none).
	constraints string

	params reflect.Type // the parameter struct
}

// docGroup is where docs/mappings.md lists a processor.
type docGroup int

const (
	groupSelect docGroup = iota // take values from the document
	groupText                   // change each value's text
	groupList                   // reshape the list of values
	groupTyped                  // read values as URLs, emails, numbers, dates
)

var docGroups = []struct {
	group docGroup
	title string
	intro string
}{
	{groupSelect, "Selecting", "These take values from the document; they usually come first in a chain."},
	{groupText, "Text", "These change the text of each value and keep the order."},
	{groupList, "Lists", "These reshape the list of values rather than each value."},
	{groupTyped, "Typed values", "These read each value as a URL, an email address, a number or a date, and drop the values that are not."},
}

// specs holds the description of every registered processor type but the
// tests' own.
var specs = map[string]*procSpec{}

// schemaTyper is a parameter type that is not a plain string, boolean or
// integer: it gives the JSON Schema keywords saying what it accepts.
type schemaTyper interface {
	jsonSchema() orderedJSON
}

// registerProc registers a processor type whose parameters are P (a
// struct) and which build makes from them; called from init in the
// processor's file. Unknown parameters are refused by the decoding; build
// checks what the struct's types cannot.
func registerProc[P any](s procSpec, build func(P) (Processor, error)) {
	s.params = reflect.TypeFor[P]()
	if err := checkParamStruct(s.params); err != nil {
		panic("etl: processor " + s.name + ": " + err.Error())
	}
	if s.example != "" && !json.Valid([]byte(s.example)) {
		panic("etl: processor " + s.name + ": example is not JSON")
	}
	register(s.name, func(raw json.RawMessage) (Processor, error) {
		var p P
		if err := decodeParams(raw, &p); err != nil {
			return nil, err
		}
		return build(p)
	})
	specs[s.name] = &s
}

// noParameters is the parameter struct of a processor that takes none.
type noParameters struct{}

// param is one parameter as the schema and the docs describe it.
type param struct {
	name     string
	doc      string
	required bool
	typ      reflect.Type
	enum     []string
	pattern  string
	minLen   string
	minimum  string
}

// paramsOf lists the parameters of a processor's struct, in field order.
func paramsOf(t reflect.Type) []param {
	var out []param
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		p := param{
			name:     name,
			doc:      f.Tag.Get("doc"),
			required: f.Tag.Get("required") == "true",
			typ:      f.Type,
			pattern:  f.Tag.Get("pattern"),
			minLen:   f.Tag.Get("minLength"),
			minimum:  f.Tag.Get("minimum"),
		}
		if e := f.Tag.Get("enum"); e != "" {
			p.enum = strings.Split(e, "|")
		}
		out = append(out, p)
	}
	return out
}

// checkParamStruct refuses a parameter struct the schema and docs could
// not describe: a field without a json name or a doc, or of a type the
// generator does not know.
func checkParamStruct(t reflect.Type) error {
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("parameters are a %s, want a struct", t.Kind())
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case !f.IsExported():
			return fmt.Errorf("parameter field %s is not exported, so it cannot be decoded", f.Name)
		case name == "" || name == "-":
			return fmt.Errorf("parameter field %s has no json name", f.Name)
		case f.Tag.Get("doc") == "":
			return fmt.Errorf("parameter %q has no doc tag", name)
		}
		if _, err := schemaType(f.Type); err != nil {
			return fmt.Errorf("parameter %q: %v", name, err)
		}
	}
	return nil
}

// schemaType is the JSON Schema type keywords of a parameter's Go type.
func schemaType(t reflect.Type) (orderedJSON, error) {
	if st, ok := reflect.Zero(t).Interface().(schemaTyper); ok {
		return st.jsonSchema(), nil
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return orderedJSON{{"type", "string"}}, nil
	case reflect.Bool:
		return orderedJSON{{"type", "boolean"}}, nil
	case reflect.Int:
		return orderedJSON{{"type", "integer"}}, nil
	}
	return nil, fmt.Errorf("type %s: want string, bool, int, a pointer to one, or a schemaTyper", t)
}

// typeWords says a parameter's type in the docs' words.
func (p param) typeWords() string {
	if len(p.enum) > 0 {
		q := make([]string, len(p.enum))
		for i, e := range p.enum {
			q[i] = fmt.Sprintf("`%q`", e)
		}
		return strings.Join(q, " or ")
	}
	kw, _ := schemaType(p.typ)
	var types []string
	for _, e := range kw {
		if e.key != "type" {
			continue
		}
		switch v := e.value.(type) {
		case string:
			types = append(types, v)
		case []string:
			types = append(types, v...)
		}
	}
	for i, t := range types {
		if t == "array" {
			types[i] = "array of " + itemWords(kw)
		}
	}
	return strings.Join(types, " or ")
}

// itemWords says what the items of an array parameter are: strings, or
// (the items being arrays themselves) chains of processors.
func itemWords(kw orderedJSON) string {
	for _, e := range kw {
		if items, ok := e.value.(orderedJSON); ok && e.key == "items" {
			for _, i := range items {
				if i.key == "type" && i.value == "array" {
					return "chains of processors"
				}
			}
		}
	}
	return "strings"
}
