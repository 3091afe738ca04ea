package dispatcher

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"backfill/sqlitedb"
)

// ErrNoTargets says that a state directory holds no record targets: no
// state.db, or one of a build that kept them in another form.
var ErrNoTargets = errors.New("the crawl state holds no record targets")

// Targets are the fields the crawl set out to fill on each record, as
// its state holds them (see Dispatcher.targets): what fill rates are
// judged by. Records share a few target lists, so a million records cost
// a map entry each.
type Targets struct {
	lists [][]string
	byID  map[string]int32 // record id → index in lists
}

// Of returns the fields the crawl targeted on the record with id; ok is
// false for a record the state does not hold (a malformed line).
func (t *Targets) Of(id string) (fields []string, ok bool) {
	i, ok := t.byID[id]
	if !ok {
		return nil, false
	}
	return t.lists[i], true
}

// Fields are the fields some record was targeted for, sorted.
func (t *Targets) Fields() []string {
	var all []string
	for _, l := range t.lists {
		all = append(all, l...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// ReadTargets reads the record targets of the crawl whose state is in
// dir, read-only: a dispatcher may be running there.
func ReadTargets(ctx context.Context, dir string) (*Targets, error) {
	path := filepath.Join(dir, "state.db")
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: no %s", ErrNoTargets, path)
		}
		return nil, fmt.Errorf("dispatcher: state: %w", err)
	}
	f, err := sqlitedb.Parse(path)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: state %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", f.DSN(sqlitedb.Reader, nil))
	if err != nil {
		return nil, fmt.Errorf("dispatcher: state %s: %w", path, err)
	}
	defer db.Close()
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return nil, fmt.Errorf("dispatcher: state %s: %w", path, err)
	}
	if version < len(stateSchema) {
		return nil, fmt.Errorf("%w: %s is of an earlier build (schema %d); a run converts it", ErrNoTargets, path, version)
	}
	t := &Targets{byID: make(map[string]int32)}
	index := map[int64]int32{}
	err = eachRow(ctx, db, `SELECT id, names FROM target_sets`, func(rows *sql.Rows) error {
		var id int64
		var names string
		if err := rows.Scan(&id, &names); err != nil {
			return err
		}
		var list []string
		if err := json.Unmarshal([]byte(names), &list); err != nil {
			return fmt.Errorf("target set %d: %w", id, err)
		}
		index[id] = int32(len(t.lists))
		t.lists = append(t.lists, list)
		return nil
	})
	if err == nil {
		err = eachRow(ctx, db, `SELECT id, targets FROM records`, func(rows *sql.Rows) error {
			var rec string
			var set int64
			if err := rows.Scan(&rec, &set); err != nil {
				return err
			}
			i, ok := index[set]
			if !ok {
				return fmt.Errorf("record %q: no target set %d", rec, set)
			}
			t.byID[rec] = i
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("dispatcher: state %s: %w", path, err)
	}
	return t, nil
}

// eachRow runs q and calls fn on each row.
func eachRow(ctx context.Context, db *sql.DB, q string, fn func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
