package learn

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backfill/store"
	"backfill/testweb"
)

// openTestPages opens a page file in a fresh directory, and the same
// file as a database for a test to damage.
func openTestPages(t *testing.T) (*store.PageFile, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), PageCacheFile)
	f, err := store.OpenPageFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return f, db
}

// TestKeptSource: a page fetched once is read from the kept pages the
// next time (the web sees no request), unless it is older than MaxAge; a
// page kept damaged is fetched again; a page the crawl kept rendered is
// fetched rather than learned from.
func TestKeptSource(t *testing.T) {
	web, polite := startPolite(t, testweb.Options{})
	pages, db := openTestPages(t)
	ctx := context.Background()
	asked := func() int {
		n := 0
		for _, r := range web.Log() {
			if r.Path != "/robots.txt" {
				n++
			}
		}
		return n
	}
	const u = "http://people.example/p/alice"
	steps := []struct {
		name   string
		maxAge time.Duration
		damage string
		want   KeptCounts // after the step
		asked  int        // pages the web has been asked for after the step
	}{
		{"first: fetched and kept", 0, "", KeptCounts{Fetched: 1}, 1},
		{"again: read from the kept pages", 0, "", KeptCounts{Kept: 1}, 1},
		{"again, within the recrawl age", time.Hour, "", KeptCounts{Kept: 1}, 1},
		{"older than the recrawl age: fetched again", time.Nanosecond, "", KeptCounts{Fetched: 1}, 2},
		{"kept damaged: fetched again", 0, `UPDATE pages SET body = x'00'`, KeptCounts{Fetched: 1, Unkept: 1}, 3},
		{"kept again after the damage", 0, "", KeptCounts{Kept: 1}, 3},
		{"kept rendered by a crawl: fetched", 0, `UPDATE pages SET rendered = 1`, KeptCounts{Fetched: 1}, 4},
		{"kept as fetched again", 0, "", KeptCounts{Kept: 1}, 4},
	}
	for _, st := range steps {
		if st.damage != "" {
			if _, err := db.Exec(st.damage); err != nil {
				t.Fatal(err)
			}
		}
		src := &KeptSource{Pages: pages, Source: polite, MaxAge: st.maxAge}
		p, err := src.Fetch(ctx, u)
		if err != nil || !strings.Contains(string(p.Body), "Alice Moreau") {
			t.Fatalf("%s: %v", st.name, err)
		}
		got := src.Counts()
		if (got.Err != nil) != (st.want.Unkept > 0) {
			t.Errorf("%s: error %v with %d unkept", st.name, got.Err, got.Unkept)
		}
		got.Err = nil
		if got != st.want || asked() != st.asked {
			t.Errorf("%s: counts %+v, web asked for %d pages; want %+v, %d", st.name, got, asked(), st.want, st.asked)
		}
	}
	src := &KeptSource{Pages: pages, Source: polite}
	if _, err := src.Fetch(ctx, "http://people.example/p/nobody"); err == nil || src.Counts().Failed != 1 {
		t.Errorf("a page that is not there: %v, counts %+v", err, src.Counts())
	}
	if _, err := pages.Page(ctx, "http://people.example/p/nobody"); err == nil {
		t.Error("a failed fetch is kept")
	}
}

// TestKeptSourceBound: with MaxBytes, the kept pages are held under it
// after every page kept, the oldest going first.
func TestKeptSourceBound(t *testing.T) {
	web, polite := startPolite(t, testweb.Options{})
	pages, _ := openTestPages(t)
	ctx := context.Background()
	src := &KeptSource{Pages: pages, Source: polite, MaxBytes: 1}
	for _, u := range []string{"http://people.example/p/alice", "http://people.example/p/bob"} {
		if _, err := src.Fetch(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := pages.PageStats(ctx); err != nil || st.Pages != 0 {
		t.Errorf("kept %+v (%v) under a 1-byte bound", st, err)
	}
	if n := len(web.Log()); n == 0 {
		t.Error("nothing fetched")
	}
}
