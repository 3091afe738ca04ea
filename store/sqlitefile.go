package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"backfill/sqlitedb"
)

// OpenSQLiteFile opens (creating it and its directory) a SQLite file that
// a component keeps its own state in, such as a survey's state.db, set up
// as the store's own file is (package sqlitedb): WAL, synchronous=NORMAL
// (durable across a process crash), the busy timeout, immediate write
// transactions, and the schema brought to the newest of the given
// migrations (entry i moves a file from user_version i to i+1; append
// only) in one transaction. The pool has one connection: the caller is
// the file's one writer, and its reads queue behind its writes.
func OpenSQLiteFile(ctx context.Context, path string, schema [][]string) (*sql.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	f, err := sqlitedb.Parse(path)
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	steps := make([]sqlitedb.Migration, len(schema))
	for i, stmts := range schema {
		steps[i] = sqlitedb.Migration{SQL: stmts}
	}
	return openSQLiteWriter(ctx, f, steps)
}

// openSQLiteWriter opens f's one writer connection (foreign keys on: a
// record's found fields go with it) and brings its schema to the newest
// of steps. The store's own file and OpenSQLiteFile's both start here.
func openSQLiteWriter(ctx context.Context, f sqlitedb.File, steps []sqlitedb.Migration) (*sql.DB, error) {
	db, err := sql.Open("sqlite", f.DSN(append([]string{"foreign_keys(1)"}, sqlitedb.Writer...), sqlitedb.Immediate))
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite %s: %w", f.Path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	if _, err := sqlitedb.Migrate(ctx, db, steps); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open sqlite %s: %w", f.Path, err)
	}
	return db, nil
}
