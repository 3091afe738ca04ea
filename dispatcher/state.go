package dispatcher

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"backfill/sqlitedb"
)

// Task states in the urls table. A lease lives in the Dispatcher's memory
// only: a task out on lease is queued as far as the state goes, which is
// what it becomes when a dispatcher restarts. (Writing the lease cost a
// statement per dispatched task and bought nothing.)
const (
	stateQueued  = 0
	stateLeased  = 1 // written by earlier builds; New queues such tasks again
	stateDone    = 2
	stateDropped = 3 // every record that wanted it is complete, or the frontier pruned it (score.go)
)

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
	q       stmts
	n       map[string]*sql.Stmt // statements of n rows, see stmtN
	inTx    bool
	txStart time.Time // when the open transaction began
	// txChanges is the connection's total_changes() when the open
	// transaction began (changed).
	txChanges int64
	commits   int64 // transactions committed, for the log
	// metaSet holds the meta values setMeta wrote (committed, or in the
	// open transaction; a rollback forgets them all), so that a commit
	// writes only the counters that changed.
	metaSet map[string]int64

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
	// stateCacheKiB is SQLite's page cache of the state connection. Its
	// pages cost about twice their size in memory, outside Go's heap: 32
	// MiB took 57 MiB of a 10,000-host crawl's RSS, and loaded 1M records
	// no faster than 8 MiB (BENCHMARKS.md, "The hosts are the limit").
	stateCacheKiB = 8 << 10
)

// stmts are the state's prepared statements, one field each, prepared by
// openState from stmtSQL.
type stmts struct {
	metaGet, metaSet *sql.Stmt

	recSeeds, recGet, recFirst       *sql.Stmt
	targetSets, targetSetIns         *sql.Stmt
	badAt, badConverted, badTaken    *sql.Stmt
	badIns, refusalIns, urlRecordIDs *sql.Stmt
	beyondKnown, beyondPut           *sql.Stmt

	urlDrop, urlCached, urlValid, urlState              *sql.Stmt
	urlRequeue, urlRender, urlDepth, urlWanted          *sql.Stmt
	urlRecords, recordTasks, ownLinks, linkPut, linkVia *sql.Stmt
	refill, refillAfter, failedPages, urlScore          *sql.Stmt
	hostGet                                             *sql.Stmt
	priorPut, priorGet, priorOpen, priorClose           *sql.Stmt
	filledRecords, fpIns, fpAll                         *sql.Stmt
	loadGet, loadNum, loadPut                           *sql.Stmt
	obNext, obAck, obRefuse, obCount                    *sql.Stmt
}

