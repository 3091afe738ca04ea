package etl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// jnode is one JSON value with the byte span it came from. Mapping files
// are decoded through this tree rather than straight into structs so that
// every complaint about a mapping can point at file:line:col.
type jnode struct {
	kind    byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	off     int  // offset of the value's first byte
	end     int  // offset just past the value
	keys    []string
	members []*jnode // object values, parallel to keys
	elems   []*jnode // array elements
	str     string
	num     json.Number
	b       bool
}

// maxJSONDepth bounds nesting so a hostile file cannot exhaust the stack.
const maxJSONDepth = 64

// syntaxError is a JSON syntax problem at a byte offset.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return e.msg }

func parseJSONTree(data []byte) (*jnode, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := readJNode(dec, data, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		off := skipJSONSpace(data, n.end)
		return nil, &syntaxError{off: off, msg: "unexpected data after the top-level value"}
	}
	return n, nil
}

func skipJSONSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\r', '\n', ',', ':':
			i++
		default:
			return i
		}
	}
	return i
}

func tokenError(dec *json.Decoder, data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := int(se.Offset)
		if off < 0 {
			off = 0
		}
		return &syntaxError{off: off, msg: se.Error()}
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return &syntaxError{off: len(data), msg: "unexpected end of JSON input"}
	}
	return &syntaxError{off: int(dec.InputOffset()), msg: err.Error()}
}

func readJNode(dec *json.Decoder, data []byte, depth int) (*jnode, error) {
	start := skipJSONSpace(data, int(dec.InputOffset()))
	if depth > maxJSONDepth {
		return nil, &syntaxError{off: start, msg: fmt.Sprintf("nesting deeper than %d levels", maxJSONDepth)}
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, tokenError(dec, data, err)
	}
	n := &jnode{off: start}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n.kind = 'o'
			for dec.More() {
				koff := skipJSONSpace(data, int(dec.InputOffset()))
				kt, err := dec.Token()
				if err != nil {
					return nil, tokenError(dec, data, err)
				}
				key, ok := kt.(string)
				if !ok {
					return nil, &syntaxError{off: koff, msg: "object key must be a string"}
				}
				for _, k := range n.keys {
					if k == key {
						return nil, &syntaxError{off: koff, msg: fmt.Sprintf("duplicate key %q", key)}
					}
				}
				v, err := readJNode(dec, data, depth+1)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, key)
				n.members = append(n.members, v)
			}
		case '[':
			n.kind = 'a'
			for dec.More() {
				v, err := readJNode(dec, data, depth+1)
				if err != nil {
					return nil, err
				}
				n.elems = append(n.elems, v)
			}
		default:
			return nil, &syntaxError{off: start, msg: fmt.Sprintf("unexpected %q", rune(t))}
		}
		if _, err := dec.Token(); err != nil { // closing delimiter
			return nil, tokenError(dec, data, err)
		}
	case string:
		n.kind, n.str = 's', t
	case json.Number:
		n.kind, n.num = 'n', t
	case bool:
		n.kind, n.b = 'b', t
	case nil:
		n.kind = 'z'
	}
	n.end = int(dec.InputOffset())
	return n, nil
}

// get returns the member named key of an object node, or nil.
func (n *jnode) get(key string) *jnode {
	for i, k := range n.keys {
		if k == key {
			return n.members[i]
		}
	}
	return nil
}

func (n *jnode) kindName() string {
	switch n.kind {
	case 'o':
		return "object"
	case 'a':
		return "array"
	case 's':
		return "string"
	case 'n':
		return "number"
	case 'b':
		return "boolean"
	}
	return "null"
}

// lineCol turns a byte offset into 1-based line and column (columns count
// bytes, as compilers do).
func lineCol(data []byte, off int) (line, col int) {
	if off > len(data) {
		off = len(data)
	}
	line = 1 + bytes.Count(data[:off], []byte{'\n'})
	col = off - (bytes.LastIndexByte(data[:off], '\n') + 1) + 1
	return line, col
}
