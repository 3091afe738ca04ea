package dispatcher

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Task states in the frontier table. A lease lives in the Dispatcher's
// memory only: a task out on lease is queued as far as the state goes,
// which is what it becomes when a dispatcher restarts. (Writing the lease
// cost a statement per dispatched task and bought nothing.)
const (
	stateQueued  = 0
	stateLeased  = 1 // written by earlier builds; New queues such tasks again
	stateDone    = 2
	stateDropped = 3 // every record that wanted it is complete
)

// schema is the state database. seen and frontier share the URL id: seen is
// what is known about a URL (first seen, last crawl, outcome, the cached
// extraction), frontier is the task that crawls it. task_records says which
// records reached a URL and at what depth for each. fingerprints holds the
// content fingerprint of every fetched page the content-seen test checked,
// in the order checked (seq), with the URL it was a duplicate of, if any:
// New replays them in that order to rebuild the test's index. seen's
// etag and last_modified are the validators of the page's last good fetch,
// sent with the task when the page is fetched again (see refresh.go), and
// its attempts the fetches in a row that failed, across runs (retry.go);
// prior holds, for a field a refresh is re-checking (open = 1), the value
// it had before, from which the value found now gets its history.
const schema = `
CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS seen (
	id           TEXT PRIMARY KEY,
	url          TEXT NOT NULL,
	first_seen   INTEGER NOT NULL,
	last_crawled INTEGER NOT NULL DEFAULT 0,
	class        TEXT NOT NULL DEFAULT '',
	status       INTEGER NOT NULL DEFAULT 0,
	result       BLOB,
	etag          TEXT NOT NULL DEFAULT '',
	last_modified TEXT NOT NULL DEFAULT '',
	attempts      INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS frontier (
	id         TEXT PRIMARY KEY,
	url        TEXT NOT NULL,
	host       TEXT NOT NULL,
	domain     TEXT NOT NULL,
	depth      INTEGER NOT NULL,
	matched    INTEGER NOT NULL,
	priority   INTEGER NOT NULL,
	render     INTEGER NOT NULL,
	seq        INTEGER NOT NULL,
	state      INTEGER NOT NULL,
	lease      INTEGER NOT NULL DEFAULT 0,
	deadline   INTEGER NOT NULL DEFAULT 0,
	supervisor TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS frontier_ready ON frontier(matched DESC, priority DESC, depth, seq) WHERE state = 0;
CREATE TABLE IF NOT EXISTS task_records (
	url_id    TEXT NOT NULL,
	record_id TEXT NOT NULL,
	depth     INTEGER NOT NULL,
	PRIMARY KEY (url_id, record_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS task_records_record ON task_records(record_id);
CREATE TABLE IF NOT EXISTS records (
	id       TEXT PRIMARY KEY,
	seq      INTEGER NOT NULL,
	fields   BLOB NOT NULL,
	targets  BLOB NOT NULL,
	filled   BLOB NOT NULL,
	nfilled  INTEGER NOT NULL,
	complete INTEGER NOT NULL,
	skipped  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS records_seq ON records(seq);
CREATE TABLE IF NOT EXISTS prior (
	record_id TEXT NOT NULL,
	field     TEXT NOT NULL,
	value     BLOB NOT NULL,
	open      INTEGER NOT NULL,
	PRIMARY KEY (record_id, field)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS prior_open ON prior(open) WHERE open = 1;
CREATE TABLE IF NOT EXISTS fingerprints (
	seq          INTEGER PRIMARY KEY,
	url_id       TEXT NOT NULL,
	exact        BLOB NOT NULL,
	sim          INTEGER NOT NULL,
	words        INTEGER NOT NULL,
	duplicate_of TEXT NOT NULL DEFAULT ''
);
`

// state is the SQLite state database. It holds one connection; every use
// is serialized by the Dispatcher's mutex, and writes are grouped into one
// transaction per batch (see begin/commit).
//
// Checkpoints (copying the write-ahead log back into the database file,
// with an fsync of each) run on a connection of their own, in the
// checkpointer goroutine: run by the committing connection, as SQLite
// does by default, one took up to 150ms every few thousand pages, and the
// Run loop dispatched nothing meanwhile. A passive checkpoint never
// blocks the writer.
type state struct {
	db      *sql.DB
	conn    *sql.Conn
	st      map[string]*sql.Stmt
	inTx    bool
	txStart time.Time // when the open transaction began
	commits int64     // transactions committed, for the log

	ckpt     *sql.DB       // the checkpointer's connection
	ckptKick chan struct{} // size 1: a commit happened
	ckptStop context.CancelFunc
	ckptDone chan struct{}

	lock *stateLock // the state directory's, released by close
}