// stmtSQL lists every statement of stmts with its SQL.
func (q *stmts) stmtSQL() []struct {
	dst **sql.Stmt
	sql string
} {
	return []struct {
		dst **sql.Stmt
		sql string
	}{
		{&q.metaGet, `SELECT value FROM meta WHERE key = ?`},
		{&q.metaSet, `INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`},

		{&q.recSeeds, `SELECT seq, links FROM records WHERE seq > ? AND complete = 0 AND links IS NOT NULL ORDER BY seq LIMIT ?`},
		{&q.recGet, `SELECT id, own, targets, filled, complete, queued FROM records WHERE seq = ?`},
		{&q.recFirst, `SELECT file, line FROM records WHERE id = ?`},
		{&q.targetSets, `SELECT id, names FROM target_sets`},
		{&q.targetSetIns, `INSERT INTO target_sets(names) VALUES(?)`},
		// Malformed lines (loadBatch): the one of a file at a line, one
		// of a state converted from version 3 by its id, whether an id is
		// taken.
		{&q.badAt, `SELECT id FROM malformed WHERE file = ? AND line = ?`},
		{&q.badConverted, `SELECT 1 FROM malformed WHERE id = ? AND file = 0`},
		{&q.badTaken, `SELECT EXISTS(SELECT 1 FROM records WHERE id = ?1) OR EXISTS(SELECT 1 FROM malformed WHERE id = ?1)`},
		{&q.badIns, `INSERT INTO malformed(id, seq, file, line) VALUES(?, ?, ?, ?)`},
		{&q.refusalIns, `INSERT INTO refusals(rec, page, field, page_value, record_value) VALUES(?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`},
		// A link a record left at the depth limit (outcomes.go): whether
		// the record reached it already or it failed, and keeping it.
		{&q.beyondKnown, `SELECT EXISTS(SELECT 1 FROM links WHERE url = ?1 AND rec = ?2)
			OR EXISTS(SELECT 1 FROM urls WHERE key = ?1 AND class != '')`},
		{&q.beyondPut, `INSERT INTO beyond(rec, url, key, depth) VALUES(?, ?, ?, ?)
			ON CONFLICT(rec) DO UPDATE SET url = excluded.url, key = excluded.key, depth = excluded.depth
			WHERE excluded.depth > beyond.depth`},
		{&q.urlRecordIDs, `SELECT r.id, l.depth FROM links l JOIN records r ON r.seq = l.rec WHERE l.url = ? ORDER BY l.rec`},

		{&q.urlDrop, `UPDATE urls SET state = 3, url = NULL WHERE key = ?`},
		{&q.urlCached, `SELECT class, result, etag, last_modified FROM urls WHERE key = ?`},
		{&q.urlValid, `SELECT etag, last_modified FROM urls WHERE key = ? AND class = '' AND result IS NOT NULL`},
		{&q.urlRequeue, `UPDATE urls SET state = 0, seq = ?, depth = ?, url = COALESCE(?, url) WHERE key = ?
			RETURNING url, matched, priority, render, score`},
		{&q.urlRender, `UPDATE urls SET state = 0, render = 1, seq = ?, url = COALESCE(url, ?) WHERE key = ?`},
		{&q.urlState, `SELECT state FROM urls WHERE key = ?`},
		{&q.urlDepth, `UPDATE urls SET depth = ? WHERE key = ? AND depth > ?`},
		{&q.urlWanted, `SELECT EXISTS(SELECT 1 FROM links l JOIN records r ON r.seq = l.rec WHERE l.url = ? AND r.complete = 0)`},
		{&q.urlRecords, `SELECT rec, depth FROM links WHERE url = ? ORDER BY rec`},
		{&q.linkVia, `INSERT INTO links(url, rec, depth, via) VALUES(?, ?, ?, ?)
			ON CONFLICT(url, rec) DO UPDATE SET depth = excluded.depth, via = excluded.via WHERE excluded.depth < links.depth`},
		{&q.recordTasks, `SELECT l.url, u.url, u.depth FROM links l JOIN urls u ON u.key = l.url WHERE l.rec = ? AND u.state = 0`},
		{&q.ownLinks, `SELECT links FROM records WHERE seq = ?`},
		{&q.linkPut, `INSERT INTO links(url, rec, depth) VALUES(?, ?, ?) ON CONFLICT(url, rec) DO UPDATE SET depth = excluded.depth WHERE excluded.depth < links.depth`},
		// failedPages are the pages an earlier process failed to fetch, in
		// key order after a place (the urls_failed index holds them),
		// with whether an incomplete record still wants each (retry.go).
		{&q.failedPages, `SELECT key, depth, class, status, attempts,
			EXISTS (SELECT 1 FROM links l JOIN records r ON r.seq = l.rec WHERE l.url = urls.key AND r.complete = 0)
			FROM urls INDEXED BY urls_failed
			WHERE state = 2 AND class != '' AND key > ?2 AND last_crawled < ?1 AND url IS NOT NULL
			ORDER BY key LIMIT ?3`},
		{&q.refill, `SELECT key, url, depth, matched, priority, render, seq, hops, score FROM urls WHERE state = 0 ORDER BY priority DESC, score DESC, depth, seq LIMIT ?`},
		// refillAfter reads on after a place in the order (priority,
		// score, depth, seq); its terms use only the columns of
		// urls_ready, so the rows before the place are passed over in the
		// index.
		{&q.refillAfter, `SELECT key, url, depth, matched, priority, render, seq, hops, score FROM urls WHERE state = 0
			AND (priority < ?1 OR (priority = ?1 AND (score < ?2 OR (score = ?2 AND (depth > ?3 OR (depth = ?3 AND seq > ?4))))))
			ORDER BY priority DESC, score DESC, depth, seq LIMIT ?5`},
		{&q.urlScore, `UPDATE urls SET score = ? WHERE key = ?`},
		{&q.hostGet, `SELECT queued FROM hosts WHERE host = ?`},

		{&q.priorPut, `INSERT INTO prior(rec, field, value, open) VALUES(?, ?, ?, 1) ON CONFLICT(rec, field) DO UPDATE SET value = excluded.value, open = 1`},
		{&q.priorGet, `SELECT field, value FROM prior WHERE rec = ? AND open = 1`},
		{&q.priorOpen, `SELECT rec, field FROM prior WHERE open = 1 ORDER BY rec, field LIMIT ?`},
		{&q.priorClose, `UPDATE prior SET open = 0 WHERE rec = ? AND field = ?`},
		{&q.filledRecords, `SELECT seq FROM records WHERE nfilled > 0 AND seq > ? ORDER BY seq LIMIT ?`},
		{&q.fpIns, `INSERT INTO fingerprints(url, exact, sim, words, duplicate_of) VALUES(?, ?, ?, ?, ?)`},
		{&q.fpAll, `SELECT url, exact, sim, words FROM fingerprints ORDER BY seq`},
		{&q.loadGet, `SELECT num, size, mtime, offset, line, records, bad, fresh, unfillable, done FROM loads WHERE path = ?`},
		{&q.loadNum, `SELECT COALESCE(MAX(num), 0) + 1 FROM loads`},
		{&q.loadPut, `INSERT INTO loads(path, num, size, mtime, offset, line, records, bad, fresh, unfillable, done) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT(path) DO UPDATE SET size = excluded.size, mtime = excluded.mtime, offset = excluded.offset,
				line = excluded.line, records = excluded.records, bad = excluded.bad, fresh = excluded.fresh,
				unfillable = excluded.unfillable, done = excluded.done`},

		{&q.obNext, `SELECT record_id, field, value, gen FROM outbox WHERE refused = 0 ORDER BY gen LIMIT ?`},
		{&q.obAck, `DELETE FROM outbox WHERE record_id = ? AND field = ? AND gen = ?`},
		{&q.obRefuse, `UPDATE outbox SET refused = 1 WHERE record_id = ? AND gen <= ?`},
		{&q.obCount, `SELECT COALESCE(SUM(refused = 0), 0), COALESCE(SUM(refused = 1), 0) FROM outbox`},
	}
}

