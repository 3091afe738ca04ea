package learn

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"backfill/fetch"
	"backfill/store"
)

// PageCacheFile is the name, inside a state directory, of the file the
// teacher pages learning fetched are kept in (PageCache).
const PageCacheFile = "learn-pages.db"

// The bounds of a PageCache: what is over them goes, oldest fetch first.
// The host bound leaves room for several learnings' worth of teachers of
// a host (each reads at most Options.PagesPerHost); the byte bound counts
// the bodies as kept, compressed.
const (
	PageCacheHostPages = 10 * DefaultPagesPerHost
	PageCacheBytes     = 256 << 20
)

// pageCacheSchema lists the migrations of PageCacheFile (store.OpenSQLiteFile:
// entry i moves a file from user_version i to i+1; append only). A page
// is kept under the URL learning asked for; url is where it ended after
// redirects. body is gzip; size is its length (what PageCacheBytes
// counts), raw_size the length unpacked (a check on reading).
var pageCacheSchema = [][]string{{
	`CREATE TABLE pages (
		key          TEXT PRIMARY KEY,
		host         TEXT NOT NULL,
		url          TEXT NOT NULL,
		content_type TEXT NOT NULL,
		body         BLOB NOT NULL,
		size         INTEGER NOT NULL,
		raw_size     INTEGER NOT NULL,
		fetched_at   INTEGER NOT NULL -- Unix nanoseconds
	)`,
	`CREATE INDEX pages_by_host ON pages (host, fetched_at)`,
	`CREATE INDEX pages_by_age ON pages (fetched_at)`,
}}

// PageCache keeps teacher pages in a SQLite file of their own, so that a
// later learning (other fields, other folds, more teachers) reads them
// instead of asking their hosts again. Bodies are kept gzip-compressed,
// with the time they were fetched, at most hostPages of one host and
// maxBytes in all (PageCacheHostPages, PageCacheBytes). It is the file's
// only writer in a process; several processes may share the file (WAL,
// busy timeout). Safe for concurrent use.
type PageCache struct {
	db        *sql.DB
	path      string
	hostPages int
	maxBytes  int64
}

// OpenPageCache opens (creating it) the page cache at path, with the
// default bounds.
func OpenPageCache(ctx context.Context, path string) (*PageCache, error) {
	db, err := store.OpenSQLiteFile(ctx, path, pageCacheSchema)
	if err != nil {
		return nil, fmt.Errorf("learn: page cache: %w", err)
	}
	return &PageCache{db: db, path: path, hostPages: PageCacheHostPages, maxBytes: PageCacheBytes}, nil
}

// Close closes the file.
func (c *PageCache) Close() error { return c.db.Close() }

// Path is the file's path.
func (c *PageCache) Path() string { return c.path }

// errNotKept says the cache has no page for a URL, or only one too old.
var errNotKept = errors.New("not kept")

// Get returns the page kept for rawURL and when it was fetched, if it was
// fetched at or after notBefore; errNotKept when there is none. A page
// kept damaged is an error naming it.
func (c *PageCache) Get(ctx context.Context, rawURL string, notBefore time.Time) (*Page, time.Time, error) {
	var (
		p       Page
		body    []byte
		rawSize int64
		at      int64
	)
	err := c.db.QueryRowContext(ctx, `SELECT url, content_type, body, raw_size, fetched_at FROM pages WHERE key = ?`, rawURL).
		Scan(&p.URL, &p.ContentType, &body, &rawSize, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, time.Time{}, errNotKept
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("learn: page cache %s: read %s: %w", c.path, rawURL, err)
	}
	fetched := time.Unix(0, at)
	if fetched.Before(notBefore) {
		return nil, time.Time{}, errNotKept
	}
	if p.Body, err = gunzip(body, rawSize); err != nil {
		return nil, time.Time{}, fmt.Errorf("learn: page cache %s: page %s is damaged: %w", c.path, rawURL, err)
	}
	return &p, fetched, nil
}

// Put keeps p, fetched at at, as the page of rawURL (replacing what was
// kept for it), then lets go of the oldest pages of its host over the
// host bound and the oldest of all over the byte bound.
func (c *PageCache) Put(ctx context.Context, rawURL string, p *Page, at time.Time) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("learn: page cache: keep %s: not an absolute URL", rawURL)
	}
	body, err := gzipBytes(p.Body)
	if err != nil {
		return fmt.Errorf("learn: page cache: keep %s: %w", rawURL, err)
	}
	host := fetch.HostKey(u)
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("learn: page cache %s: keep %s: %w", c.path, rawURL, err)
	}
	defer tx.Rollback()
	stmts := []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO pages (key, host, url, content_type, body, size, raw_size, fetched_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET host = excluded.host, url = excluded.url, content_type = excluded.content_type,
			body = excluded.body, size = excluded.size, raw_size = excluded.raw_size, fetched_at = excluded.fetched_at`,
			[]any{rawURL, host, p.URL, p.ContentType, body, len(body), len(p.Body), at.UnixNano()}},
		// The newest hostPages of the host stay.
		{`DELETE FROM pages WHERE key IN (SELECT key FROM (
			SELECT key, ROW_NUMBER() OVER (ORDER BY fetched_at DESC, rowid DESC) AS n FROM pages WHERE host = ?) WHERE n > ?)`,
			[]any{host, c.hostPages}},
		// The newest pages whose sizes add up to at most maxBytes stay.
		{`DELETE FROM pages WHERE key IN (SELECT key FROM (
			SELECT key, SUM(size) OVER (ORDER BY fetched_at DESC, rowid DESC) AS kept FROM pages) WHERE kept > ?)`,
			[]any{c.maxBytes}},
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s.sql, s.args...); err != nil {
			return fmt.Errorf("learn: page cache %s: keep %s: %w", c.path, rawURL, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("learn: page cache %s: keep %s: %w", c.path, rawURL, err)
	}
	return nil
}

func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gunzip unpacks a kept body, which must be size bytes long: no more is
// read, so a damaged row cannot unpack into more than its page was.
func gunzip(b []byte, size int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(zr, size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(out)) != size {
		return nil, fmt.Errorf("%d bytes unpacked, %d kept", len(out), size)
	}
	return out, nil
}
