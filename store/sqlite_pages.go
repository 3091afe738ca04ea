package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// pagesSchema is the pages table's migrations: those of a PageFile
// (entry i moves it from user_version i to i+1; append only), and, all
// at once, one migration of the store's own file. The first is the
// table learning kept its teacher pages in before the crawl kept pages
// too; a file of it is read on.
var pagesSchema = [][]string{
	{
		`CREATE TABLE IF NOT EXISTS pages (
			key          TEXT PRIMARY KEY,
			host         TEXT NOT NULL,
			url          TEXT NOT NULL,    -- '' when it is key
			content_type TEXT NOT NULL,
			body         BLOB NOT NULL,    -- gzip
			size         INTEGER NOT NULL, -- len(body): what the byte bound counts
			raw_size     INTEGER NOT NULL, -- the body's length unpacked, checked on reading
			fetched_at   INTEGER NOT NULL  -- Unix nanoseconds
		)`,
		`CREATE INDEX IF NOT EXISTS pages_by_host ON pages (host, fetched_at)`,
		`CREATE INDEX IF NOT EXISTS pages_by_age ON pages (fetched_at)`,
	},
	{
		`ALTER TABLE pages ADD COLUMN status INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE pages ADD COLUMN rendered INTEGER NOT NULL DEFAULT 0`,
	},
}

// sqlitePages is Pages on a SQLite file: writes through w, reads through
// r (the same pool in a PageFile).
type sqlitePages struct {
	w, r *sql.DB
}

const pageColumns = `key, url, status, content_type, body, raw_size, rendered, fetched_at`

func (s sqlitePages) PutPages(ctx context.Context, pages []Page) (int, error) {
	packed := make([]packedPage, 0, len(pages))
	for _, p := range pages {
		pp, ok, err := packPage(p)
		if err != nil {
			return 0, fmt.Errorf("store: put pages: %w", err)
		}
		if ok {
			packed = append(packed, pp)
		}
	}
	if len(packed) == 0 {
		return 0, nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: put pages: %w", err)
	}
	defer tx.Rollback()
	// Prepared once a batch: parsed for each row, the statement cost
	// about as much as the row's insert.
	put, err := tx.PrepareContext(ctx, `INSERT INTO pages (key, host, url, status, content_type, body, size, raw_size, rendered, fetched_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET host = excluded.host, url = excluded.url, status = excluded.status,
			content_type = excluded.content_type, body = excluded.body, size = excluded.size,
			raw_size = excluded.raw_size, rendered = excluded.rendered, fetched_at = excluded.fetched_at`)
	if err != nil {
		return 0, fmt.Errorf("store: put pages: %w", err)
	}
	defer put.Close()
	for _, p := range packed {
		_, err := put.ExecContext(ctx, p.Key, p.host, p.URL, p.Status, p.ContentType, p.packed, len(p.packed), p.rawSize, b2i(p.Rendered), p.FetchedAt.UnixNano())
		if err != nil {
			return 0, fmt.Errorf("store: put page %s: %w", p.Key, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: put pages: %w", err)
	}
	return len(packed), nil
}

// scanPage reads a row of pageColumns, unpacking the body; a body that
// does not unpack is an error IsDamaged tells, with the page's other
// columns read.
func scanPage(row interface{ Scan(...any) error }) (Page, error) {
	var (
		p        Page
		body     []byte
		raw, at  int64
		rendered int
	)
	if err := row.Scan(&p.Key, &p.URL, &p.Status, &p.ContentType, &body, &raw, &rendered, &at); err != nil {
		return Page{}, err
	}
	p.Rendered, p.FetchedAt = rendered != 0, time.Unix(0, at).UTC()
	if p.URL == p.Key {
		p.URL = ""
	}
	var err error
	if p.Body, err = unpackBody(p.Key, body, raw); err != nil {
		return p, err
	}
	return p, nil
}

func (s sqlitePages) Page(ctx context.Context, key string) (Page, error) {
	p, err := scanPage(s.r.QueryRowContext(ctx, `SELECT `+pageColumns+` FROM pages WHERE key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return Page{}, fmt.Errorf("%w: page %s", ErrNotFound, key)
	}
	if err != nil {
		return Page{}, fmt.Errorf("store: read page: %w", err)
	}
	return p, nil
}

func (s sqlitePages) ListPages(ctx context.Context, after string, limit int) ([]Page, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+pageColumns+` FROM pages WHERE key > ? ORDER BY key LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list pages: %w", err)
	}
	defer rows.Close()
	var out []Page
	for rows.Next() {
		p, err := scanPage(rows)
		if IsDamaged(err) {
			p.Damaged = err.Error()
		} else if err != nil {
			return nil, fmt.Errorf("store: list pages: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list pages: %w", err)
	}
	return out, nil
}

func (s sqlitePages) PageStats(ctx context.Context) (PageStats, error) {
	var st PageStats
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(size), 0) FROM pages`).Scan(&st.Pages, &st.Bytes); err != nil {
		return PageStats{}, fmt.Errorf("store: count pages: %w", err)
	}
	return st, nil
}

func (s sqlitePages) TrimPages(ctx context.Context, maxBytes int64) (int, error) {
	// The newest pages whose sizes add up to at most maxBytes stay.
	r, err := s.w.ExecContext(ctx, `DELETE FROM pages WHERE key IN (SELECT key FROM (
		SELECT key, SUM(size) OVER (ORDER BY fetched_at DESC, key DESC) AS kept FROM pages) WHERE kept > ?)`, maxBytes)
	if err != nil {
		return 0, fmt.Errorf("store: trim pages: %w", err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: trim pages: %w", err)
	}
	return int(n), nil
}

// PageFile is Pages in a SQLite file of its own, for a process that
// keeps pages without a store (mappings learn given a directory with no
// crawl in it). Close it when done.
type PageFile struct {
	sqlitePages
	path string
}

var _ Pages = (*PageFile)(nil)

// OpenPageFile opens (creating it) the page file at path, as
// OpenSQLiteFile opens a component's file.
func OpenPageFile(ctx context.Context, path string) (*PageFile, error) {
	db, err := OpenSQLiteFile(ctx, path, pagesSchema)
	if err != nil {
		return nil, err
	}
	return &PageFile{sqlitePages: sqlitePages{w: db, r: db}, path: path}, nil
}

// Path is the file's path.
func (f *PageFile) Path() string { return f.path }

// Close closes the file.
func (f *PageFile) Close() error { return f.w.Close() }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
