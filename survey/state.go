package survey

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"backfill/resolver"
	"backfill/store"
)

// The state of a survey lives in STATE-DIR/survey.db: the runs, each
// run's tasks (one per address) and result rows, and the DNS cache. A row
// and the task it answers are committed in one transaction, so a run
// killed at any point resumes with every committed task done and every
// other one still to do: no target is probed twice, none is lost.
var stateSchema = [][]string{
	{
		`CREATE TABLE runs (
			id       INTEGER PRIMARY KEY,
			job      TEXT    NOT NULL,           -- "web" or "ports"
			params   TEXT    NOT NULL,           -- what defines the run's targets; a resume must match it
			started  TEXT    NOT NULL,
			planned  INTEGER NOT NULL DEFAULT 0, -- 1 once every task and early row is in
			finished TEXT                        -- NULL while the run is unfinished
		)`,
		`CREATE TABLE tasks (
			run   INTEGER NOT NULL,
			id    TEXT    NOT NULL,
			seq   INTEGER NOT NULL, -- dispatch order (locality: NS, then address)
			ip    TEXT    NOT NULL,
			hosts TEXT    NOT NULL, -- JSON array of hostEntry
			ports TEXT    NOT NULL, -- JSON array (ports)
			done  INTEGER NOT NULL DEFAULT 0,
			PRIMARY KEY (run, id)
		) WITHOUT ROWID`,
		`CREATE INDEX tasks_todo ON tasks (run, done, seq)`,
		`CREATE TABLE rows (
			run    INTEGER NOT NULL,
			key    TEXT    NOT NULL, -- domain, or ip:port
			seq    INTEGER NOT NULL, -- output order: the input's
			at     TEXT    NOT NULL,
			doc    TEXT    NOT NULL, -- the row as JSON (docs/survey.md)
			stored INTEGER NOT NULL DEFAULT 0, -- 1 once the results store has it
			PRIMARY KEY (run, key)
		) WITHOUT ROWID`,
		`CREATE INDEX rows_by_seq ON rows (run, seq)`,
		`CREATE INDEX rows_unstored ON rows (run, stored)`,
		`CREATE TABLE dns (
			name    TEXT NOT NULL PRIMARY KEY,
			answer  TEXT NOT NULL, -- JSON Answer
			at      TEXT NOT NULL, -- when it was asked
			expires TEXT NOT NULL
		) WITHOUT ROWID`,
	},
}

// timeText is the fixed-width UTC form times are kept in, so comparing the
// text compares the times.
const timeText = "2006-01-02T15:04:05.000000000Z"

func fmtTime(t time.Time) string { return t.UTC().Format(timeText) }

func parseTimeText(s string) (time.Time, error) { return time.Parse(timeText, s) }

type state struct {
	db   *sql.DB
	path string
}

func openState(ctx context.Context, dir string) (*state, error) {
	path := filepath.Join(dir, "survey.db")
	db, err := store.OpenSQLiteFile(ctx, path, stateSchema)
	if err != nil {
		return nil, fmt.Errorf("survey: state: %w", err)
	}
	return &state{db: db, path: path}, nil
}

func (s *state) close() error { return s.db.Close() }

// run is one survey run in the state.
type run struct {
	id       int64
	job      string
	params   string
	started  time.Time
	planned  bool
	finished bool
}

// name is the run's name in the results store and in rows copied from it.
func (r run) name() string { return fmt.Sprintf("%s/%d", r.job, r.id) }

// ErrOtherRun says the state directory holds an unfinished run of the job
// whose targets differ from the ones asked for.
var ErrOtherRun = errors.New("survey: an unfinished run with other targets is in the state directory")

