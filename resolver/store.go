package resolver

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"backfill/sqlitedb"
)

// SQLStore keeps answers in a table of a SQLite database: name (the
// primary key), answer (JSON), at and expires (timeText). The survey keeps
// its table in its state file; OpenStore makes a file of its own.
type SQLStore struct {
	db    *sql.DB
	table string
	owned bool // db was opened by OpenStore and is closed by Close
}

// timeText is the fixed-width UTC form times are kept in, so comparing the
// text compares the times.
const timeText = "2006-01-02T15:04:05.000000000Z"

// TableSQL creates a table SQLStore can use.
func TableSQL(table string) string {
	return `CREATE TABLE ` + table + ` (
		name    TEXT NOT NULL PRIMARY KEY,
		answer  TEXT NOT NULL, -- JSON Answer
		at      TEXT NOT NULL, -- when it was asked
		expires TEXT NOT NULL
	) WITHOUT ROWID`
}

// NewSQLStore uses table of db, which the caller created (TableSQL) and
// closes.
func NewSQLStore(db *sql.DB, table string) *SQLStore { return &SQLStore{db: db, table: table} }

// storeSchema is the schema of a file of OpenStore's. Append only.
var storeSchema = []sqlitedb.Migration{{SQL: []string{TableSQL("dns")}}}

// StoreFile is the name of the cache file in a state directory.
const StoreFile = "dns.db"

// OpenStore opens (creating it if needed) the cache file StoreFile in dir.
// Several processes may share it.
func OpenStore(ctx context.Context, dir string) (*SQLStore, error) {
	path := filepath.Join(dir, StoreFile)
	f, err := sqlitedb.Parse(path)
	if err != nil {
		return nil, fmt.Errorf("resolver: cache %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", f.DSN(sqlitedb.Writer, sqlitedb.Immediate))
	if err != nil {
		return nil, fmt.Errorf("resolver: cache %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := sqlitedb.Migrate(ctx, db, storeSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("resolver: cache schema in %s: %w", path, err)
	}
	return &SQLStore{db: db, table: "dns", owned: true}, nil
}

// Close closes a file OpenStore opened.
func (s *SQLStore) Close() error {
	if s.owned {
		return s.db.Close()
	}
	return nil
}

// Load implements Store.
func (s *SQLStore) Load(ctx context.Context, name string, now time.Time) (Answer, bool, error) {
	var answer, at string
	err := s.db.QueryRowContext(ctx, `SELECT answer, at FROM `+s.table+` WHERE name = ? AND expires > ?`,
		name, now.UTC().Format(timeText)).Scan(&answer, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Answer{}, false, nil
	}
	if err != nil {
		return Answer{}, false, fmt.Errorf("resolver: cache: %w", err)
	}
	var a Answer
	if err := json.Unmarshal([]byte(answer), &a); err != nil {
		return Answer{}, false, nil // an entry that cannot be read is asked again
	}
	a.At, _ = time.Parse(timeText, at)
	return a, true, nil
}

// Save implements Store.
func (s *SQLStore) Save(ctx context.Context, name string, a Answer, expires time.Time) error {
	if name == "" {
		return errors.New("resolver: cache: save: empty name")
	}
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO `+s.table+` (name, answer, at, expires) VALUES (?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET answer = excluded.answer, at = excluded.at, expires = excluded.expires`,
		name, string(b), a.At.UTC().Format(timeText), expires.UTC().Format(timeText))
	if err != nil {
		return fmt.Errorf("resolver: cache: %w", err)
	}
	return nil
}
