package store_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"backfill/store"
)

func TestOpenSQLiteFileMigrates(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "state.db")
	v1 := [][]string{{`CREATE TABLE a (x INTEGER)`}}
	v2 := append(v1, []string{`ALTER TABLE a ADD COLUMN y TEXT NOT NULL DEFAULT 'z'`})

	db, err := store.OpenSQLiteFile(ctx, path, v1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO a (x) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = store.OpenSQLiteFile(ctx, path, v2)
	if err != nil {
		t.Fatal(err)
	}
	var y, mode string
	if err := db.QueryRow(`SELECT y FROM a WHERE x = 1`).Scan(&y); err != nil || y != "z" {
		t.Fatalf("migrated row: %q, %v", y, err)
	}
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal mode %q, %v", mode, err)
	}
	db.Close()

	if _, err := store.OpenSQLiteFile(ctx, path, v1); err == nil || !strings.Contains(err.Error(), "newer than this build") {
		t.Fatalf("an older schema opened a newer file: %v", err)
	}
}
