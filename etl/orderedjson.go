package etl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// orderedJSON is a JSON object that keeps its members in order, for the
// files `go generate ./etl` writes (mappings/schema.json): a reader
// expects a schema's keys in a sensible order, and a regenerated file must
// differ from the last one only where something changed.
type orderedJSON []orderedMember

type orderedMember struct {
	key   string
	value any
}

// get returns the value of key, nil when absent.
func (o orderedJSON) get(key string) any {
	for _, m := range o {
		if m.key == key {
			return m.value
		}
	}
	return nil
}

// object returns the member key as an object, nil when it is not one.
func (o orderedJSON) object(key string) orderedJSON {
	v, _ := o.get(key).(orderedJSON)
	return v
}

// with returns o with key set to v: in place when key is a member,
// appended otherwise.
func (o orderedJSON) with(key string, v any) orderedJSON {
	for i, m := range o {
		if m.key == key {
			o[i].value = v
			return o
		}
	}
	return append(o, orderedMember{key, v})
}

// MarshalJSON writes the members in order, HTML characters unescaped (the
// files are read by people and editors, not embedded in pages).
func (o orderedJSON) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := marshalNoEscape(m.key)
		if err != nil {
			return nil, err
		}
		v, err := marshalNoEscape(m.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// EncodeFile encodes v as the project's JSON files are written (mapping
// files, the schema): indented by two spaces, HTML characters as they are
// (the files are read by people and editors), a final newline.
func EncodeFile(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// decodeOrdered reads JSON keeping the order of object members: objects
// come back as orderedJSON, arrays as []any, numbers as json.Number.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeOrderedValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the top-level value")
	}
	return v, nil
}

func decodeOrderedValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := orderedJSON{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeOrderedValue(dec)
				if err != nil {
					return nil, err
				}
				o = append(o, orderedMember{k, v})
			}
			_, err := dec.Token() // '}'
			return o, err
		case '[':
			a := []any{}
			for dec.More() {
				v, err := decodeOrderedValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token() // ']'
			return a, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	}
	return tok, nil
}
