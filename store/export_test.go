package store_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backfill/store"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var exportAt = time.Date(2025, 6, 1, 12, 30, 0, 250_000_000, time.UTC)

// exportFixture fills a fresh SQLite store with a small run's outcome: CSV
// records (one found value with conflicts, one with nothing found, one with
// awkward text), and a JSON Lines record with its own keys.
func exportFixture(t *testing.T) store.Store {
	t.Helper()
	ctx := context.Background()
	s := openSQLite(t, filepath.Join(t.TempDir(), "store.db"))
	t.Cleanup(func() { s.Close() })
	csvCols := []string{"id", "name", "email", "phone", "site"}
	recs := []store.Record{
		{
			ID: "3", Seq: 3, Order: csvCols,
			Fields: map[string]string{"id": "3", "name": "Zoë \"Z\" Line\nBreak", "email": "", "phone": "", "site": ""},
		},
		{
			ID: "1", Seq: 1, Order: csvCols,
			Fields: map[string]string{"id": "1", "name": "Ada", "email": "", "phone": "", "site": "https://one.example/"},
			Links:  []string{"https://one.example/"},
		},
		{
			ID: "2", Seq: 2, Order: csvCols,
			Fields: map[string]string{"id": "2", "name": "Grace, Admiral", "email": "grace@input.example", "phone": "", "site": "https://two.example/"},
			Links:  []string{"https://two.example/"},
		},
		{
			ID: "line-4", Seq: 4, Order: []string{"name", "homepage"},
			Fields: map[string]string{"name": "Edsger", "homepage": "https://four.example/~e"},
			Links:  []string{"https://four.example/~e"},
		},
	}
	if err := s.PutRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	sets := map[string][]store.Value{
		"1": {{
			Field: "email", Value: "ada@one.example", Source: "https://one.example/about", Mapping: "people",
			Depth: 1, At: exportAt,
			Conflicts: []store.Conflict{{Value: "decoy@one.example", Source: "https://one.example/team/decoy", Depth: 2}},
		}},
		"3": {
			{Field: "phone", Value: "+44 20 7946 0000", Source: "https://three.example/p?id=3&x=<y>", Mapping: "directory", At: exportAt},
			{Field: "title", Value: "Dr., \"PhD\"", Source: "https://three.example/p?id=3&x=<y>", Mapping: "directory", At: exportAt},
		},
		"line-4": {{Field: "email", Value: "e@four.example", Source: "https://four.example/~e", Mapping: "people", At: exportAt}},
	}
	for id, vals := range sets {
		if err := s.SetFields(ctx, id, vals); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestExportGolden(t *testing.T) {
	s := exportFixture(t)
	extra := []string{"email", "twitter"}
	tests := []struct {
		golden string
		opts   store.ExportOptions
	}{
		{"export.jsonl", store.ExportOptions{Format: "jsonl", Fields: extra}},
		{"export_wrap.jsonl", store.ExportOptions{Format: "jsonl", Fields: extra, Wrap: true}},
		{"export_provenance.jsonl", store.ExportOptions{Format: "jsonl", Fields: extra, Provenance: true}},
		{"export_default.jsonl", store.ExportOptions{}},
		{"export.csv", store.ExportOptions{Format: "csv", Fields: extra}},
		{"export_provenance.csv", store.ExportOptions{Format: "csv", Fields: extra, Provenance: true}},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			var out bytes.Buffer
			if err := store.Export(context.Background(), s, &out, tc.opts); err != nil {
				t.Fatal(err)
			}
			checkParses(t, tc.opts, out.Bytes())
			checkGolden(t, tc.golden, out.Bytes())
		})
	}
}

