package dispatcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"backfill/etl"
	"backfill/records"
	"backfill/store"
)

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
			data, err := os.ReadFile(filepath.Join("..", "records", "testdata", "records", tt.file))
			if tt.file == "c.jsonl" {
				// The same id as a string and as a number.
				data, err = []byte("{\"id\":\"2\"}\n{\"id\":2}\n"), nil
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

// TestLoadIDs: a file without the id column is refused, naming it,
// unless Config.ID says where ids are (another column, or the records'
// lines); a record with an empty id is a malformed line.
func TestLoadIDs(t *testing.T) {
	const noID = "name,email,site\nAnn Lee,,http://a.test/ann\n,,\nBob Roe,,http://b.test/bob\n"
	cases := []struct {
		name    string
		id      records.ID
		data    string
		ids     []string
		bad     int
		wantErr string
	}{
		{"no id column", "", noID, nil, 0, `no id column: the header has no column "id"`},
		{"an ID column", "", "ID,name,site\n1,Ann,http://a.test/ann\n", nil, 0, `(it has "ID": the name must match exactly, --id ID)`},
		{"--id ID", "ID", "ID,name,site\n1,Ann,http://a.test/ann\n", []string{"1"}, 0, ""},
		{"--id line", records.IDLine, noID, []string{"2", "3", "4"}, 0, ""},
		{"an empty id", "", "id,name,site\nr1,Ann,http://a.test/ann\n,Bob,http://b.test/bob\n", []string{"r1"}, 1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			e := newEnv(t, dir, func(cfg *Config) { cfg.ID = c.id })
			path := filepath.Join(dir, "r.csv")
			if err := os.WriteFile(path, []byte(c.data), 0o644); err != nil {
				t.Fatal(err)
			}
			rep, err := e.d.Load(context.Background(), path)
			if c.wantErr != "" {
				if err == nil || !errors.Is(err, records.ErrNoID) || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "r.csv:1") {
					t.Fatalf("Load = %+v, %v; want an error saying %q", rep, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for id, r := range e.records() {
				if r.Error == "" {
					ids = append(ids, id)
				}
			}
			sort.Strings(ids)
			if fmt.Sprint(ids) != fmt.Sprint(c.ids) || rep.Bad != c.bad {
				t.Errorf("ids %v, %d bad; want %v, %d (%v)", ids, rep.Bad, c.ids, c.bad, rep.Errors)
			}
		})
	}
}

// TestLoadLongRowKept: a row of 10 MB, over what the crawl reads, is a
// malformed line that export gives back with its text, in the drop-in
// CSV and JSON Lines exports; the rows beside it are loaded as ever.
func TestLoadLongRowKept(t *testing.T) {
	long := "big," + strings.Repeat("lorem ipsum ", 10<<20/12) + ",http://a.test/big"
	for _, format := range []string{"csv", "jsonl"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			e := newEnv(t, dir, nil)
			rep := e.load("r.csv", "id,text,site\nr1,short,http://a.test/r1\n"+long+"\nr2,short,http://a.test/r2\n")
			if rep.Records != 2 || rep.Bad != 1 || len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0].Error(), "r.csv:3: record of ") {
				t.Fatalf("load: %d records, %d bad: %v", rep.Records, rep.Bad, rep.Errors)
			}
			var out bytes.Buffer
			if err := store.Export(context.Background(), e.st, &out, store.ExportOptions{Format: format}); err != nil {
				t.Fatal(err)
			}
			text := out.String()
			if format == "jsonl" {
				b, _ := json.Marshal(long)
				if !strings.Contains(text, string(b)) {
					t.Errorf("the JSON Lines export (%d bytes) lacks the long row's text", len(text))
				}
				return
			}
			if !strings.Contains(text, long) || !strings.Contains(text, "r1,short,http://a.test/r1") {
				t.Errorf("the CSV export (%d bytes) lacks the long row's text", len(text))
			}
		})
	}
}