// openRun resumes the latest run of job when it is unfinished (its params
// must equal params), else starts a new one. It also returns the latest
// finished run before it, if any, for incremental rescans.
func (s *state) openRun(ctx context.Context, job, params string, now time.Time) (cur run, prev *run, err error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, params, started, planned, finished IS NOT NULL FROM runs WHERE job = ? ORDER BY id DESC LIMIT 2`, job)
	if err != nil {
		return run{}, nil, fmt.Errorf("survey: read runs: %w", err)
	}
	var runs []run
	for rows.Next() {
		r := run{job: job}
		var started string
		if err := rows.Scan(&r.id, &r.params, &started, &r.planned, &r.finished); err != nil {
			rows.Close()
			return run{}, nil, fmt.Errorf("survey: read runs: %w", err)
		}
		r.started, _ = parseTimeText(started)
		runs = append(runs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return run{}, nil, fmt.Errorf("survey: read runs: %w", err)
	}
	if len(runs) > 0 && !runs[0].finished {
		if runs[0].params != params {
			return run{}, nil, fmt.Errorf("%w (%s, started %s); run it again with the same targets to finish it, or use another --state-dir",
				ErrOtherRun, runs[0].name(), runs[0].started.Format(time.RFC3339))
		}
		if len(runs) > 1 {
			prev = &runs[1]
		}
		return runs[0], prev, nil
	}
	if len(runs) > 0 {
		prev = &runs[0]
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO runs (job, params, started) VALUES (?, ?, ?)`, job, params, fmtTime(now))
	if err != nil {
		return run{}, nil, fmt.Errorf("survey: start run: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return run{}, nil, fmt.Errorf("survey: start run: %w", err)
	}
	return run{id: id, job: job, params: params, started: now}, prev, nil
}

// task is one address to probe.
type task struct {
	id    string
	seq   int64
	ip    string
	hosts []hostEntry // web: the domains on the address; ports: the name the address came from, if any
	ports []int

	// In memory only, for the dispatcher.
	attempts int
}

// hostEntry is a domain of a web task with what its row needs.
type hostEntry struct {
	Domain string          `json:"domain"`
	Seq    int64           `json:"seq"` // the domain's place in the input
	DNS    resolver.Answer `json:"dns"`
	At     time.Time       `json:"at,omitzero"` // when DNS answered
}

// names are the task's domains.
func (t *task) names() []string {
	out := make([]string, len(t.hosts))
	for i, h := range t.hosts {
		out[i] = h.Domain
	}
	return out
}

// row is one output line.
type row struct {
	key string
	seq int64
	at  time.Time
	doc []byte
}

