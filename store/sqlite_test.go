package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/store"
	"backfill/store/storetest"
)

func openSQLite(t *testing.T, uri string) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), uri)
	if err != nil {
		t.Fatalf("open %s: %v", uri, err)
	}
	return s
}

func TestSQLiteConformance(t *testing.T) {
	t.Logf("backend: sqlite")
	storetest.Run(t, func(t *testing.T) store.Store {
		s := openSQLite(t, filepath.Join(t.TempDir(), "store.db"))
		if s.Backend() != "sqlite" {
			t.Fatalf("Backend() = %q, want sqlite", s.Backend())
		}
		return s
	})
}

func TestSQLiteReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "dir", "store.db") // parent made on open
	at := time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)    // nanoseconds survive in SQLite

	s := openSQLite(t, path)
	if err := s.PutRecords(ctx, []store.Record{{ID: "r", Seq: 1, Fields: map[string]string{"a": ""}, Order: []string{"a"}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFields(ctx, "r", []store.Value{{Field: "a", Value: "v", At: at}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutLastCrawl(ctx, "h.example", at); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	s = openSQLite(t, "file:"+path+"?cache=private")
	defer s.Close()
	var got []store.Record
	if err := s.Records(ctx, func(r store.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Found["a"].Value != "v" || !got[0].Found["a"].At.Equal(at) {
		t.Fatalf("after reopen: %+v", got)
	}
	if last, err := s.LastCrawl(ctx, "h.example"); err != nil || !last.Equal(at) {
		t.Fatalf("LastCrawl after reopen = %v, %v", last, err)
	}
}

func TestSQLiteOpenErrors(t *testing.T) {
	dir := t.TempDir()
	newer := filepath.Join(dir, "newer.db")
	db, err := sql.Open("sqlite", newer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	notDB := filepath.Join(dir, "records.csv")
	if err := os.WriteFile(notDB, []byte("id,name,email\n1,Ada,\n2,Grace,\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, uri, want string
	}{
		{"not a database", notDB, "records.csv: file is not a database"},
		{"empty", "", "empty path"},
		{"memory", ":memory:", "in-memory"},
		{"memory uri", "file::memory:", "in-memory"},
		{"memory mode", "file:x.db?mode=memory", "in-memory"},
		{"directory", dir, "is a directory"},
		{"other scheme", "postgres://db.invalid/x", `unsupported store URI scheme "postgres"`},
		{"newer schema", newer, "schema version 99 is newer"},
		{"bad pragma", "file:" + filepath.Join(dir, "p.db") + "?_txlock=sometimes", "_txlock"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := store.Open(context.Background(), tc.uri)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q) succeeded", tc.uri)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open(%q) = %v, want an error mentioning %q", tc.uri, err, tc.want)
			}
		})
	}
}

func TestSQLitePathsNeedingEscape(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a?b.db", "c#d.db", "e%20f.db", "g h.db", "ü.db"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			s := openSQLite(t, path)
			if err := s.PutLastCrawl(context.Background(), "h.example", time.Unix(1, 0)); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("the store is not at the path given: %v", err)
			}
		})
	}
}

func TestSQLiteCorruptColumns(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name, update, want string
	}{
		{"fields", `UPDATE records SET fields = '{"a":' WHERE id = 'r'`, `record "r": column fields`},
		{"order", `UPDATE records SET field_order = '{}' WHERE id = 'r'`, `record "r": column field_order`},
		{"links", `UPDATE records SET links = '[1]' WHERE id = 'r'`, `record "r": column links`},
		{"conflicts", `UPDATE fields SET conflicts = 'nope' WHERE record = 'r'`, `record "r" field "a": column conflicts`},
		{"at", `UPDATE fields SET at = 'yesterday' WHERE record = 'r'`, `record "r" field "a": column at`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "store.db")
			s := openSQLite(t, path)
			defer s.Close()
			if err := s.PutRecords(ctx, []store.Record{{ID: "r", Seq: 1}, {ID: "s", Seq: 2}}); err != nil {
				t.Fatal(err)
			}
			if err := s.SetFields(ctx, "r", []store.Value{{Field: "a", Value: "v"}}); err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(tc.update); err != nil {
				t.Fatal(err)
			}
			err = s.Records(ctx, func(store.Record) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Records over a corrupt %s column = %v, want an error naming %q", tc.name, err, tc.want)
			}
		})
	}
}

func TestSQLiteRejectsOutOfRangeTimes(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "store.db"))
	defer s.Close()
	err := s.PutLastCrawl(context.Background(), "h.example", time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC))
	if err == nil || !strings.Contains(err.Error(), "year outside") {
		t.Fatalf("PutLastCrawl in year 12000 = %v, want a range error", err)
	}
}