// checkParses reads the output back with a standard reader: one JSON object
// per record (with its id and fields when wrapped), or a header and one
// equally wide row per record.
func checkParses(t *testing.T, opts store.ExportOptions, out []byte) {
	t.Helper()
	const records = 4
	if opts.Format == "csv" {
		rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
		if err != nil {
			t.Fatalf("output is not CSV: %v", err)
		}
		if len(rows) != records+1 {
			t.Fatalf("CSV has %d rows, want a header and %d records", len(rows), records)
		}
		return
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != records {
		t.Fatalf("JSON Lines has %d lines, want %d", len(lines), records)
	}
	for i, line := range lines {
		var v struct {
			ID     string             `json:"id"`
			Fields map[string]*string `json:"fields"`
		}
		if !opts.Wrap && !opts.Provenance {
			var fields map[string]*string
			if err := json.Unmarshal([]byte(line), &fields); err != nil {
				t.Fatalf("line %d is not a JSON object of strings: %v", i+1, err)
			}
			if _, wrapped := fields["fields"]; wrapped || len(fields) == 0 {
				t.Fatalf("line %d is not the record's own object: %s", i+1, line)
			}
			continue
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %d is not JSON: %v", i+1, err)
		}
		if v.ID == "" || v.Fields == nil {
			t.Fatalf("line %d lacks id or fields: %s", i+1, line)
		}
	}
}

func TestExportEmptyStore(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "store.db"))
	defer s.Close()
	tests := []struct {
		opts store.ExportOptions
		want string
	}{
		{store.ExportOptions{Format: "jsonl"}, ""},
		{store.ExportOptions{Format: "csv"}, ""},
		{store.ExportOptions{Format: "csv", Fields: []string{"a", "b"}}, "a,b\n"},
	}
	for _, tc := range tests {
		var out bytes.Buffer
		if err := store.Export(context.Background(), s, &out, tc.opts); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want {
			t.Errorf("Export(%+v) of an empty store = %q, want %q", tc.opts, out.String(), tc.want)
		}
	}
}