// plan writes a run's tasks and the rows known before any probe (domains
// that did not resolve, rows copied from the previous run, excluded
// targets) and marks the run planned, in one transaction.
func (s *state) plan(ctx context.Context, r run, tasks []task, rows []row) error {
	return s.tx(ctx, "plan run "+r.name(), func(tx *sql.Tx) error {
		ins, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO tasks (run, id, seq, ip, hosts, ports) VALUES (?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer ins.Close()
		for _, t := range tasks {
			hosts, _ := json.Marshal(nonNil(t.hosts))
			ports, _ := json.Marshal(nonNil(t.ports))
			if _, err := ins.ExecContext(ctx, r.id, t.id, t.seq, t.ip, string(hosts), string(ports)); err != nil {
				return err
			}
		}
		if err := putRows(ctx, tx, r, rows); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE runs SET planned = 1 WHERE id = ?`, r.id)
		return err
	})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func putRows(ctx context.Context, tx *sql.Tx, r run, rows []row) error {
	if len(rows) == 0 {
		return nil
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO rows (run, key, seq, at, doc) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (run, key) DO UPDATE SET seq = excluded.seq, at = excluded.at, doc = excluded.doc, stored = 0`)
	if err != nil {
		return err
	}
	defer ins.Close()
	for _, w := range rows {
		if _, err := ins.ExecContext(ctx, r.id, w.key, w.seq, fmtTime(w.at), string(w.doc)); err != nil {
			return fmt.Errorf("row %s: %w", w.key, err)
		}
	}
	return nil
}

// todo returns the run's tasks not yet done, in dispatch order.
func (s *state) todo(ctx context.Context, r run) ([]*task, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, seq, ip, hosts, ports FROM tasks WHERE run = ? AND done = 0 ORDER BY seq`, r.id)
	if err != nil {
		return nil, fmt.Errorf("survey: read tasks: %w", err)
	}
	defer rows.Close()
	var out []*task
	for rows.Next() {
		t := new(task)
		var hosts, ports string
		if err := rows.Scan(&t.id, &t.seq, &t.ip, &hosts, &ports); err != nil {
			return nil, fmt.Errorf("survey: read tasks: %w", err)
		}
		if err := errors.Join(json.Unmarshal([]byte(hosts), &t.hosts), json.Unmarshal([]byte(ports), &t.ports)); err != nil {
			return nil, fmt.Errorf("survey: task %s: %w", t.id, err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// commit writes result rows and marks their tasks done, in one
// transaction.
func (s *state) commit(ctx context.Context, r run, rows []row, done []string) error {
	return s.tx(ctx, "commit results", func(tx *sql.Tx) error {
		if err := putRows(ctx, tx, r, rows); err != nil {
			return err
		}
		upd, err := tx.PrepareContext(ctx, `UPDATE tasks SET done = 1 WHERE run = ? AND id = ?`)
		if err != nil {
			return err
		}
		defer upd.Close()
		for _, id := range done {
			if _, err := upd.ExecContext(ctx, r.id, id); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *state) finish(ctx context.Context, r run, now time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE runs SET finished = ? WHERE id = ?`, fmtTime(now), r.id)
	if err != nil {
		return fmt.Errorf("survey: finish run: %w", err)
	}
	return nil
}

// rows calls fn for every row of run in output order.
func (s *state) rows(ctx context.Context, r run, fn func(row) error) error {
	rs, err := s.db.QueryContext(ctx, `SELECT key, seq, at, doc FROM rows WHERE run = ? ORDER BY seq, key`, r.id)
	if err != nil {
		return fmt.Errorf("survey: read rows: %w", err)
	}
	// Read them all before calling fn: fn may write, and the state has one
	// connection.
	var all []row
	for rs.Next() {
		var w row
		var at, doc string
		if err := rs.Scan(&w.key, &w.seq, &at, &doc); err != nil {
			rs.Close()
			return fmt.Errorf("survey: read rows: %w", err)
		}
		w.at, _ = parseTimeText(at)
		w.doc = []byte(doc)
		all = append(all, w)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return fmt.Errorf("survey: read rows: %w", err)
	}
	for _, w := range all {
		if err := fn(w); err != nil {
			return err
		}
	}
	return nil
}

// unstored returns up to limit rows the results store does not have yet.
func (s *state) unstored(ctx context.Context, r run, limit int) ([]row, error) {
	rs, err := s.db.QueryContext(ctx, `SELECT key, seq, at, doc FROM rows WHERE run = ? AND stored = 0 LIMIT ?`, r.id, limit)
	if err != nil {
		return nil, fmt.Errorf("survey: read rows: %w", err)
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var w row
		var at, doc string
		if err := rs.Scan(&w.key, &w.seq, &at, &doc); err != nil {
			return nil, fmt.Errorf("survey: read rows: %w", err)
		}
		w.at, _ = parseTimeText(at)
		w.doc = []byte(doc)
		out = append(out, w)
	}
	return out, rs.Err()
}

func (s *state) markStored(ctx context.Context, r run, rows []row) error {
	return s.tx(ctx, "mark rows stored", func(tx *sql.Tx) error {
		upd, err := tx.PrepareContext(ctx, `UPDATE rows SET stored = 1 WHERE run = ? AND key = ? AND at = ?`)
		if err != nil {
			return err
		}
		defer upd.Close()
		for _, w := range rows {
			if _, err := upd.ExecContext(ctx, r.id, w.key, fmtTime(w.at)); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *state) tx(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("survey: %s: %w", op, err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return fmt.Errorf("survey: %s: %w", op, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("survey: %s: %w", op, err)
	}
	return nil
}
