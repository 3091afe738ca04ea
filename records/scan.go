package records

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// A record's Raw text is read back here, the same way the records reader
// read it: export takes the user's values from it byte for byte, so they
// come back exactly as given (no trimming, no re-encoding, JSON numbers as
// written, JSON types kept).

// Errors of SplitCSVRecord, worded as encoding/csv words them.
var (
	ErrBareQuote = errors.New(`bare " in non-quoted-field`)
	ErrQuote     = errors.New(`extraneous or missing " in quoted-field`)
)

// SplitCSVRecord splits one CSV record (RFC 4180, comma-separated; raw is
// the record without its line terminator, and may span lines inside
// quotes) into its cells, byte for byte: a quoted cell loses its quotes
// and has each "" read as ", and nothing else changes (unlike
// encoding/csv, a quoted line break keeps its \r). A quote inside an
// unquoted cell, or a quoted cell not closed or followed by anything but
// a comma, is an error naming the 1-based column (byte) where it is.
func SplitCSVRecord(raw []byte) ([]string, error) {
	var cells []string
	var cell []byte
	i := 0
	for {
		cell = cell[:0]
		if i < len(raw) && raw[i] == '"' {
			start := i
			i++
			for {
				j := bytes.IndexByte(raw[i:], '"')
				if j < 0 {
					return nil, fmt.Errorf("column %d: %w", start+1, ErrQuote)
				}
				cell = append(cell, raw[i:i+j]...)
				i += j + 1
				if i < len(raw) && raw[i] == '"' {
					cell = append(cell, '"')
					i++
					continue
				}
				break
			}
			cells = append(cells, string(cell))
			if i == len(raw) {
				return cells, nil
			}
			if raw[i] != ',' {
				return nil, fmt.Errorf("column %d: %w", i+1, ErrQuote)
			}
			i++
			continue
		}
		j := bytes.IndexByte(raw[i:], ',')
		end := len(raw)
		if j >= 0 {
			end = i + j
		}
		if q := bytes.IndexByte(raw[i:end], '"'); q >= 0 {
			return nil, fmt.Errorf("column %d: %w", i+q+1, ErrBareQuote)
		}
		cells = append(cells, string(raw[i:end]))
		if j < 0 {
			return cells, nil
		}
		i = end + 1
	}
}

// JSONMember is one member of a JSON object as written: its key (decoded)
// and its value's exact text, at Start:End of the object's text.
type JSONMember struct {
	Key        string
	Value      json.RawMessage
	Start, End int
}

// JSONMembers reads a JSON object's members in order, with where each
// value's text is; end is where the closing brace is. A duplicate key is
// an error (which value would be the record's?), as is anything after the
// object but white space. Syntax errors read "bad JSON: …".
func JSONMembers(raw []byte) (members []JSONMember, end int, err error) {
	members, end, err = jsonMembers(raw)
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		err = errors.New("bad JSON: the line ends inside the object")
	case errors.As(err, &se):
		err = fmt.Errorf("bad JSON: %w", err)
	}
	return members, end, err
}

func jsonMembers(raw []byte) (members []JSONMember, end int, err error) {
	if members, end, ok := validMembers(raw); ok {
		return members, end, nil
	}
	// Not a valid object without duplicate keys: the decoder says why.
	return decodeMembers(raw)
}

// decodeMembers is jsonMembers through a json.Decoder.
func decodeMembers(raw []byte) (members []JSONMember, end int, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, 0, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, 0, errors.New("not a JSON object")
	}
	seen := make(map[string]bool)
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, 0, err
		}
		key := kt.(string) // object keys are always strings
		if seen[key] {
			return nil, 0, fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, 0, err
		}
		e := int(dec.InputOffset())
		members = append(members, JSONMember{Key: key, Value: v, Start: e - len(v), End: e})
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, 0, err
	}
	end = int(dec.InputOffset()) - 1
	if _, err := dec.Token(); err != io.EOF {
		return nil, 0, errors.New("trailing data after the object")
	}
	return members, end, nil
}

// validMembers is jsonMembers for the usual case, in one pass of
// json.Valid and one of a plain split (a json.Decoder per line cost as
// much as the rest of taking a record in): ok is false when raw is not a
// valid JSON object or repeats a key, and jsonMembers asks the decoder
// why. Values alias raw.
func validMembers(raw []byte) (members []JSONMember, end int, ok bool) {
	if !json.Valid(raw) {
		return nil, 0, false
	}
	i := skipSpace(raw, 0)
	if raw[i] != '{' {
		return nil, 0, false
	}
	i = skipSpace(raw, i+1)
	if raw[i] == '}' {
		return nil, i, true
	}
	for {
		j := jsonValueEnd(raw, i) // the key, a string
		key := string(raw[i+1 : j-1])
		if bytes.IndexByte(raw[i:j], '\\') >= 0 || !utf8.Valid(raw[i:j]) {
			if json.Unmarshal(raw[i:j], &key) != nil {
				return nil, 0, false
			}
		}
		for _, m := range members {
			if m.Key == key {
				return nil, 0, false
			}
		}
		i = skipSpace(raw, skipSpace(raw, j)+1) // past the colon
		j = jsonValueEnd(raw, i)
		members = append(members, JSONMember{Key: key, Value: raw[i:j:j], Start: i, End: j})
		i = skipSpace(raw, j)
		if raw[i] == '}' {
			return members, i, true
		}
		i = skipSpace(raw, i+1) // past the comma
	}
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonValueEnd returns the index just after the value starting at i in b,
// which json.Valid has checked.
func jsonValueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		for i++; ; i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = jsonValueEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for ; i < len(b); i++ { // a number or a literal
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return i
}

// SpliceJSON is the object raw with the values of the keys in set
// replaced, and the members add (keys already JSON-encoded, not in raw)
// appended before its closing brace, in order. Everything else stays as
// written, white space included; text around the object is dropped.
func SpliceJSON(raw []byte, set map[string][]byte, add []string, addVals [][]byte) ([]byte, error) {
	members, end, err := JSONMembers(raw)
	if err != nil {
		return nil, err
	}
	start := bytes.IndexByte(raw, '{')
	out := make([]byte, 0, len(raw)+64)
	at := start
	for _, m := range members {
		v, ok := set[m.Key]
		if !ok {
			continue
		}
		out = append(out, raw[at:m.Start]...)
		out = append(out, v...)
		at = m.End
	}
	out = append(out, raw[at:end]...)
	for i, k := range add {
		if len(members) > 0 || i > 0 {
			out = append(out, ',')
		}
		out = append(out, k...)
		out = append(out, ':')
		out = append(out, addVals[i]...)
	}
	return append(out, '}'), nil
}