func TestExportErrors(t *testing.T) {
	s := exportFixture(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		w    *failingWriter
		opts store.ExportOptions
		want string
	}{
		{"unknown format", context.Background(), nil, store.ExportOptions{Format: "xml"}, `unknown format "xml"`},
		{"jsonl write fails", context.Background(), &failingWriter{}, store.ExportOptions{Format: "jsonl"}, "disk full"},
		{"csv write fails", context.Background(), &failingWriter{}, store.ExportOptions{Format: "csv"}, "disk full"},
		{"cancelled jsonl", cancelled, nil, store.ExportOptions{Format: "jsonl"}, "context canceled"},
		{"cancelled csv", cancelled, nil, store.ExportOptions{Format: "csv"}, "context canceled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w interface{ Write([]byte) (int, error) } = &bytes.Buffer{}
			if tc.w != nil {
				w = tc.w
			}
			err := store.Export(tc.ctx, s, w, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Export = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

// TestExportCSVStoreChangedBetweenPasses grows the store between the two
// passes of a CSV export and checks that it fails loudly instead of dropping
// the new field.
func TestExportCSVStoreChangedBetweenPasses(t *testing.T) {
	s := exportFixture(t)
	r := &secondPass{Store: s, before: func() error {
		return s.SetFields(context.Background(), "2", []store.Value{{Field: "late", Value: "x", At: exportAt}})
	}}
	err := store.Export(context.Background(), r, &bytes.Buffer{}, store.ExportOptions{Format: "csv"})
	if err == nil || !strings.Contains(err.Error(), `record "2": found field "late" appeared after the header`) {
		t.Fatalf("Export = %v, want an error naming the record and field", err)
	}
}

// secondPass runs before ahead of the second walk over a real store.
type secondPass struct {
	store.Store
	before func() error
	walks  int
}

func (p *secondPass) Records(ctx context.Context, fn func(store.Record) error) error {
	p.walks++
	if p.walks == 2 {
		if err := p.before(); err != nil {
			return err
		}
	}
	return p.Store.Records(ctx, fn)
}

var errDiskFull = errors.New("disk full")

type failingWriter struct{}

func (*failingWriter) Write([]byte) (int, error) { return 0, errDiskFull }

// rawFixture is a store as a run leaves it now: records with their input
// text (CSV and JSON Lines), typed found values, malformed lines in their
// places, and an outcome.
func rawFixture(t *testing.T) store.Store {
	t.Helper()
	ctx := context.Background()
	s := openSQLite(t, filepath.Join(t.TempDir(), "store.db"))
	t.Cleanup(func() { s.Close() })
	cols := []string{"id", "name", "age", "email"}
	recs := []store.Record{
		{ID: "c1", Seq: 1, Format: store.FormatCSV, Order: cols, Raw: []byte("c1,  Ada  ,\"0042\",\"\""),
			Fields: map[string]string{"id": "c1", "name": "Ada", "age": "0042", "email": ""}},
		{ID: "line 3", Seq: 2, Format: store.FormatCSV, Raw: []byte("c2,Bob,\"x"), Error: "in.csv:3: column 9: extraneous or missing \" in quoted-field"},
		{ID: "c3", Seq: 3, Format: store.FormatCSV, Order: cols, Raw: []byte("c3,\"Cy\nJr\",7,"),
			Fields: map[string]string{"id": "c3", "name": "Cy\nJr", "age": "7", "email": ""}},
		{ID: "j1", Seq: 4, Format: store.FormatJSONL, Order: []string{"id", "big", "f", "tags", "o", "email"},
			Raw:    []byte(`{"id": 1, "big": 12345678901234567890, "f": 1e3, "tags": ["a", null], "o": {"k": [true]}, "email": null}`),
			Fields: map[string]string{"id": "1", "big": "12345678901234567890", "f": "1e3", "tags": `["a",null]`, "o": `{"k":[true]}`, "email": ""}},
		{ID: "line 6", Seq: 5, Format: store.FormatJSONL, Raw: []byte("{\"id\": \"caf\xe9\"}"), Error: "in.jsonl:6: not valid UTF-8"},
		{ID: "line 7", Seq: 6, Format: store.FormatJSONL, Error: "in.jsonl:7: record longer than 4194304 bytes"},
	}
	if err := s.PutRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	sets := map[string][]store.Value{
		"c1": {{Field: "email", Value: "ada@a.example", Source: "https://a.example/", Mapping: "people", Type: "email", At: exportAt},
			{Field: "score", Value: "3.50", Source: "https://a.example/", Mapping: "people", Type: "number", At: exportAt}},
		"j1": {{Field: "email", Value: "j@j.example", Source: "https://j.example/", Mapping: "people", Type: "email", At: exportAt},
			{Field: "langs", Value: "Go; C", Source: "https://j.example/", Mapping: "people", Type: "list", At: exportAt},
			{Field: "rank", Value: "007", Source: "https://j.example/", Mapping: "people", Type: "number", At: exportAt}},
	}
	for id, vals := range sets {
		if err := s.SetFields(ctx, id, vals); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetOutcomes(ctx, []store.Outcome{{Record: "c3", Reason: "match-key-refused", Detail: "https://x.example/: its name is \"Cy\", the record's \"Cy Jr\"",
		Pages: 1, Page: "https://x.example/", Key: "name"}}); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestExportRawGolden pins what export writes of records kept with their
// input text: the user's values as given, typed filled values, malformed
// lines marked in their places, outcomes with provenance.
func TestExportRawGolden(t *testing.T) {
	s := rawFixture(t)
	for _, tc := range []struct {
		golden string
		opts   store.ExportOptions
	}{
		{"export_raw.jsonl", store.ExportOptions{Format: "jsonl", Fields: []string{"twitter"}}},
		{"export_raw_wrap.jsonl", store.ExportOptions{Format: "jsonl", Fields: []string{"twitter"}, Wrap: true}},
		{"export_raw_provenance.jsonl", store.ExportOptions{Format: "jsonl", Provenance: true}},
		{"export_raw.csv", store.ExportOptions{Format: "csv"}},
		{"export_raw_provenance.csv", store.ExportOptions{Format: "csv", Provenance: true}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			var out bytes.Buffer
			if err := store.Export(context.Background(), s, &out, tc.opts); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tc.golden, out.Bytes())
			if tc.opts.Format == "jsonl" {
				for i, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
					if !json.Valid([]byte(line)) {
						t.Errorf("line %d is not JSON: %s", i+1, line)
					}
				}
				return
			}
			rows, err := csv.NewReader(bytes.NewReader(out.Bytes())).ReadAll()
			if err != nil || len(rows) != 7 {
				t.Errorf("CSV: %d rows, %v", len(rows), err)
			}
		})
	}
}

// checkGolden compares an export with testdata/golden (rewritten with
// -update).
func checkGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", golden)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("export differs from %s (run with -update to accept):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestExportTLSError: a value whose page was fetched despite a bad
// certificate (--insecure-tls) says so in its provenance, as the
// tls_error of a JSON line's provenance and in a FIELD.tls_error CSV
// column, which an export without such a value does not have.
func TestExportTLSError(t *testing.T) {
	ctx := context.Background()
	s := openSQLite(t, filepath.Join(t.TempDir(), "store.db"))
	defer s.Close()
	recs := []store.Record{
		{ID: "1", Seq: 1, Order: []string{"id", "email"}, Fields: map[string]string{"id": "1", "email": ""}},
		{ID: "2", Seq: 2, Order: []string{"id", "email"}, Fields: map[string]string{"id": "2", "email": ""}},
	}
	if err := s.PutRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	const problem = "x509: certificate signed by unknown authority"
	if err := s.SetFields(ctx, "1", []store.Value{{Field: "email", Value: "a@bad.example", Source: "https://bad.example/", Mapping: "m", At: exportAt, TLSError: problem}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFields(ctx, "2", []store.Value{{Field: "email", Value: "b@good.example", Source: "https://good.example/", Mapping: "m", At: exportAt}}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Record(ctx, "1"); err != nil || r.Found["email"].TLSError != problem {
		t.Fatalf("the value's TLS error did not come back: %+v, %v", r.Found, err)
	}
	var j bytes.Buffer
	if err := store.Export(ctx, s, &j, store.ExportOptions{Format: "jsonl", Provenance: true}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(j.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"tls_error":"`+problem+`"`) || strings.Contains(lines[1], "tls_error") {
		t.Errorf("JSON Lines provenance:\n%s", j.String())
	}
	var c bytes.Buffer
	if err := store.Export(ctx, s, &c, store.ExportOptions{Format: "csv", Provenance: true}); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&c).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := -1
	for i, h := range rows[0] {
		if h == "email.tls_error" {
			col = i
		}
	}
	if col < 0 || rows[1][col] != problem || rows[2][col] != "" {
		t.Errorf("CSV provenance: %q", rows)
	}
}

// TestExportMember: one member's answers: only the values it gave (by
// name or key), only in the records holding one.
func TestExportMember(t *testing.T) {
	ctx := context.Background()
	s := exportFixture(t)
	v := store.Value{Field: "phone", Value: "555 0100", Source: "https://one.example/contact", Mapping: "people", At: exportAt,
		Member: "crawler-2", MemberKey: "KEY-2"}
	if err := s.SetFields(ctx, "1", []store.Value{v}); err != nil {
		t.Fatal(err)
	}
	for _, member := range []string{"crawler-2", "KEY-2"} {
		var out bytes.Buffer
		if err := store.Export(ctx, s, &out, store.ExportOptions{Format: "jsonl", Provenance: true, Member: member}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], `"phone":"555 0100"`) || strings.Contains(lines[0], "ada@one.example") ||
			!strings.Contains(lines[0], `"member":"crawler-2","member_key":"KEY-2"`) {
			t.Errorf("--member %s: %s, want record 1 with its phone alone, from crawler-2", member, out.String())
		}
	}
}
