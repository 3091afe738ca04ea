package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"backfill/sqlitedb"
)

// TestSQLiteConnectionSettings checks the pragmas each pool runs with, and
// that a user's _pragma in a "file:" URI overrides a default.
func TestSQLiteConnectionSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	busy := fmt.Sprint(sqlitedb.BusyTimeout.Milliseconds())
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
