package dispatcher

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"backfill/etl"
	"backfill/store"
)

type parsed struct {
	recs      []store.Record // good ones
	malformed []store.Record
	all       []store.Record // both, in order
	bad       []string
	warn      []string
	err       error
}

func parseAll(name string, data []byte, format Format) parsed {
	var p parsed
	p.err = readRecords(name, bytes.NewReader(data), format, func(r store.Record) error {
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
			byID := make(map[string]store.Record)
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
					t.Fatalf("format %d: empty or duplicate id %q", format, r.ID)
				}
				ids[r.ID] = true
				if r.Seq != int64(i+1) {
					t.Fatalf("format %d: record %q has seq %d at %d", format, r.ID, r.Seq, i+1)
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
					if cells, err := store.SplitCSVRecord(r.Raw); err != nil || len(cells) != len(r.Order) {
						t.Fatalf("record %q: raw %q splits into %q, %v for %d columns", r.ID, r.Raw, cells, err, len(r.Order))
					}
				}
				for _, l := range r.Links {
					if !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") {
						t.Fatalf("format %d: link %q is not http(s)", format, l)
					}
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

// TestLongRecordLink: a record's own link longer than etl.MaxURLLength is
// refused wherever it stands, said on its line and counted in the run
// summary as url-length; the record and its other links are kept.
func TestLongRecordLink(t *testing.T) {
	long := "https://a.example/" + strings.Repeat("x", etl.MaxURLLength)
	e := newEnv(t, t.TempDir(), func(c *Config) { c.Fields = []string{"phone"} })
	rep := e.load("r.csv", "id,homepage,links\n"+
		"r1,"+long+",https://a.example/ok\n"+
		"r2,https://b.example/ok,"+long+"\n")
	if rep.Records != 2 || rep.Bad != 0 {
		t.Fatalf("load report %+v", rep)
	}
	var refused []string
	for _, err := range rep.Errors {
		if strings.Contains(err.Error(), "is longer than 2048 bytes; refused") {
			refused = append(refused, err.Error())
		}
	}
	if len(refused) != 2 || !strings.Contains(refused[0], "r.csv:2: ") || !strings.Contains(refused[1], "r.csv:3: ") {
		t.Errorf("refusals reported %q, want one on line 2 and one on line 3", refused)
	}
	s1 := newSup(t, "s1", e.d.Endpoint(), 4, false, e.set.Digest())
	e.run(context.Background())
	if !s1.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	st := crawl(t, e, []*testSup{s1}, map[string]page{"https://a.example/ok": {}, "https://b.example/ok": {}}, 20*time.Second)
	if len(st.requests) != 2 {
		t.Errorf("requested %v, want the two short links", st.requests)
	}
	if n := e.sum.Filtered[FilterURLLength]; n != 2 {
		t.Errorf("summary counts %d url-length links, want 2", n)
	}
}

// TestLoadDuplicateIDs: Load takes the first record of an id and refuses
// a later line with the same id, naming both lines; the store keeps the
// first. Loading the file again reports the same records and adds none.
func TestLoadDuplicateIDs(t *testing.T) {
	tests := []struct {
		file  string
		dups  []string
		first map[string]string // id → name the store keeps
	}{
		{"people.csv", []string{`people.csv:7: duplicate id "r1" (first on line 2)`}, map[string]string{"r1": "Ann Lee"}},
		{"people.jsonl", []string{`people.jsonl:5: duplicate id "j1" (first on line 1)`}, map[string]string{"j1": "Ann Lee"}},
		{"c.jsonl", []string{`c.jsonl:2: duplicate id "2" (first on line 1)`}, map[string]string{"2": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			dir := t.TempDir()
			data, err := os.ReadFile(filepath.Join("testdata", "records", tt.file))
			if tt.file == "c.jsonl" {
				data, err = []byte("{\"id\":\"2\"}\n{\"x\":2}\n"), nil
			}
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, dir, nil)
			rep := e.load(tt.file, string(data))
			var dups []string
			for _, err := range rep.Errors {
				if strings.Contains(err.Error(), "duplicate id") {
					dups = append(dups, strings.TrimPrefix(err.Error(), dir+string(filepath.Separator)))
				}
			}
			if !reflect.DeepEqual(dups, tt.dups) {
				t.Errorf("duplicates reported %q, want %q", dups, tt.dups)
			}
			// The store keeps the first record of the id, and the later
			// line as a malformed one, with its text, for export.
			recs := e.records()
			good, bad := 0, 0
			for _, r := range recs {
				if r.Error == "" {
					good++
					continue
				}
				bad++
				if strings.Contains(r.Error, "duplicate id") && len(r.Raw) == 0 {
					t.Errorf("duplicate line %s kept without its text", r.ID)
				}
			}
			if good != rep.Records || rep.New != rep.Records || bad != rep.Bad {
				t.Errorf("store has %d records and %d malformed; report: %d records, %d new, %d bad", good, bad, rep.Records, rep.New, rep.Bad)
			}
			for id, name := range tt.first {
				if got := recs[id].Fields["name"]; got != name {
					t.Errorf("record %s: name %q, want the first line's %q", id, got, name)
				}
			}
			again := e.load(tt.file, string(data))
			if again.Records != rep.Records || again.New != 0 || again.Bad != rep.Bad {
				t.Errorf("loaded again: %+v, want %d records, none new, %d bad", again, rep.Records, rep.Bad)
			}
			if n := len(e.records()); n != len(recs) {
				t.Errorf("store has %d records after loading again, want %d", n, len(recs))
			}
		})
	}
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
		if r.Format != store.FormatCSV {
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

// TestLoadResumeKeepsMalformedOnce: a Load cut short reads on from the
// place the state last committed, and what it reads again (the records,
// the malformed lines, a duplicate) is not kept twice: the store has each
// line once, under the ids it had, and the report counts the same.
func TestLoadResumeKeepsMalformedOnce(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, dir, nil)
	data := "id,name,links\n" +
		"a,Ann,https://a.example/\n" +
		"b,Bo\n" + // line 3: malformed
		"line 3,Cy,https://c.example/\n" + // takes the id a malformed line has
		"a,Ann again,\n" + // line 5: a duplicate
		"d,\"Dee\n"
	rep := e.load("r.csv", data)
	before := e.records()
	var ids []string
	for _, r := range before {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	if want := []string{"a", "line 3", "line 3 (2)", "line 5", "line 6"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("store ids %q, want %q", ids, want)
	}
	// As if the process had died after the first record was committed:
	// the state's place goes back to line 2 (the file is unchanged).
	ctx := context.Background()
	if _, err := e.d.st.conn.ExecContext(ctx, `UPDATE loads SET offset = ?, line = 2, records = 1, bad = 0, fresh = 1, unfillable = 0, done = 0`,
		len("id,name,links\na,Ann,https://a.example/\n")); err != nil {
		t.Fatal(err)
	}
	again, err := e.d.Load(ctx, filepath.Join(dir, "r.csv"))
	if err != nil {
		t.Fatal(err)
	}
	// New counts from the file's first read: the one record before the
	// place (the rest is in the state already, as a store upsert after a
	// crash would leave it).
	if again.Records != rep.Records || again.Bad != rep.Bad || again.New != 1 {
		t.Errorf("read on: %+v, want %d records, %d bad, 1 new (first: %+v)", again, rep.Records, rep.Bad, rep)
	}
	var line, done int
	if err := e.d.st.conn.QueryRowContext(ctx, `SELECT line, done FROM loads`).Scan(&line, &done); err != nil || done != 1 || line != 0 {
		t.Errorf("loads after reading on: line %d, done %d (%v)", line, done, err)
	}
	after := e.records()
	if len(after) != len(before) {
		t.Errorf("store has %d records after reading on, want %d", len(after), len(before))
	}
	for id, r := range before {
		if a := after[id]; a.Seq != r.Seq && r.Error == "" {
			t.Errorf("record %s moved from %d to %d", id, r.Seq, a.Seq)
		}
	}
}

// TestLoadStrict: with Config.Strict a file with a malformed line or a
// repeated id is refused before anything is loaded, every line named in
// file order; a file without either loads.
func TestLoadStrict(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, dir, func(c *Config) { c.Strict = true })
	bad := "id,name\nx,Ann\ny\nx,Bo\n"
	path := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := e.d.Load(context.Background(), path)
	want := path + ":3: 1 columns, header has 2\n  " + path + `:4: duplicate id "x" (first on line 2)`
	if err == nil || !strings.Contains(err.Error(), "2 malformed line(s); nothing loaded (strict):\n  "+want) {
		t.Errorf("strict load: %v, want both lines named", err)
	}
	if n := len(e.records()); n != 0 {
		t.Errorf("strict refusal left %d records in the store", n)
	}
	if rep := e.load("good.csv", "id,name\nx,Ann\ny,Bo\n"); rep.Records != 2 || rep.Bad != 0 {
		t.Errorf("a good file under strict: %+v", rep)
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
