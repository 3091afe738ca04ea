package records

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Reading JSON Lines: each line an object, its members as fields, the
// links in its values.

func (p *recordParser) jsonl(rr *recordReader) error {
	p.rr = rr
	for {
		text, line, tooLong, err := rr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", p.name, line, err)
		}
		if tooLong {
			if err := p.malformed(string(FormatJSONL), line, text, p.lineErr(line, "%s", tooLongReason(text))); err != nil {
				return err
			}
			continue
		}
		if line == 1 {
			text = bytes.TrimPrefix(text, []byte("\xef\xbb\xbf"))
		}
		if len(bytes.TrimSpace(text)) == 0 {
			continue // a blank line holds no record
		}
		text = bytes.Clone(text)
		reason := notUTF8(text)
		var rec Record
		if reason == "" {
			rec, reason = p.jsonRecord(text, line)
		}
		if reason != "" {
			if err := p.malformed(string(FormatJSONL), line, text, p.lineErr(line, "%s", reason)); err != nil {
				return err
			}
			continue
		}
		if err := p.finish(line, text, rec); err != nil {
			return err
		}
	}
}

func (p *recordParser) jsonRecord(raw []byte, line int) (Record, string) {
	members, _, err := JSONMembers(raw)
	if err != nil {
		return Record{}, err.Error()
	}
	rec := Record{Format: string(FormatJSONL), Raw: raw, Fields: make(map[string]string, len(members))}
	for _, m := range members {
		v, err := memberValue(m.Value)
		if err != nil {
			return Record{}, "bad JSON: " + err.Error()
		}
		rec.Order = append(rec.Order, m.Key)
		if m.Key == "links" {
			s, reason := p.jsonLinks(&rec, line, v)
			if reason != "" {
				return Record{}, reason
			}
			rec.Fields[m.Key] = s
			continue
		}
		rec.Fields[m.Key] = jsonText(v)
		p.mineLinks(&rec, line, v)
	}
	return rec, ""
}

// memberValue decodes one member's value (text JSONMembers has checked)
// as json.Decoder with UseNumber would: a UTF-8 string without escapes, a
// number and a literal straight from the text, the rest (escaped strings,
// lists, objects) through the decoder.
func memberValue(text []byte) (any, error) {
	switch c := text[0]; {
	case c == '"' && bytes.IndexByte(text, '\\') < 0 && utf8.Valid(text):
		return string(text[1 : len(text)-1]), nil
	case c == '-' || c >= '0' && c <= '9':
		return json.Number(text), nil
	case c == 't':
		return true, nil
	case c == 'f':
		return false, nil
	case c == 'n':
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// jsonLinks reads a links value: a list of URLs, or one string of URLs
// separated by whitespace.
func (p *recordParser) jsonLinks(rec *Record, line int, v any) (string, string) {
	switch x := v.(type) {
	case nil:
		return "", ""
	case string:
		for _, tok := range strings.Fields(x) {
			p.addLink(rec, line, tok, true)
		}
		return strings.TrimSpace(x), ""
	case []any:
		var parts []string
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				if e == nil {
					continue
				}
				return "", fmt.Sprintf("links: element %s is not a string", jsonText(e))
			}
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			p.addLink(rec, line, s, true)
			parts = append(parts, s)
		}
		return strings.Join(parts, " "), ""
	}
	return "", "links must be a list of URLs or a string"
}

// mineLinks adds every http(s) URL string in v (a scalar or a list).
func (p *recordParser) mineLinks(rec *Record, line int, v any) {
	switch x := v.(type) {
	case string:
		p.addLink(rec, line, strings.TrimSpace(x), false)
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok {
				p.addLink(rec, line, strings.TrimSpace(s), false)
			}
		}
	}
}

// jsonText renders a JSON value as the crawl reads a field: strings as
// themselves, numbers as written, null as missing, lists and objects as
// compact JSON. (Export writes the value as given, from Record.Raw.)
func jsonText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return strings.TrimSpace(x)
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
