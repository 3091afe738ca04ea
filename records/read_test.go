package records

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

type parsed struct {
	recs      []Record // good ones
	malformed []Record
	all       []Record // both, in order
	bad       []string
	warn      []string
	err       error
}

func parseAll(name string, data []byte, format Format) parsed {
	var p parsed
	p.err = Read(name, bytes.NewReader(data), format, func(r Record) error {
		p.all = append(p.all, r)
		if r.Error != "" {
			p.malformed = append(p.malformed, r)
		} else {
			p.recs = append(p.recs, r)
		}
		return nil
	}, func(e *LineError) { p.bad = append(p.bad, e.Error()) },
		func(e *LineError) { p.warn = append(p.warn, e.Error()) })
	return p
}

func TestRecordsFiles(t *testing.T) {
	tests := []struct {
		file  string
		ids   []string
		links map[string][]string
		bad   []string // prefixes, in order
		warn  []string
		field map[string]map[string]string
	}{
		{
			file: "people.csv",
			ids:  []string{"r1", "r2", "r3", "6"},
			links: map[string][]string{
				"r1": {"https://a.example/people/ann"},
				"r2": {"https://b.example/", "https://c.example/x"},
			},
			bad: []string{
				"people.csv:5: 4 columns, header has 5",
				`people.csv:7: duplicate id "r1" (first on line 2)`,
				`people.csv:8: column 4: extraneous or missing " in quoted-field`,
			},
			field: map[string]map[string]string{
				"r3": {"name": "Cy, Jr", "email": "", "links": ""},
				"6":  {"id": "", "name": "Eve"},
			},
		},
		{
			file: "people.jsonl",
			ids:  []string{"j1", "7", "4", "j11"},
			links: map[string][]string{
				"j1":  {"https://a.example/people/ann"},
				"7":   {"https://b.example/", "https://t.example/"},
				"j11": {"https://e.example/"},
			},
			bad: []string{
				`people.jsonl:5: duplicate id "j1" (first on line 1)`,
				"people.jsonl:6: bad JSON",
				"people.jsonl:7: not a JSON object",
				"people.jsonl:8: links: element 3 is not a string",
			},
			warn: []string{`people.jsonl:9: links: "ftp://bad.example/" is not an http(s) URL; ignored`},
			field: map[string]map[string]string{
				"j1": {"name": "Ann Lee", "email": "", "age": "41", "site": "https://a.example/people/ann"},
				"4":  {"name": "No Id", "email": ""},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "records", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			p := parseAll(tt.file, data, FormatAuto)
			if p.err != nil {
				t.Fatalf("error: %v", p.err)
			}
			var ids []string
			byID := make(map[string]Record)
			for i, r := range p.all {
				if r.Seq != int64(i+1) {
					t.Errorf("record %s: Seq %d, want %d", r.ID, r.Seq, i+1)
				}
			}
			for _, r := range p.recs {
				ids = append(ids, r.ID)
				byID[r.ID] = r
			}
			if len(p.malformed) != len(p.bad) {
				t.Errorf("%d malformed records for %d bad lines", len(p.malformed), len(p.bad))
			}
			if !reflect.DeepEqual(ids, tt.ids) {
				t.Errorf("ids = %q, want %q", ids, tt.ids)
			}
			for id, want := range tt.links {
				if got := byID[id].Links; !reflect.DeepEqual(got, want) {
					t.Errorf("record %s links = %q, want %q", id, got, want)
				}
			}
			for id, fields := range tt.field {
				for k, want := range fields {
					if got, ok := byID[id].Fields[k]; !ok || got != want {
						t.Errorf("record %s field %s = %q (present %v), want %q", id, k, got, ok, want)
					}
				}
			}
			if len(p.bad) != len(tt.bad) {
				t.Fatalf("bad lines = %q, want %d like %q", p.bad, len(tt.bad), tt.bad)
			}
			for i, want := range tt.bad {
				if !strings.HasPrefix(p.bad[i], want) {
					t.Errorf("bad line %d = %q, want prefix %q", i, p.bad[i], want)
				}
			}
			if !reflect.DeepEqual(p.warn, tt.warn) {
				t.Errorf("warnings = %q, want %q", p.warn, tt.warn)
			}
		})
	}
}

func TestRecordsEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		data    string
		ids     []string
		nbad    int
		wantErr string
	}{
		{"empty csv", "e.csv", "", nil, 0, "e.csv: no records: the file is empty"},
		{"blank jsonl", "e.jsonl", "\n  \n", nil, 0, "e.jsonl: no records: the file is empty"},
		{"header only", "h.csv", "id,name\n", nil, 0, "h.csv: no records: the file holds a header and no record"},
		{"binary garbage", "g.csv", "PK\x03\x04\x00\x14junk", nil, 0, "g.csv: not CSV or JSON Lines: binary data (a NUL byte at offset 4)"},
		{"header not utf-8", "l.csv", "id,caf\xe9\n1,x\n", nil, 0, "l.csv:1: header: not valid UTF-8 (byte 0xE9 at column 7): records files must be UTF-8 (convert with iconv, e.g. iconv -f latin1 -t utf-8)"},
		{"duplicate column", "d.csv", "id,name,name\n1,a,b\n", nil, 0, `d.csv:1: header: duplicate column "name"`},
		{"unnamed column", "u.csv", "id,,x\n", nil, 0, "u.csv:1: header: column 2 has no name"},
		{"bom and crlf", "b.csv", "\xef\xbb\xbfid,url\r\nx,https://a.example/\r\n", []string{"x"}, 0, ""},
		{"sniff jsonl", "records", "\n{\"id\":\"a\"}\n{\"id\":\"b\"}", []string{"a", "b"}, 0, ""},
		{"sniff csv", "records", "id\nq\n", []string{"q"}, 0, ""},
		{"line numbers as ids", "n.jsonl", "{\"x\":1}\n{\"x\":2}\n", []string{"1", "2"}, 0, ""},
		{"id collides with a line number", "c.jsonl", "{\"id\":\"2\"}\n{\"x\":2}\n", []string{"2"}, 1, ""},
		{"object id", "o.jsonl", "{\"id\":{\"a\":1}}\n", nil, 1, ""},
		{"trailing garbage", "t.jsonl", "{\"id\":\"a\"} x\n", nil, 1, ""},
		{"duplicate key", "k.jsonl", "{\"id\":\"a\",\"id\":\"b\"}\n", nil, 1, ""},
		{"long line", "l.jsonl", "{\"id\":\"" + strings.Repeat("x", MaxRecordBytes) + "\"}\n{\"id\":\"ok\"}\n", []string{"ok"}, 1, ""},
		{"long csv record", "l.csv", "id,v\n1,\"" + strings.Repeat("x\n", MaxRecordBytes/2) + "\"\n2,ok\n", []string{"2"}, 1, ""},
		{"latin-1 line", "l.csv", "id,name\n1,Jos\xe9\n2,Ana\n", []string{"2"}, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := parseAll(tt.file, []byte(tt.data), FormatAuto)
			if tt.wantErr != "" {
				if p.err == nil || p.err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", p.err, tt.wantErr)
				}
				return
			}
			if p.err != nil {
				t.Fatalf("error: %v", p.err)
			}
			var ids []string
			for _, r := range p.recs {
				ids = append(ids, r.ID)
			}
			if !reflect.DeepEqual(ids, tt.ids) {
				t.Errorf("ids = %q, want %q", ids, tt.ids)
			}
			if len(p.bad) != tt.nbad {
				t.Errorf("bad = %q, want %d", p.bad, tt.nbad)
			}
		})
	}
}

// FuzzRecords feeds arbitrary bytes to both parsers: they must not panic,
// every record must have a unique non-empty id, and every link must be an
// http(s) URL.
func FuzzRecords(f *testing.F) {
	for _, name := range []string{"people.csv", "people.jsonl"} {
		data, err := os.ReadFile(filepath.Join("testdata", "records", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("id,links\n1,http://a.example/ https://b.example/x\n"))
	f.Add([]byte("{\"links\":[\"http://a.example/\",null]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, format := range []Format{FormatCSV, FormatJSONL} {
			p := parseAll("fuzz", data, format)
			ids := make(map[string]bool)
			for i, r := range p.all {
				if r.ID == "" || ids[r.ID] {
					t.Fatalf("format %s: empty or duplicate id %q", format, r.ID)
				}
				ids[r.ID] = true
				if r.Seq != int64(i+1) {
					t.Fatalf("format %s: record %q has seq %d at %d", format, r.ID, r.Seq, i+1)
				}
				if r.Error != "" {
					if len(r.Fields) > 0 || len(r.Links) > 0 {
						t.Fatalf("malformed record %q has fields or links", r.ID)
					}
					continue
				}
				if !utf8.Valid(r.Raw) {
					t.Fatalf("record %q kept text that is not UTF-8", r.ID)
				}
				if format == FormatCSV {
					if cells, err := SplitCSVRecord(r.Raw); err != nil || len(cells) != len(r.Order) {
						t.Fatalf("record %q: raw %q splits into %q, %v for %d columns", r.ID, r.Raw, cells, err, len(r.Order))
					}
				}
				for _, l := range r.Links {
					if !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") {
						t.Fatalf("format %s: link %q is not http(s)", format, l)
					}
				}
				// A store keeps the text alone and reads the rest again.
				again, err := Parse(r.Format, r.Raw, r.Order)
				if err != nil || !reflect.DeepEqual(again.Fields, r.Fields) || !reflect.DeepEqual(again.Order, r.Order) || !slices.Equal(again.Links, r.Links) {
					t.Fatalf("record %q parsed again as %q %q %q (%v), read as %q %q %q", r.ID, again.Fields, again.Order, again.Links, err, r.Fields, r.Order, r.Links)
				}
			}
			for _, b := range p.bad {
				if !strings.HasPrefix(b, "fuzz:") {
					t.Fatalf("bad line error %q does not name the file", b)
				}
			}
		}
	})
}

