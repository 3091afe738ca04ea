package store_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backfill/store"
	"backfill/store/storetest"
)

func TestPageFileConformance(t *testing.T) {
	storetest.RunPages(t, func(t *testing.T) interface {
		store.Pages
		Close() error
	} {
		f, err := store.OpenPageFile(context.Background(), filepath.Join(t.TempDir(), "pages.db"))
		if err != nil {
			t.Fatal(err)
		}
		return f
	})
}

// TestPageDamaged: a page whose kept body does not unpack to its size is
// an error naming the page, which store.IsDamaged tells apart; ListPages
// lists it with Damaged set.
func TestPageDamaged(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "pages.db")
	f, err := store.OpenPageFile(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const key = "http://a.example/p/1"
	if _, err := f.PutPages(ctx, []store.Page{{Key: key, Status: 200, ContentType: "text/html", Body: []byte("<p>x</p>"), FetchedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, damage := range []string{`UPDATE pages SET body = x'00010203'`, `UPDATE pages SET raw_size = raw_size - 1`} {
		if _, err := db.Exec(damage); err != nil {
			t.Fatal(err)
		}
		_, err := f.Page(ctx, key)
		if err == nil || !store.IsDamaged(err) || errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), key) {
			t.Errorf("after %s: %v, want the page named damaged", damage, err)
		}
		// A walk over the pages goes on past it, saying so.
		list, err := f.ListPages(ctx, "", 10)
		if err != nil || len(list) != 1 || list[0].Key != key || list[0].Body != nil || !strings.Contains(list[0].Damaged, "damaged") {
			t.Errorf("after %s: ListPages = %+v, %v", damage, list, err)
		}
	}
}

// TestPageFileReadsLearnedPages: a file of teacher pages written before
// the crawl kept pages (the table's first version) is read on.
func TestPageFileReadsLearnedPages(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "learn-pages.db")
	// The first version, as learning wrote it.
	db, err := store.OpenSQLiteFile(ctx, path, [][]string{{`CREATE TABLE pages (
		key TEXT PRIMARY KEY, host TEXT NOT NULL, url TEXT NOT NULL, content_type TEXT NOT NULL,
		body BLOB NOT NULL, size INTEGER NOT NULL, raw_size INTEGER NOT NULL, fetched_at INTEGER NOT NULL)`,
		`CREATE INDEX pages_by_host ON pages (host, fetched_at)`,
		`CREATE INDEX pages_by_age ON pages (fetched_at)`}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte("<p>hi</p>"))
	zw.Close()
	gz := buf.Bytes()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := db.Exec(`INSERT INTO pages VALUES ('http://a.example/p', 'a.example', 'http://a.example/p/', 'text/html', ?, ?, 9, ?)`,
		gz, len(gz), at.UnixNano()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	f, err := store.OpenPageFile(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := f.Page(ctx, "http://a.example/p")
	if err != nil || string(p.Body) != "<p>hi</p>" || p.URL != "http://a.example/p/" || !p.FetchedAt.Equal(at) || p.Rendered {
		t.Errorf("Page = %+v, %v", p, err)
	}
}