const (
	// ckptEvery is the least time between two background checkpoints.
	ckptEvery = 500 * time.Millisecond
	// walBackstop is the WAL size (pages) at which the committing
	// connection checkpoints by itself, should the checkpointer fall far
	// behind; it bounds the log.
	walBackstop = 50000
)

var statements = map[string]string{
	"metaGet":    `SELECT value FROM meta WHERE key = ?`,
	"metaSet":    `INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`,
	"recIns":     `INSERT INTO records(id, seq, fields, targets, filled, nfilled, complete, skipped) VALUES(?, ?, ?, ?, '{}', 0, ?, ?) ON CONFLICT(id) DO NOTHING`,
	"recGet":     `SELECT fields, targets, filled, complete FROM records WHERE id = ?`,
	"recPut":     `UPDATE records SET filled = ?, nfilled = ?, complete = ? WHERE id = ?`,
	"recExists":  `SELECT 1 FROM records WHERE id = ?`,
	"badExists":  `SELECT 1 FROM malformed WHERE id = ? UNION ALL SELECT 1 FROM records WHERE id = ?`,
	"badIns":     `INSERT INTO malformed(id, seq) VALUES(?, ?) ON CONFLICT(id) DO NOTHING`,
	"refusalIns": `INSERT INTO refusals(record_id, page, field, page_value, record_value) VALUES(?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
	"urlRecords": `SELECT record_id, depth FROM task_records WHERE url_id = ? ORDER BY record_id`,
	"trPut":      `INSERT INTO task_records(url_id, record_id, depth) VALUES(?, ?, ?) ON CONFLICT(url_id, record_id) DO UPDATE SET depth = excluded.depth WHERE excluded.depth < task_records.depth`,
	"fpIns":      `INSERT INTO fingerprints(url_id, exact, sim, words, duplicate_of) VALUES(?, ?, ?, ?, ?)`,
	// seenDone counts a failed fetch in attempts and clears the count on
	// a good one.
	"seenDone": `UPDATE seen SET last_crawled = ?1, class = ?2, status = ?3, result = ?4, etag = ?5, last_modified = ?6,
		attempts = CASE WHEN ?2 = '' THEN 0 ELSE attempts + 1 END WHERE id = ?7`,
	"seenCached":    `SELECT class, result, etag, last_modified FROM seen WHERE id = ?`,
	"seenValid":     `SELECT etag, last_modified FROM seen WHERE id = ? AND class = '' AND result IS NOT NULL`,
	"priorPut":      `INSERT INTO prior(record_id, field, value, open) VALUES(?, ?, ?, 1) ON CONFLICT(record_id, field) DO UPDATE SET value = excluded.value, open = 1`,
	"priorGet":      `SELECT field, value FROM prior WHERE record_id = ? AND open = 1`,
	"ownLinks":      `SELECT tr.url_id, s.url FROM task_records tr JOIN seen s ON s.id = tr.url_id WHERE tr.record_id = ? AND tr.depth = 0`,
	"frontDepth":    `UPDATE frontier SET depth = ? WHERE id = ? AND depth > ?`,
	"frontState":    `UPDATE frontier SET state = ?, lease = ?, deadline = ?, supervisor = ? WHERE id = ?`,
	"frontRequeue":  `UPDATE frontier SET state = 0, seq = ?, depth = ? WHERE id = ?`,
	"frontRender":   `UPDATE frontier SET state = 0, render = 1, seq = ? WHERE id = ?`,
	"frontGetState": `SELECT state FROM frontier WHERE id = ?`,
	"recordTasks":   `SELECT tr.url_id FROM task_records tr JOIN frontier f ON f.id = tr.url_id WHERE tr.record_id = ? AND f.state = 0`,
	"urlWanted":     `SELECT EXISTS(SELECT 1 FROM task_records tr JOIN records r ON r.id = tr.record_id WHERE tr.url_id = ? AND r.complete = 0)`,
	"refill":        `SELECT id, url, host, domain, depth, matched, priority, render, seq FROM frontier WHERE state = 0 ORDER BY matched DESC, priority DESC, depth, seq LIMIT ?`,
	// refillAfter reads on after a place in the order (matched, priority,
	// depth, seq); its terms use only the columns of frontier_ready, so
	// the rows before the place are passed over in the index.
	"refillAfter": `SELECT id, url, host, domain, depth, matched, priority, render, seq FROM frontier WHERE state = 0
		AND (matched < ?1 OR (matched = ?1 AND (priority < ?2 OR (priority = ?2 AND (depth > ?3 OR (depth = ?3 AND seq > ?4))))))
		ORDER BY matched DESC, priority DESC, depth, seq LIMIT ?5`,
}

func openState(ctx context.Context, dir string) (*state, error) {
	if dir == "" {
		return nil, errors.New("dispatcher: no state directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dispatcher: state directory: %w", err)
	}
	path := filepath.Join(dir, "state.db")
	base := "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(OFF)"
	db, err := sql.Open("sqlite", base+"&_pragma=cache_size(-16384)&_pragma=temp_store(MEMORY)&_pragma=wal_autocheckpoint("+strconv.Itoa(walBackstop)+")")
	if err != nil {
		return nil, fmt.Errorf("dispatcher: open state %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("dispatcher: open state %s: %w", path, err)
	}
	s := &state{db: db, conn: conn, st: make(map[string]*sql.Stmt)}
	if _, err := conn.ExecContext(ctx, schema); err != nil {
		s.close()
		return nil, fmt.Errorf("dispatcher: state schema in %s: %w", path, err)
	}
	if err := migrate(ctx, conn); err != nil {
		s.close()
		return nil, fmt.Errorf("dispatcher: state schema in %s: %w", path, err)
	}
	// Opened after the schema: the file is in WAL mode by now.
	ckpt, err := sql.Open("sqlite", base)
	if err != nil {
		s.close()
		return nil, fmt.Errorf("dispatcher: open state %s: %w", path, err)
	}
	ckpt.SetMaxOpenConns(1)
	if err := ckpt.PingContext(ctx); err != nil {
		ckpt.Close()
		s.close()
		return nil, fmt.Errorf("dispatcher: open state %s: %w", path, err)
	}
	s.startCheckpointer(ckpt)
	for name, q := range statements {
		st, err := conn.PrepareContext(ctx, q)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("dispatcher: prepare %s: %w", name, err)
		}
		s.st[name] = st
	}
	return s, nil
}

func (s *state) close() error {
	var cerr error
	if s.ckpt != nil {
		s.ckptStop()
		<-s.ckptDone
		cerr = s.ckpt.Close()
	}
	for _, st := range s.st {
		st.Close()
	}
	var err error
	if s.conn != nil {
		err = s.conn.Close()
	}
	return errors.Join(cerr, err, s.db.Close(), s.lock.release())
}

// startCheckpointer runs the checkpointer goroutine on its own connection
// until close: after a commit, at most every ckptEvery, it checkpoints
// what the log holds that no reader needs (PASSIVE). A failed checkpoint
// loses nothing (the log still holds the pages) and is tried again after
// the next commit; the committing connection's backstop bounds the log.
func (s *state) startCheckpointer(db *sql.DB) {
	ctx, stop := context.WithCancel(context.Background())
	s.ckpt, s.ckptStop = db, stop
	s.ckptKick = make(chan struct{}, 1)
	s.ckptDone = make(chan struct{})
	go func() {
		defer close(s.ckptDone)
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.ckptKick:
			}
			var busy, logPages, done int
			// Errors are ignored on purpose; see above.
			_ = db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logPages, &done)
			t.Reset(ckptEvery)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

func (s *state) begin(ctx context.Context) error {
	if s.inTx {
		return nil
	}
	if _, err := s.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("dispatcher: state begin: %w", err)
	}
	s.inTx, s.txStart = true, time.Now()
	return nil
}

func (s *state) commit(ctx context.Context) error {
	if !s.inTx {
		return nil
	}
	s.inTx = false
	if _, err := s.conn.ExecContext(ctx, "COMMIT"); err != nil {
		s.conn.ExecContext(context.Background(), "ROLLBACK")
		return fmt.Errorf("dispatcher: state commit: %w", err)
	}
	s.commits++
	select {
	case s.ckptKick <- struct{}{}:
	default:
	}
	return nil
}

// stmtN returns the statement name for n rows (or values), built by
// sqlFor and prepared on first use. Batched lookups and inserts take a
// different number of rows each time, up to a small bound, so the set of
// statements stays small.
func (s *state) stmtN(ctx context.Context, name string, n int, sqlFor func(n int) string) (*sql.Stmt, error) {
	key := name + "/" + strconv.Itoa(n)
	if st := s.st[key]; st != nil {
		return st, nil
	}
	st, err := s.conn.PrepareContext(ctx, sqlFor(n))
	if err != nil {
		return nil, fmt.Errorf("dispatcher: prepare %s: %w", key, err)
	}
	s.st[key] = st
	return st, nil
}

func (s *state) exec(ctx context.Context, name string, args ...any) (sql.Result, error) {
	r, err := s.st[name].ExecContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: state %s: %w", name, err)
	}
	return r, nil
}

func (s *state) row(ctx context.Context, name string, args ...any) *sql.Row {
	return s.st[name].QueryRowContext(ctx, args...)
}

func (s *state) query(ctx context.Context, name string, args ...any) (*sql.Rows, error) {
	rows, err := s.st[name].QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: state %s: %w", name, err)
	}
	return rows, nil
}

func (s *state) meta(ctx context.Context, key string) (int64, error) {
	var v int64
	err := s.row(ctx, "metaGet", key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("dispatcher: state meta %s: %w", key, err)
	}
	return v, nil
}

func (s *state) setMeta(ctx context.Context, key string, v int64) error {
	_, err := s.exec(ctx, "metaSet", key, v)
	return err
}

// scalar runs a one-value query outside the prepared set (startup and
// summary only).
func (s *state) scalar(ctx context.Context, q string, args ...any) (int64, error) {
	var v sql.NullInt64
	if err := s.conn.QueryRowContext(ctx, q, args...).Scan(&v); err != nil {
		return 0, fmt.Errorf("dispatcher: state %q: %w", q, err)
	}
	return v.Int64, nil
}

var errNoRows = sql.ErrNoRows

// rollback abandons the open transaction, if any.
func (s *state) rollback() {
	if !s.inTx {
		return
	}
	s.inTx = false
	s.conn.ExecContext(context.Background(), "ROLLBACK")
}

// stateMigrations bring a state written by an earlier build up to this
// build's: entry i moves it from PRAGMA user_version i to i+1. Append
// only; never edit one that was released. schema (CREATE TABLE IF NOT
// EXISTS) makes a new file whole before they run, and a file written
// before the version was kept has some of their columns, so every step
// adds only what is missing.
var stateMigrations = []func(ctx context.Context, conn *sql.Conn) error{
	// 1: the validators of a page's last good fetch (refresh.go)
	addColumns("seen", "etag TEXT NOT NULL DEFAULT ''", "last_modified TEXT NOT NULL DEFAULT ''"),
	// 2: failed fetches of a page in a row, across runs (retry.go)
	addColumns("seen", "attempts INTEGER NOT NULL DEFAULT 0"),
	// 3: malformed input lines kept in the store for export (which are
	// there, and their place in the input order); the pages a record
	// refused because a match key disagreed, and the records whose outcome
	// the store holds (outcomes.go)
	createTables(
		`CREATE TABLE IF NOT EXISTS malformed (
			id  TEXT PRIMARY KEY,
			seq INTEGER NOT NULL
		) WITHOUT ROWID`,
		`CREATE TABLE IF NOT EXISTS refusals (
			record_id    TEXT NOT NULL,
			page         TEXT NOT NULL,
			field        TEXT NOT NULL,
			page_value   TEXT NOT NULL,
			record_value TEXT NOT NULL,
			PRIMARY KEY (record_id, page)
		) WITHOUT ROWID`,
		`CREATE TABLE IF NOT EXISTS outcomes (
			record_id TEXT PRIMARY KEY
		) WITHOUT ROWID`),
}

// createTables is a migration creating tables (CREATE TABLE IF NOT EXISTS
// statements).
func createTables(stmts ...string) func(context.Context, *sql.Conn) error {
	return func(ctx context.Context, conn *sql.Conn) error {
		for _, q := range stmts {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}
}

// migrate runs the migrations a state lacks, in one transaction, and
// refuses a state written by a newer build.
func migrate(ctx context.Context, conn *sql.Conn) (err error) {
	var v int
	if err := conn.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case v > len(stateMigrations):
		return fmt.Errorf("schema version %d is newer than this build's %d", v, len(stateMigrations))
	case v == len(stateMigrations):
		return nil
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer func() {
		if err != nil {
			conn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	for ; v < len(stateMigrations); v++ {
		if err := stateMigrations[v](ctx, conn); err != nil {
			return fmt.Errorf("migrate to version %d: %w", v+1, err)
		}
	}
	// PRAGMA takes no bound parameters; v is our own integer.
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, v)); err != nil {
		return fmt.Errorf("set schema version: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// addColumns is a migration adding columns (each "name TYPE ...") to
// table, those it does not have yet.
func addColumns(table string, cols ...string) func(context.Context, *sql.Conn) error {
	return func(ctx context.Context, conn *sql.Conn) error {
		have := make(map[string]bool)
		rows, err := conn.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, table)
		if err != nil {
			return err
		}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				rows.Close()
				return err
			}
			have[name] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, col := range cols {
			name, _, _ := strings.Cut(col, " ")
			if have[name] {
				continue
			}
			if _, err := conn.ExecContext(ctx, `ALTER TABLE `+table+` ADD COLUMN `+col); err != nil {
				return fmt.Errorf("add %s.%s: %w", table, name, err)
			}
		}
		return nil
	}
}