// TestRecordsKeepRaw checks that each record keeps its text exactly as
// read (what export writes back), and that malformed lines keep theirs,
// their place and their reason.
func TestRecordsKeepRaw(t *testing.T) {
	csvData := "id,name,note\n1, Ada ,\"two\r\nlines\"\r\n2,Bob,x\n3,Cy\n4,Dee,\"a\"b\"\n"
	p := parseAll("x.csv", []byte(csvData), FormatAuto)
	if p.err != nil {
		t.Fatal(p.err)
	}
	type row struct{ id, raw, err string }
	var got []row
	for _, r := range p.all {
		got = append(got, row{r.ID, string(r.Raw), r.Error})
		if r.Format != string(FormatCSV) {
			t.Errorf("record %s: format %q", r.ID, r.Format)
		}
	}
	want := []row{
		{"1", "1, Ada ,\"two\r\nlines\"", ""},
		{"2", "2,Bob,x", ""},
		{"line 5", "3,Cy", "x.csv:5: 2 columns, header has 3"},
		{"line 6", "4,Dee,\"a\"b\"", `x.csv:6: column 10: extraneous or missing " in quoted-field`},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("csv records:\ngot  %q\nwant %q", got, want)
	}
	if n := p.recs[0].Fields["name"]; n != "Ada" {
		t.Errorf("name field %q, want it trimmed for the crawl", n)
	}

	jsonData := "\xef\xbb\xbf{\"id\": 1, \"n\": 1e3, \"f\": 0.10}\n{\"id\": \"x\", \"v\": \"caf\xe9\"}\n{bad\n"
	p = parseAll("x.jsonl", []byte(jsonData), FormatAuto)
	if p.err != nil {
		t.Fatal(p.err)
	}
	got = got[:0]
	for _, r := range p.all {
		got = append(got, row{r.ID, string(r.Raw), r.Error})
	}
	want = []row{
		{"1", `{"id": 1, "n": 1e3, "f": 0.10}`, ""},
		{"line 2", "{\"id\": \"x\", \"v\": \"caf\xe9\"}", "x.jsonl:2: not valid UTF-8 (byte 0xE9 at column 22): records files must be UTF-8 (convert with iconv, e.g. iconv -f latin1 -t utf-8)"},
		{"line 3", "{bad", "x.jsonl:3: bad JSON: invalid character 'b'"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("jsonl records:\ngot  %q\nwant %q", got, want)
	}
	if n := p.recs[0].Fields["n"]; n != "1e3" {
		t.Errorf("number field %q, want it as written", n)
	}
}

// TestMemberValue holds the short cuts of memberValue to what the decoder
// (UseNumber) gives for the same text.
func TestMemberValue(t *testing.T) {
	for _, text := range []string{`"a"`, `""`, `"a\"b"`, `"caf\u00e9"`, `"é ü"`, "\"caf\xe9\"", `1e3`, `-0.50`, `0`, `true`, `false`, `null`,
		`[1,"x",null]`, `{"a":{"b":2}}`} {
		dec := json.NewDecoder(strings.NewReader(text))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		got, err := memberValue([]byte(text))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %#v (%v), want %#v", text, got, err, want)
		}
	}
}

// TestUnbalancedQuote: a quote opened and never closed on its line makes
// that line alone malformed, reported at its own line; the lines it
// would have taken in are records of their own, at their lines and
// places. A quoted cell that holds line breaks is still one record.
func TestUnbalancedQuote(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []string // id@line:end offset, or !line for a malformed one
	}{
		{"open quote", "id,name,url\nr1,\"Ann,http://a.example/\nr2,Bo,http://b.example/\nr3,\"Cy, Jr\",http://c.example/\n",
			[]string{"!2:38", "r2@3:62", "r3@4:92"}},
		{"open quote, CRLF, no last line break", "id,name\r\nr1,\"Ann\r\nr2,Bo\r\nr3,Cy",
			[]string{"!2:18", "r2@3:25", "r3@4:30"}},
		{"open quote on the last line", "id,name\nr1,Ann\nr2,\"Bo\n",
			[]string{"r1@2:15", "!3:22"}},
		{"a cell with line breaks", "id,note\nr1,\"two\nlines\"\nr2,x\n",
			[]string{"r1@2:23", "r2@4:28"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			err := ReadFrom("f.csv", bytes.NewReader([]byte(tc.data)), nil, Pos{}, FormatCSV, func(r Record, line int, end Pos) error {
				if r.Error != "" {
					if !strings.Contains(r.Error, fmt.Sprintf("f.csv:%d: ", line)) {
						t.Errorf("malformed line %d says %q", line, r.Error)
					}
					got = append(got, fmt.Sprintf("!%d:%d", line, end.Offset))
				} else {
					got = append(got, fmt.Sprintf("%s@%d:%d", r.ID, line, end.Offset))
				}
				return nil
			}, func(*LineError) {}, func(*LineError) {})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("records %q, want %q", got, tc.want)
			}
		})
	}
}
