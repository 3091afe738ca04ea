// Package sqlitedb owns how backfill opens its SQLite files: the driver
// DSN with the pragmas every connection needs (a user's "file:" URI may
// override them), the retry of a new file's switch to WAL, and the schema,
// which each file keeps as a list of migrations numbered by PRAGMA
// user_version. The results store (store) and the dispatcher's crawl state
// (dispatcher) both open their files through it, so the two cannot drift
// apart in how they do it.
//
// A file's migrations are append-only: entry i moves a file from version i
// to i+1, in one immediate transaction, so processes opening the same new
// file at once serialize there and only the first creates anything. A
// file of a newer version than the list knows is refused rather than
// misread.
package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"backfill/backoff"

	"modernc.org/sqlite" // also registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// BusyTimeout is how long a connection waits for another connection's
// write lock before giving up. A large transaction (a batch of records)
// holds the lock for a few seconds, so this is generous.
const BusyTimeout = 30 * time.Second

// File is a SQLite file to open: its path for messages, and the "file:"
// URI (without query) and the user's own query that DSN builds on.
type File struct {
	Path  string
	base  string
	query string
}

// Parse takes a file path or a "file:" URI. It refuses what cannot work:
// other schemes and in-memory databases, which every connection of a pool
// would see as a different, empty database. For a plain path it creates
// the parent directory.
func Parse(uri string) (File, error) {
	switch {
	case uri == "":
		return File{}, errors.New("empty path")
	case strings.HasPrefix(uri, "file:"):
		base, query, _ := strings.Cut(uri, "?")
		q, err := url.ParseQuery(query)
		if err != nil {
			return File{}, fmt.Errorf("%s: bad query: %w", uri, err)
		}
		if base == "file::memory:" || q.Get("mode") == "memory" {
			return File{}, fmt.Errorf("%s: in-memory databases are not supported; give a file path", uri)
		}
		return File{Path: strings.TrimPrefix(base, "file:"), base: base, query: query}, nil
	case uri == ":memory:":
		return File{}, fmt.Errorf("%s: in-memory databases are not supported; give a file path", uri)
	case strings.Contains(uri, "://"):
		scheme, _, _ := strings.Cut(uri, "://")
		return File{}, fmt.Errorf("unsupported store URI scheme %q (want a file path or a file: URI)", scheme)
	}
	if dir := filepath.Dir(uri); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return File{}, err
		}
	}
	if fi, err := os.Stat(uri); err == nil && fi.IsDir() {
		return File{}, fmt.Errorf("%s: is a directory", uri)
	}
	if err := dirWritable(filepath.Dir(uri)); err != nil {
		return File{}, err
	}
	// Escape the path so that '?', '#' and '%' in a file name are not read
	// as URI syntax.
	return File{Path: uri, base: "file:" + (&url.URL{Path: uri}).EscapedPath()}, nil
}

// dirWritable checks that files can be created in dir, as SQLite must (the
// database, its -wal and -shm files): otherwise it says only "unable to
// open database file".
func dirWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".write-test-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// Pragmas every connection gets unless the user's URI sets them.
var (
	// Writer: WAL so that readers never block the writer nor it them;
	// synchronous NORMAL is durable across a process crash (not a power
	// loss); transactions take the write lock when they begin, so two
	// writers never deadlock upgrading a read lock.
	Writer = []string{"busy_timeout(" + fmt.Sprint(BusyTimeout.Milliseconds()) + ")", "journal_mode(WAL)", "synchronous(NORMAL)"}
	// Reader: the same file, read-only.
	Reader = []string{"busy_timeout(" + fmt.Sprint(BusyTimeout.Milliseconds()) + ")", "query_only(1)"}
)

// DSN returns the driver DSN of a connection with pragmas and the extra
// query values, and the user's query after them. The driver runs every
// _pragma of a DSN in sorted order, so a user's
// "file:…?_pragma=synchronous(FULL)" would lose to ours: each pragma the
// user sets is left out of ours.
func (f File) DSN(pragmas []string, extra url.Values) string {
	user := map[string]bool{}
	q, _ := url.ParseQuery(f.query) // Parse has checked it
	for _, p := range q["_pragma"] {
		user[pragmaName(p)] = true
	}
	v := url.Values{}
	for _, p := range pragmas {
		if !user[pragmaName(p)] {
			v.Add("_pragma", p)
		}
	}
	for k, vs := range extra {
		v[k] = vs
	}
	if f.query == "" {
		return f.base + "?" + v.Encode()
	}
	return f.base + "?" + v.Encode() + "&" + f.query
}

// Immediate is the extra DSN value that makes database/sql transactions
// BEGIN IMMEDIATE: what a writer's connection needs, and what Migrate
// relies on.
var Immediate = url.Values{"_txlock": {"immediate"}}

// pragmaName is the name in a _pragma value such as "busy_timeout(5000)"
// or "synchronous = FULL", lowercased.
func pragmaName(p string) string {
	name, _, _ := strings.Cut(p, "(")
	name, _, _ = strings.Cut(name, "=")
	return strings.ToLower(strings.TrimSpace(name))
}

// Migration is one step of a file's schema: its statements, then Func
// (optional) for what SQL alone cannot say, in the same transaction.
type Migration struct {
	SQL  []string
	Func func(ctx context.Context, tx *sql.Tx) error
}

// Migrate brings db's schema to len(steps) in one immediate transaction
// (db's DSN must carry Immediate), retrying while another process holds a
// new file's lock (see RetryBusy). It returns the version the file had.
func Migrate(ctx context.Context, db *sql.DB, steps []Migration) (from int, err error) {
	err = RetryBusy(ctx, BusyTimeout, func() error {
		var err error
		from, err = migrate(ctx, db, steps)
		return err
	})
	return from, err
}

func migrate(ctx context.Context, db *sql.DB, steps []Migration) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	from := v
	if v > len(steps) {
		return from, fmt.Errorf("schema version %d is newer than this build's %d", v, len(steps))
	}
	if v == len(steps) {
		return from, nil
	}
	for ; v < len(steps); v++ {
		for _, stmt := range steps[v].SQL {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return from, fmt.Errorf("migrate schema to version %d: %w", v+1, err)
			}
		}
		if steps[v].Func != nil {
			if err := steps[v].Func(ctx, tx); err != nil {
				return from, fmt.Errorf("migrate schema to version %d: %w", v+1, err)
			}
		}
	}
	// PRAGMA takes no bound parameters; v is our own integer.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, v)); err != nil {
		return from, fmt.Errorf("set schema version: %w", err)
	}
	return from, tx.Commit()
}

// RetryBusy runs f until it returns anything but SQLITE_BUSY, for at most
// limit, with back-off. The busy timeout does not cover a new file's first
// connections: switching it to WAL fails at once with SQLITE_BUSY, without
// waiting, while another process opening the same file holds its write
// lock.
func RetryBusy(ctx context.Context, limit time.Duration, f func() error) error {
	deadline := time.Now().Add(limit)
	// Jitter keeps processes that collided from colliding again.
	pause := backoff.New(time.Millisecond, 100*time.Millisecond)
	for {
		err := f()
		if err == nil || !IsBusy(err) || time.Now().After(deadline) {
			return err
		}
		if !pause.Wait(ctx) {
			return errors.Join(err, ctx.Err())
		}
	}
}

// IsBusy reports whether err is SQLite's SQLITE_BUSY (another connection
// holds the lock).
func IsBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// IsFull reports whether err says the disk is full: SQLite's SQLITE_FULL,
// or ENOSPC from a write. Freeing space and running again resumes.
func IsFull(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL || errors.Is(err, syscall.ENOSPC)
}