func openState(ctx context.Context, dir string) (*state, error) {
	if dir == "" {
		return nil, errors.New("dispatcher: no state directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dispatcher: state directory: %w", err)
	}
	path := filepath.Join(dir, "state.db")
	f, err := sqlitedb.Parse(path)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: open state: %w", err)
	}
	db, err := sql.Open("sqlite", f.DSN(append([]string{
		"cache_size(-" + strconv.Itoa(stateCacheKiB) + ")", "temp_store(MEMORY)", "foreign_keys(OFF)",
		"wal_autocheckpoint(" + strconv.Itoa(walBackstop) + ")",
	}, sqlitedb.Writer...), sqlitedb.Immediate))
	if err != nil {
		return nil, fmt.Errorf("dispatcher: open state %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := sqlitedb.Migrate(ctx, db, stateSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("dispatcher: state schema in %s: %w", path, err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("dispatcher: open state %s: %w", path, err)
	}
	s := &state{db: db, conn: conn, n: make(map[string]*sql.Stmt)}
	// Opened after the schema: the file is in WAL mode by now.
	ckpt, err := sql.Open("sqlite", f.DSN(sqlitedb.Writer, nil))
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
	for _, p := range s.q.stmtSQL() {
		st, err := conn.PrepareContext(ctx, p.sql)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("dispatcher: prepare %q: %w", firstLine(p.sql), err)
		}
		*p.dst = st
	}
	return s, nil
}

