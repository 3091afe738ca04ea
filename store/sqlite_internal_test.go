package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// TestSQLiteConnectionSettings checks the pragmas each pool runs with, and
// that a user's _pragma in a "file:" URI overrides a default.
func TestSQLiteConnectionSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	busy := fmt.Sprint(sqliteBusyTimeout.Milliseconds())
	tests := []struct {
		uri      string
		wantSync string // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{
		{path, "1"},
		{"file:" + path + "?_pragma=synchronous(FULL)", "2"},
		{"file:" + path + "?_pragma=synchronous%20%3D%20full", "2"},
	}
	for _, tc := range tests {
		t.Run(tc.uri, func(t *testing.T) {
			st, err := openSQLite(context.Background(), tc.uri)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			s := st.(*sqliteStore)
			checks := []struct {
				pool   string
				db     *sql.DB
				pragma string
				want   string
			}{
				{"writer", s.w, "journal_mode", "wal"},
				{"writer", s.w, "synchronous", tc.wantSync},
				{"writer", s.w, "foreign_keys", "1"},
				{"writer", s.w, "busy_timeout", busy},
				{"reader", s.r, "busy_timeout", busy},
				{"reader", s.r, "query_only", "1"},
				{"reader", s.r, "user_version", fmt.Sprint(len(sqliteSchema))},
			}
			for _, c := range checks {
				var got string
				if err := c.db.QueryRow("PRAGMA " + c.pragma).Scan(&got); err != nil {
					t.Fatalf("%s PRAGMA %s: %v", c.pool, c.pragma, err)
				}
				if got != c.want {
					t.Errorf("%s PRAGMA %s = %s, want %s", c.pool, c.pragma, got, c.want)
				}
			}
			if _, err := s.r.Exec(`DELETE FROM records`); err == nil {
				t.Error("a reader connection could write")
			}
		})
	}
}

// TestSQLiteRetryBusy holds a write lock on a new file, which makes the
// writer's switch to WAL fail at once whatever the busy timeout, and
// checks that retryBusy tries again until the lock is gone, gives up on
// other errors and on a cancelled context.
func TestSQLiteRetryBusy(t *testing.T) {
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
	writer := func(t *testing.T, path string) *sql.DB {
		t.Helper()
		_, w, _, err := sqliteDSNs(path)
		if err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", w)
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { db.Close() })
		return db
	}

	t.Run("waits for the lock", func(t *testing.T) {
		path, release := lock(t)
		db := writer(t, path)
		var errs []error
		err := retryBusy(ctx, time.Minute, func() error {
			err := migrateSQLite(ctx, db, sqliteSchema)
			errs = append(errs, err)
			release()
			return err
		})
		if err != nil {
			t.Fatalf("retryBusy: %v (attempts: %v)", err, errs)
		}
		var se *sqlite.Error
		if len(errs) != 2 || !errors.As(errs[0], &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY {
			t.Fatalf("attempts = %v, want SQLITE_BUSY and then success", errs)
		}
		var v int
		if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != len(sqliteSchema) {
			t.Errorf("user_version = %d, %v; want %d", v, err, len(sqliteSchema))
		}
	})
	t.Run("gives up at the limit", func(t *testing.T) {
		path, _ := lock(t)
		db := writer(t, path)
		n := 0
		err := retryBusy(ctx, 0, func() error { n++; return migrateSQLite(ctx, db, sqliteSchema) })
		if n != 1 || err == nil {
			t.Errorf("%d attempts, err %v; want 1 attempt and SQLITE_BUSY", n, err)
		}
	})
	t.Run("gives up when cancelled", func(t *testing.T) {
		path, _ := lock(t)
		db := writer(t, path)
		cctx, cancel := context.WithCancel(ctx)
		n := 0
		err := retryBusy(cctx, time.Minute, func() error {
			n++
			cancel()
			return migrateSQLite(ctx, db, sqliteSchema)
		})
		if n != 1 || !errors.Is(err, context.Canceled) {
			t.Errorf("%d attempts, err %v; want 1 attempt and context.Canceled", n, err)
		}
	})
	t.Run("other errors at once", func(t *testing.T) {
		n := 0
		bad := errors.New("bad")
		err := retryBusy(ctx, time.Minute, func() error { n++; return bad })
		if n != 1 || err != bad {
			t.Errorf("%d attempts, err %v; want 1 attempt and %v", n, err, bad)
		}
	})
}
