package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var schema = []Migration{{SQL: []string{`CREATE TABLE t (a)`}}, {SQL: []string{`ALTER TABLE t ADD COLUMN b`}}}

// writer opens a writer's connection to path, as the store and the
// dispatcher do.
func writer(t *testing.T, path string) *sql.DB {
	t.Helper()
	f, err := Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", f.DSN(Writer, Immediate))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func migrateOnce(ctx context.Context, db *sql.DB) error {
	_, err := migrate(ctx, db, schema)
	return err
}

// TestRetryBusy holds a write lock on a new file, which makes the
// writer's switch to WAL fail at once whatever the busy timeout, and
// checks that RetryBusy tries again until the lock is gone, gives up on
// other errors and on a cancelled context.
func TestRetryBusy(t *testing.T) {
	ctx := context.Background()
	lock := func(t *testing.T) (path string, release func()) {
		t.Helper()
		path = filepath.Join(t.TempDir(), "new.db")
		raw, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(`CREATE TABLE other (a)`); err != nil {
			t.Fatal(err)
		}
		tx, err := raw.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(`INSERT INTO other VALUES (1)`); err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		release = func() {
			once.Do(func() {
				tx.Rollback()
				raw.Close()
			})
		}
		t.Cleanup(release)
		return path, release
	}
	t.Run("waits for the lock", func(t *testing.T) {
		path, release := lock(t)
		db := writer(t, path)
		var errs []error
		err := RetryBusy(ctx, time.Minute, func() error {
			err := migrateOnce(ctx, db)
			errs = append(errs, err)
			release()
			return err
		})
		if err != nil {
			t.Fatalf("RetryBusy: %v (attempts: %v)", err, errs)
		}
		var se *sqlite.Error
		if len(errs) != 2 || !errors.As(errs[0], &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY {
			t.Fatalf("attempts = %v, want SQLITE_BUSY and then success", errs)
		}
		var v int
		if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != len(schema) {
			t.Errorf("user_version = %d, %v; want %d", v, err, len(schema))
		}
	})
	t.Run("gives up at the limit", func(t *testing.T) {
		path, _ := lock(t)
		db := writer(t, path)
		n := 0
		err := RetryBusy(ctx, 0, func() error { n++; return migrateOnce(ctx, db) })
		if n != 1 || err == nil {
			t.Errorf("%d attempts, err %v; want 1 attempt and SQLITE_BUSY", n, err)
		}
	})
	t.Run("gives up when cancelled", func(t *testing.T) {
		path, _ := lock(t)
		db := writer(t, path)
		cctx, cancel := context.WithCancel(ctx)
		n := 0
		err := RetryBusy(cctx, time.Minute, func() error {
			n++
			cancel()
			return migrateOnce(ctx, db)
		})
		if n != 1 || !errors.Is(err, context.Canceled) {
			t.Errorf("%d attempts, err %v; want 1 attempt and context.Canceled", n, err)
		}
	})
	t.Run("other errors at once", func(t *testing.T) {
		n := 0
		bad := errors.New("bad")
		err := RetryBusy(ctx, time.Minute, func() error { n++; return bad })
		if n != 1 || err != bad {
			t.Errorf("%d attempts, err %v; want 1 attempt and %v", n, err, bad)
		}
	})
}

// TestMigrate: a new file gets every step, an older one the steps it
// lacks (Func included, in the same transaction), and a newer one is
// refused untouched.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	var funcs int
	steps := []Migration{
		{SQL: []string{`CREATE TABLE t (a)`}},
		{SQL: []string{`ALTER TABLE t ADD COLUMN b`}, Func: func(ctx context.Context, tx *sql.Tx) error {
			funcs++
			_, err := tx.ExecContext(ctx, `INSERT INTO t VALUES (1, 2)`)
			return err
		}},
	}
	path := filepath.Join(t.TempDir(), "m.db")
	db := writer(t, path)
	tests := []struct {
		name     string
		steps    []Migration
		wantFrom int
		wantErr  bool
		wantRows int
	}{
		{"new file, first step", steps[:1], 0, false, 0},
		{"second step on an older file", steps, 1, false, 1},
		{"up to date", steps, 2, false, 1},
		{"newer than the build", steps[:1], 2, true, 1},
	}
	for _, tt := range tests {
		from, err := Migrate(ctx, db, tt.steps)
		if from != tt.wantFrom || (err != nil) != tt.wantErr {
			t.Fatalf("%s: from %d, err %v; want from %d, error %v", tt.name, from, err, tt.wantFrom, tt.wantErr)
		}
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM t`).Scan(&n); err != nil || n != tt.wantRows {
			t.Fatalf("%s: %d rows (%v), want %d", tt.name, n, err, tt.wantRows)
		}
	}
	if funcs != 1 {
		t.Errorf("Func ran %d times, want once", funcs)
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode %q (%v), want wal", mode, err)
	}
}

// TestDSNUserPragmaWins: a pragma in the user's URI replaces ours.
func TestDSNUserPragmaWins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.db")
	f, err := Parse("file:" + path + "?_pragma=synchronous(FULL)")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", f.DSN(Writer, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var sync int
	if err := db.QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil || sync != 2 {
		t.Errorf("synchronous = %d (%v), want 2 (FULL)", sync, err)
	}
}

// TestIsFull: a write past the end of a full file system is told apart
// from other failures, as SQLite says it and as the system call does.
func TestIsFull(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("state commit: %w", &os.PathError{Op: "write", Path: "state.db-wal", Err: syscall.ENOSPC}), true},
		{fmt.Errorf("state commit: %w", syscall.EIO), false},
		{nil, false},
	} {
		if got := IsFull(c.err); got != c.want {
			t.Errorf("IsFull(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
