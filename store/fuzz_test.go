package store

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeRecordColumns feeds arbitrary text to the decoders of a record's
// stored JSON columns: they must fail cleanly, and what they accept must
// survive an encode/decode round trip.
func FuzzDecodeRecordColumns(f *testing.F) {
	f.Add(`{"name":"Ada","email":""}`, `["name","email"]`, `["https://one.example/"]`)
	f.Add(`{}`, `[]`, `[]`)
	f.Add(`null`, `null`, `null`)
	f.Add(`{"a":1}`, `["a",2]`, `"x"`)
	f.Add(`{"a":"\ud800"}`, `[`, `]`)
	f.Fuzz(func(t *testing.T, fields, order, links string) {
		var rec Record
		if err := decodeRecordColumns(&rec, fields, order, links); err != nil {
			return
		}
		if rec.Fields == nil {
			t.Fatal("decoded Fields is nil")
		}
		fb, ob, lb, err := encodeRecordColumns(rec)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var again Record
		if err := decodeRecordColumns(&again, fb, ob, lb); err != nil {
			t.Fatalf("decode of our own encoding %s %s %s: %v", fb, ob, lb, err)
		}
		if len(rec.Order) == 0 && len(again.Order) == 0 {
			rec.Order, again.Order = nil, nil
		}
		if len(rec.Links) == 0 && len(again.Links) == 0 {
			rec.Links, again.Links = nil, nil
		}
		if !reflect.DeepEqual(rec, again) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", rec, again)
		}
	})
}

// FuzzDecodeConflicts does the same for a field's stored conflicts and time.
func FuzzDecodeConflicts(f *testing.F) {
	f.Add(`[{"value":"v","source":"https://s.example/","depth":2}]`, "2025-01-02T03:04:05.000000000Z")
	f.Add(`[]`, "0001-01-01T00:00:00Z")
	f.Add(`[{"depth":"x"}]`, "2025-13-02T03:04:05Z")
	f.Add(`{}`, "")
	f.Fuzz(func(t *testing.T, conflicts, at string) {
		if tm, err := parseTime(at); err == nil {
			if s, err := formatTime(tm); err == nil {
				back, err := parseTime(s)
				if err != nil || !back.Equal(tm) {
					t.Fatalf("time %q → %q → %v, %v", at, s, back, err)
				}
			}
		}
		cs, err := decodeConflicts(conflicts)
		if err != nil {
			return
		}
		s, err := encodeConflicts(cs)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := decodeConflicts(s)
		if err != nil {
			t.Fatalf("decode of our own encoding %s: %v", s, err)
		}
		if !reflect.DeepEqual(cs, again) {
			t.Fatalf("round trip changed the conflicts:\n%+v\n%+v", cs, again)
		}
	})
}

// FuzzExportRecord checks that whatever text a page or an input holds, one
// exported record reads back as valid JSON and CSV with its values intact.
func FuzzExportRecord(f *testing.F) {
	f.Add("1", "name", "Ada", "email", "a@b.example", "https://s.example/")
	f.Add("é\"", "a,b", "line\nbreak", "q\"", "<script>&amp;", "")
	f.Add("", "", "", "x", "\r\n", "\x00")
	f.Fuzz(func(t *testing.T, id, inField, inValue, foundField, foundValue, source string) {
		if inField == foundField {
			foundField += "_found"
		}
		rec := Record{
			ID:     id,
			Fields: map[string]string{inField: inValue},
			Order:  []string{inField},
			Found:  map[string]Value{foundField: {Field: foundField, Value: foundValue, Source: source, Mapping: "m"}},
		}
		opts := ExportOptions{Provenance: true}

		line, err := newJSONLEncoder(opts).encode(rec)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		var got struct {
			ID         string                    `json:"id"`
			Fields     map[string]*string        `json:"fields"`
			Provenance map[string]provenanceJSON `json:"provenance"`
		}
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatalf("line is not JSON: %v\n%s", err, line)
		}
		if bytes.Count(line, []byte("\n")) != 1 {
			t.Fatalf("line has embedded newlines: %q", line)
		}
		valid := utf8.ValidString(id + inField + inValue + foundField + foundValue + source)
		if valid {
			if got.ID != id {
				t.Fatalf("id %q came back %q", id, got.ID)
			}
			if p := got.Fields[inField]; (inValue == "") != (p == nil) || (p != nil && *p != inValue) {
				t.Fatalf("input field %q=%q came back %v", inField, inValue, p)
			}
			if foundValue != "" {
				if p := got.Fields[foundField]; p == nil || *p != foundValue {
					t.Fatalf("found field %q=%q came back %v", foundField, foundValue, p)
				}
			}
			if got.Provenance[foundField].Source != source {
				t.Fatalf("source %q came back %q", source, got.Provenance[foundField].Source)
			}
		}

		l := &csvLayout{
			cols:   []string{inField, foundField},
			known:  map[string]bool{inField: true, foundField: true},
			prov:   map[string]bool{foundField: true},
			header: append([]string{inField, foundField}, provHeader(foundField)...),
		}
		row := make([]string, len(l.header))
		if err := l.row(rec, row); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		w := csv.NewWriter(&out)
		w.Write(l.header)
		w.Write(row)
		w.Flush()
		if err := w.Error(); err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(&out).ReadAll()
		if err != nil {
			t.Fatalf("output is not CSV: %v\n%s", err, out.Bytes())
		}
		if len(rows) != 2 {
			t.Fatalf("CSV has %d rows, want 2:\n%q", len(rows), out.Bytes())
		}
		// encoding/csv reads a quoted \r\n back as \n.
		crlf := func(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }
		for i := range row {
			if rows[1][i] != crlf(row[i]) {
				t.Fatalf("CSV column %d: %q came back %q", i, row[i], rows[1][i])
			}
		}
	})
}

// provHeader is the CSV provenance columns of field.
func provHeader(field string) []string {
	out := make([]string, len(provColumns))
	for i, c := range provColumns {
		out[i] = field + c
	}
	return out
}