// TestSQLiteRecordsStreams checks that a walk is one snapshot: records put
// while it runs do not appear in it, and the walk does not block them.
func TestSQLiteRecordsStreams(t *testing.T) {
	ctx := context.Background()
	s := openSQLite(t, filepath.Join(t.TempDir(), "store.db"))
	defer s.Close()
	if err := s.PutRecords(ctx, []store.Record{{ID: "a", Seq: 1}, {ID: "b", Seq: 2}}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	err := s.Records(ctx, func(r store.Record) error {
		seen = append(seen, r.ID)
		if r.ID == "a" {
			return s.PutRecords(ctx, []store.Record{{ID: "c", Seq: 3}})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(seen, ",") != "a,b" {
		t.Fatalf("walk saw %v, want a,b (a snapshot)", seen)
	}
}

const helperEnv = "BACKFILL_STORE_TEST_HELPER"

// TestSQLiteHelperProcess is not a test: TestSQLiteSeveralProcesses runs the
// test binary again with helperEnv set, and this writes into the shared file
// as one of several processes would.
func TestSQLiteHelperProcess(t *testing.T) {
	spec := proctest.OptIn(t, helperEnv, "the helper process of TestSQLiteSeveralProcesses")
	path, name, _ := strings.Cut(spec, "|")
	if err := writeAsProcess(path, name); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

const perProcess = 40

// writeAsProcess opens the store at path and writes perProcess fields and
// last-crawl times tagged with name, plus records of its own.
func writeAsProcess(path, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := store.Open(ctx, path)
	if err != nil {
		return err
	}
	defer s.Close()
	recs := make([]store.Record, perProcess)
	for i := range recs {
		recs[i] = store.Record{ID: fmt.Sprintf("%s-%d", name, i), Seq: int64(i)}
	}
	if err := s.PutRecords(ctx, recs); err != nil {
		return err
	}
	for i := range perProcess {
		v := store.Value{Field: name + "-" + strconv.Itoa(i), Value: name}
		if err := s.SetFields(ctx, "shared", []store.Value{v}); err != nil {
			return err
		}
		if err := s.PutLastCrawl(ctx, "shared.example", time.Unix(int64(i), 0)); err != nil {
			return err
		}
	}
	return s.Close()
}

// TestSQLiteSeveralProcesses has separate OS processes (this test binary,
// run again) write to one file at once, as a dispatcher and supervisors on
// one machine do, and checks that every write landed.
func TestSQLiteSeveralProcesses(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		proctest.NotApplicable(t, "inside a helper process")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	s := openSQLite(t, path)
	defer s.Close()
	if err := s.PutRecords(ctx, []store.Record{{ID: "shared", Seq: -1}}); err != nil {
		t.Fatal(err)
	}

	names := []string{"p1", "p2", "p3"}
	var wg sync.WaitGroup
	errs := make(chan error, len(names)+1)
	for _, name := range names {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+path+"|"+name)
		wg.Go(func() {
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("process %s: %v\n%s", name, err, out)
			}
		})
	}
	wg.Go(func() {
		if err := writeAsProcess(path, "parent"); err != nil {
			errs <- fmt.Errorf("parent: %w", err)
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	byID := map[string]store.Record{}
	if err := s.Records(ctx, func(r store.Record) error { byID[r.ID] = r; return nil }); err != nil {
		t.Fatal(err)
	}
	writers := append(names, "parent")
	if want := 1 + len(writers)*perProcess; len(byID) != want {
		t.Errorf("%d records, want %d", len(byID), want)
	}
	if got, want := len(byID["shared"].Found), len(writers)*perProcess; got != want {
		t.Errorf("shared record has %d fields, want %d", got, want)
	}
	last, err := s.LastCrawl(ctx, "shared.example")
	if err != nil || !last.Equal(time.Unix(perProcess-1, 0)) {
		t.Errorf("LastCrawl = %v, %v; want %v", last, err, time.Unix(perProcess-1, 0))
	}
}

func TestSQLiteContextCancelledWhileWaiting(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "store.db"))
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.PutLastCrawl(ctx, "h.example", time.Unix(1, 0))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("PutLastCrawl with a cancelled context = %v, want context.Canceled", err)
	}
}

func BenchmarkSQLitePutRecords(b *testing.B) {
	const n = 100_000
	recs := make([]store.Record, n)
	for i := range recs {
		recs[i] = store.Record{
			ID:     strconv.Itoa(i),
			Seq:    int64(i),
			Fields: map[string]string{"id": strconv.Itoa(i), "name": "Name " + strconv.Itoa(i), "email": ""},
			Order:  []string{"id", "name", "email"},
			Links:  []string{"https://h" + strconv.Itoa(i%500) + ".example/p/" + strconv.Itoa(i)},
		}
	}
	for b.Loop() {
		b.StopTimer()
		s, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "store.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := s.PutRecords(context.Background(), recs); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

func BenchmarkSQLiteSetFields(b *testing.B) {
	ctx := context.Background()
	s, err := store.Open(ctx, filepath.Join(b.TempDir(), "store.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 1000
	recs := make([]store.Record, n)
	for i := range recs {
		recs[i] = store.Record{ID: strconv.Itoa(i), Seq: int64(i)}
	}
	if err := s.PutRecords(ctx, recs); err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			v := store.Value{Field: "f" + strconv.Itoa(i%7), Value: "v", Source: "https://s.example/", At: time.Now()}
			if err := s.SetFields(ctx, strconv.Itoa(i%n), []store.Value{v}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestSQLiteConcurrentFirstOpen has several stores create one new file at
// the same moment, as processes started together do.
func TestSQLiteConcurrentFirstOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	const n = 6
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			s, err := store.Open(context.Background(), path)
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			if err := s.PutLastCrawl(context.Background(), fmt.Sprintf("h%d.example", i), time.Unix(int64(i), 0)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s := openSQLite(t, path)
	defer s.Close()
	for i := range n {
		if _, err := s.LastCrawl(context.Background(), fmt.Sprintf("h%d.example", i)); err != nil {
			t.Error(err)
		}
	}
}

// TestSQLitePutLastCrawls checks the batched write: each host keeps the
// later of its stored and given times, and an invalid entry writes nothing.
func TestSQLitePutLastCrawls(t *testing.T) {
	ctx := context.Background()
	s := openSQLite(t, filepath.Join(t.TempDir(), "store.db"))
	defer s.Close()
	b, ok := s.(interface {
		PutLastCrawls(context.Context, map[string]time.Time) error
	})
	if !ok {
		t.Fatal("the SQLite store has no PutLastCrawls")
	}
	t0 := time.Date(2025, 3, 4, 5, 6, 7, 8, time.UTC)
	if err := s.PutLastCrawl(ctx, "old.example", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		batch   map[string]time.Time
		wantErr string
		want    map[string]time.Time // after the step; a zero time means absent
	}{
		{"empty batch", map[string]time.Time{}, "", map[string]time.Time{"old.example": t0.Add(time.Hour), "a.example": {}}},
		{"new and older", map[string]time.Time{"a.example": t0, "old.example": t0},
			"", map[string]time.Time{"a.example": t0, "old.example": t0.Add(time.Hour)}},
		{"later wins", map[string]time.Time{"a.example": t0.Add(time.Minute), "old.example": t0.Add(2 * time.Hour)},
			"", map[string]time.Time{"a.example": t0.Add(time.Minute), "old.example": t0.Add(2 * time.Hour)}},
		{"empty host refused", map[string]time.Time{"": t0, "b.example": t0}, "empty host",
			map[string]time.Time{"b.example": {}}},
		{"bad time refused", map[string]time.Time{"b.example": time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC), "c.example": t0},
			"year outside", map[string]time.Time{"b.example": {}, "c.example": {}}},
	}
	for _, st := range steps {
		err := b.PutLastCrawls(ctx, st.batch)
		if st.wantErr == "" && err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if st.wantErr != "" && (err == nil || !strings.Contains(err.Error(), st.wantErr)) {
			t.Fatalf("%s: error %v, want one saying %q", st.name, err, st.wantErr)
		}
		storetest.CheckLastCrawls(ctx, t, s, st.name, st.want)
	}
}

// TestSQLiteSetFieldsBatch: one batch writes the values of every record
// the store has, names those it does not, and reads back as SetFields
// would have written them; a bad value fails the batch and writes nothing.
func TestSQLiteSetFieldsBatch(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutRecords(ctx, []store.Record{{ID: "a", Seq: 1}, {ID: "b", Seq: 2}}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	fb := st.(store.FieldBatcher)
	missing, err := fb.SetFieldsBatch(ctx, []store.RecordValues{
		{ID: "a", Values: []store.Value{{Field: "email", Value: "a@x.example", Source: "https://x.example/a", At: at}}},
		{ID: "ghost", Values: []store.Value{{Field: "email", Value: "g@x.example", At: at}}},
		{ID: "b", Values: []store.Value{{Field: "email", Value: "b@x.example", At: at}, {Field: "title", Value: "Chief", At: at,
			Conflicts: []store.Conflict{{Value: "Boss", Source: "https://y.example/b", Depth: 1}}}}},
	})
	if err != nil || len(missing) != 1 || missing[0] != "ghost" {
		t.Fatalf("batch: missing %v, err %v; want [ghost], nil", missing, err)
	}
	got := map[string]map[string]store.Value{}
	if err := st.Records(ctx, func(r store.Record) error { got[r.ID] = r.Found; return nil }); err != nil {
		t.Fatal(err)
	}
	if v := got["a"]["email"]; v.Value != "a@x.example" || v.Source != "https://x.example/a" || !v.At.Equal(at) {
		t.Errorf("a.email = %+v", v)
	}
	if v := got["b"]["title"]; v.Value != "Chief" || len(v.Conflicts) != 1 || v.Conflicts[0].Value != "Boss" {
		t.Errorf("b.title = %+v", v)
	}
	if _, err := fb.SetFieldsBatch(ctx, []store.RecordValues{
		{ID: "a", Values: []store.Value{{Field: "phone", Value: "1", At: at}}},
		{ID: "b", Values: []store.Value{{Field: "", Value: "x", At: at}}},
	}); err == nil {
		t.Fatal("a batch with an empty field name was taken")
	}
	got = map[string]map[string]store.Value{}
	st.Records(ctx, func(r store.Record) error { got[r.ID] = r.Found; return nil })
	if _, ok := got["a"]["phone"]; ok {
		t.Error("a failed batch wrote part of itself")
	}
}