func firstLine(q string) string {
	l, _, _ := strings.Cut(q, "\n")
	return l
}

func (s *state) close() error {
	var cerr error
	if s.ckpt != nil {
		s.ckptStop()
		<-s.ckptDone
		cerr = s.ckpt.Close()
	}
	for _, p := range s.q.stmtSQL() {
		if *p.dst != nil {
			(*p.dst).Close()
		}
	}
	for _, st := range s.n {
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
	if err := s.conn.QueryRowContext(ctx, "SELECT total_changes()").Scan(&s.txChanges); err != nil {
		s.rollback()
		return fmt.Errorf("dispatcher: state begin: %w", err)
	}
	return nil
}

// changed reports whether the open transaction changed any row so far.
func (s *state) changed(ctx context.Context) (bool, error) {
	var n int64
	if err := s.conn.QueryRowContext(ctx, "SELECT total_changes()").Scan(&n); err != nil {
		return false, fmt.Errorf("dispatcher: state: %w", err)
	}
	return n != s.txChanges, nil
}

func (s *state) commit(ctx context.Context) error {
	if !s.inTx {
		return nil
	}
	changed, err := s.changed(ctx)
	if err != nil {
		s.rollback()
		return err
	}
	s.inTx = false
	if _, err := s.conn.ExecContext(ctx, "COMMIT"); err != nil {
		s.conn.ExecContext(context.Background(), "ROLLBACK")
		clear(s.metaSet)
		return fmt.Errorf("dispatcher: state commit: %w", err)
	}
	if !changed {
		return nil // nothing for the log or the checkpointer
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
	if st := s.n[key]; st != nil {
		return st, nil
	}
	st, err := s.conn.PrepareContext(ctx, sqlFor(n))
	if err != nil {
		return nil, fmt.Errorf("dispatcher: prepare %s: %w", key, err)
	}
	s.n[key] = st
	return st, nil
}

// exec runs a prepared statement; its error says it came from the state.
func exec(ctx context.Context, st *sql.Stmt, args ...any) (sql.Result, error) {
	r, err := st.ExecContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: state: %w", err)
	}
	return r, nil
}

// column reads a query's one column into a slice and closes its rows:
// ids, err := column[string](conn.QueryContext(…)).
func column[T any](rows *sql.Rows, err error) ([]T, error) {
	if err != nil {
		return nil, fmt.Errorf("dispatcher: state: %w", err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("dispatcher: state: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dispatcher: state: %w", err)
	}
	return out, nil
}

// query runs a prepared query.
func query(ctx context.Context, st *sql.Stmt, args ...any) (*sql.Rows, error) {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: state: %w", err)
	}
	return rows, nil
}

func (s *state) meta(ctx context.Context, key string) (int64, error) {
	var v int64
	err := s.q.metaGet.QueryRowContext(ctx, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("dispatcher: state meta %s: %w", key, err)
	}
	return v, nil
}

// setMeta writes meta key's value, unless setMeta wrote that value last.
func (s *state) setMeta(ctx context.Context, key string, v int64) error {
	if old, ok := s.metaSet[key]; ok && old == v {
		return nil
	}
	if _, err := exec(ctx, s.q.metaSet, key, v); err != nil {
		return err
	}
	if s.metaSet == nil {
		s.metaSet = make(map[string]int64)
	}
	s.metaSet[key] = v
	return nil
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
	clear(s.metaSet)
}
