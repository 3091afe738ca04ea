package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"backfill/sqlitedb" // also registers the "sqlite" database/sql driver
)

// sqliteSchema lists the migrations: entry i moves a file from user_version i
// to i+1. Append only; never edit a released entry.
var sqliteSchema = []sqlitedb.Migration{
	{SQL: []string{
		`CREATE TABLE IF NOT EXISTS records (
			id          TEXT    NOT NULL UNIQUE,
			seq         INTEGER NOT NULL,
			fields      TEXT    NOT NULL, -- JSON object: field -> value
			field_order TEXT    NOT NULL, -- JSON array: the input's column order
			links       TEXT    NOT NULL  -- JSON array of URLs
		)`,
		`CREATE INDEX IF NOT EXISTS records_by_seq ON records (seq, id)`,
		`CREATE TABLE IF NOT EXISTS fields (
			record    TEXT    NOT NULL REFERENCES records (id) ON DELETE CASCADE,
			field     TEXT    NOT NULL,
			value     TEXT    NOT NULL,
			source    TEXT    NOT NULL,
			mapping   TEXT    NOT NULL,
			depth     INTEGER NOT NULL,
			at        TEXT    NOT NULL, -- fixed-width UTC, see formatTime
			conflicts TEXT    NOT NULL, -- JSON array of conflicts
			PRIMARY KEY (record, field)
		) WITHOUT ROWID`,
		`CREATE TABLE IF NOT EXISTS robots (
			host       TEXT    NOT NULL UNIQUE,
			status     INTEGER NOT NULL,
			body       BLOB    NOT NULL,
			fetched_at TEXT    NOT NULL,
			expires    TEXT    NOT NULL
		)`,
		`CREATE TABLE IF NOT EXISTS last_crawl (
			host TEXT NOT NULL UNIQUE,
			at   TEXT NOT NULL
		)`,
	}},
	{SQL: []string{
		// history: JSON array of the values a refresh replaced
		`ALTER TABLE fields ADD COLUMN history TEXT NOT NULL DEFAULT '[]'`,
	}},
	{SQL: []string{
		`CREATE TABLE IF NOT EXISTS soft404 (
			host      TEXT NOT NULL UNIQUE,
			print     BLOB NOT NULL, -- empty: the host answers missing paths properly
			probed_at TEXT NOT NULL,
			expires   TEXT NOT NULL
		)`,
	}},
	{SQL: []string{
		// host surveys' result rows (survey.go)
		`CREATE TABLE IF NOT EXISTS survey_rows (
			survey TEXT NOT NULL,
			key    TEXT NOT NULL,
			at     TEXT NOT NULL, -- fixed-width UTC, see formatTime
			doc    TEXT NOT NULL, -- the row as JSON
			PRIMARY KEY (survey, key)
		) WITHOUT ROWID`,
	}},
	{SQL: []string{
		// the input exactly as read (see Record.Raw), its format, and
		// the reason of a malformed line
		`ALTER TABLE records ADD COLUMN format TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE records ADD COLUMN raw BLOB`,
		`ALTER TABLE records ADD COLUMN error TEXT NOT NULL DEFAULT ''`,
		// the mapping field's declared type
		`ALTER TABLE fields ADD COLUMN type TEXT NOT NULL DEFAULT ''`,
		// why a record was left incomplete: JSON of an Outcome
		`CREATE TABLE IF NOT EXISTS outcomes (
			record  TEXT NOT NULL PRIMARY KEY REFERENCES records (id) ON DELETE CASCADE,
			outcome TEXT NOT NULL
		) WITHOUT ROWID`,
	}},
	{SQL: []string{
		// the DNS cache supervisors share (sqlite_names.go): the
		// shape resolver.SQLStore keeps, answer being its JSON
		`CREATE TABLE IF NOT EXISTS dns (
			name    TEXT NOT NULL PRIMARY KEY,
			answer  TEXT NOT NULL,
			at      TEXT NOT NULL,
			expires TEXT NOT NULL
		) WITHOUT ROWID`,
	}},
	{SQL: []string{
		// where a value came from, beyond its page: the redirects that
		// led there (JSON array) and the member that fetched it
		`ALTER TABLE fields ADD COLUMN via TEXT NOT NULL DEFAULT '[]'`,
		`ALTER TABLE fields ADD COLUMN member TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE fields ADD COLUMN member_key TEXT NOT NULL DEFAULT ''`,
	}},
	// the pages the crawl keeps (sqlite_pages.go)
	{SQL: append(append([]string(nil), pagesSchema[0]...), pagesSchema[1]...)},
	{SQL: []string{
		// the certificate problem of a value's page, fetched under
		// --insecure-tls
		`ALTER TABLE fields ADD COLUMN tls_error TEXT NOT NULL DEFAULT ''`,
	}},
}

// sqliteStore is the embedded backend. w is a single connection that every
// write goes through, so writers of one process queue in Go instead of
// contending for SQLite's file lock; r is a pool of read-only connections,
// which WAL mode lets read while w writes.
//
// The statements of the hot paths are prepared once: database/sql keeps a
// prepared statement per connection and reuses it (inside a transaction
// too, through Tx.StmtContext), so no call pays for parsing its SQL again.
type sqliteStore struct {
	w, r *sql.DB
	sqlitePages
	ws        writeStmts
	rs        readStmts
	closeOnce sync.Once
	closeErr  error
}

// writeStmts are prepared on the writer, readStmts on the reader pool.
type writeStmts struct {
	putRecord, putRecords, recordExists, setField, clearField, putRobots, putLastCrawl, putSoft404, putOutcome, delOutcome *sql.Stmt
}

type readStmts struct {
	robots, lastCrawl, soft404 *sql.Stmt
}

var writeSQL = map[string]string{
	// ON CONFLICT DO UPDATE rather than INSERT OR REPLACE: a replace
	// deletes the row first, and the cascade would drop its found fields.
	"putRecord": `INSERT INTO records (id, seq, fields, field_order, links, format, raw, error)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, fields = excluded.fields,
				field_order = excluded.field_order, links = excluded.links,
				format = excluded.format, raw = excluded.raw, error = excluded.error`,
	// putRecords is putRecord for putChunk records at once: one statement
	// a row cost as much as the rest of a record's intake.
	"putRecords": `INSERT INTO records (id, seq, fields, field_order, links, format, raw, error)
			VALUES ` + strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?), ", putChunk-1) + `(?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, fields = excluded.fields,
				field_order = excluded.field_order, links = excluded.links,
				format = excluded.format, raw = excluded.raw, error = excluded.error`,
	"recordExists": `SELECT 1 FROM records WHERE id = ?`,
	"clearField":   `DELETE FROM fields WHERE record = ? AND field = ?`,
	"setField": `INSERT INTO fields (record, field, value, source, mapping, depth, at, conflicts, history, type, via, member, member_key, tls_error)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (record, field) DO UPDATE SET value = excluded.value, source = excluded.source,
				mapping = excluded.mapping, depth = excluded.depth, at = excluded.at, conflicts = excluded.conflicts,
				history = excluded.history, type = excluded.type, via = excluded.via, member = excluded.member,
				member_key = excluded.member_key, tls_error = excluded.tls_error`,
	// Only for a record the store has: an outcome never creates one.
	"putOutcome": `INSERT INTO outcomes (record, outcome) SELECT id, ? FROM records WHERE id = ?
			ON CONFLICT (record) DO UPDATE SET outcome = excluded.outcome`,
	"delOutcome": `DELETE FROM outcomes WHERE record = ?`,
	"putRobots": `INSERT INTO robots (host, status, body, fetched_at, expires) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (host) DO UPDATE SET status = excluded.status, body = excluded.body,
				fetched_at = excluded.fetched_at, expires = excluded.expires`,
	// formatTime is fixed width, so max() on the text is max() on the time.
	"putLastCrawl": `INSERT INTO last_crawl (host, at) VALUES (?, ?)
			ON CONFLICT (host) DO UPDATE SET at = max(at, excluded.at)`,
	"putSoft404": `INSERT INTO soft404 (host, print, probed_at, expires) VALUES (?, ?, ?, ?)
			ON CONFLICT (host) DO UPDATE SET print = excluded.print,
				probed_at = excluded.probed_at, expires = excluded.expires`,
}

var readSQL = map[string]string{
	"robots":    `SELECT status, body, fetched_at, expires FROM robots WHERE host = ?`,
	"lastCrawl": `SELECT at FROM last_crawl WHERE host = ?`,
	"soft404":   `SELECT print, probed_at, expires FROM soft404 WHERE host = ?`,
}

// prepare prepares every statement of the store, closing what it prepared
// on failure.
func (s *sqliteStore) prepare(ctx context.Context) error {
	var done []*sql.Stmt
	prep := func(db *sql.DB, dst **sql.Stmt, name, q string) error {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %s: %w", name, err)
		}
		*dst = st
		done = append(done, st)
		return nil
	}
	err := errors.Join(
		prep(s.w, &s.ws.putRecord, "putRecord", writeSQL["putRecord"]),
		prep(s.w, &s.ws.putRecords, "putRecords", writeSQL["putRecords"]),
		prep(s.w, &s.ws.recordExists, "recordExists", writeSQL["recordExists"]),
		prep(s.w, &s.ws.clearField, "clearField", writeSQL["clearField"]),
		prep(s.w, &s.ws.setField, "setField", writeSQL["setField"]),
		prep(s.w, &s.ws.putRobots, "putRobots", writeSQL["putRobots"]),
		prep(s.w, &s.ws.putLastCrawl, "putLastCrawl", writeSQL["putLastCrawl"]),
		prep(s.w, &s.ws.putSoft404, "putSoft404", writeSQL["putSoft404"]),
		prep(s.w, &s.ws.putOutcome, "putOutcome", writeSQL["putOutcome"]),
		prep(s.w, &s.ws.delOutcome, "delOutcome", writeSQL["delOutcome"]),
		prep(s.r, &s.rs.robots, "robots", readSQL["robots"]),
		prep(s.r, &s.rs.lastCrawl, "lastCrawl", readSQL["lastCrawl"]),
		prep(s.r, &s.rs.soft404, "soft404", readSQL["soft404"]),
	)
	if err != nil {
		for _, st := range done {
			st.Close()
		}
	}
	return err
}

func (s *sqliteStore) closeStmts() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.ws.putRecord, s.ws.putRecords, s.ws.recordExists, s.ws.setField, s.ws.putRobots,
		s.ws.putLastCrawl, s.ws.putSoft404, s.ws.putOutcome, s.ws.delOutcome, s.rs.robots, s.rs.lastCrawl, s.rs.soft404} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

var _ Store = (*sqliteStore)(nil)
var _ FieldBatcher = (*sqliteStore)(nil)

// openSQLite opens (creating if missing) the SQLite file named by uri, a file
// path or a "file:" URI, and brings its schema up to date.
func openSQLite(ctx context.Context, uri string) (Store, error) {
	f, err := sqlitedb.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite: %w", err)
	}
	path := f.Path
	// The schema must exist (and the file be in WAL mode) before any reader
	// connects, so the writer goes first.
	w, err := openSQLiteWriter(ctx, f, sqliteSchema)
	if err != nil {
		return nil, err
	}

	r, err := sql.Open("sqlite", f.DSN(append([]string{"foreign_keys(1)"}, sqlitedb.Reader...), nil))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	s := &sqliteStore{w: w, r: r, sqlitePages: sqlitePages{w: w, r: r}}
	if err := s.prepare(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	return s, nil
}

func (s *sqliteStore) Backend() string { return "sqlite" }

func (s *sqliteStore) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.closeStmts(), s.r.Close(), s.w.Close())
	})
	return s.closeErr
}

func (s *sqliteStore) PutRecords(ctx context.Context, recs []Record) error {
	// Validate and encode everything first so that a bad record costs no
	// lock time and leaves nothing half-written.
	type row struct{ id, fields, order, links string }
	rows := make([]row, len(recs))
	for i, rec := range recs {
		if rec.ID == "" {
			return fmt.Errorf("store: put records: record %d (seq %d): empty id", i, rec.Seq)
		}
		f, o, l, err := encodeRecordColumns(rec)
		if err != nil {
			return fmt.Errorf("store: put records: record %q: %w", rec.ID, err)
		}
		rows[i] = row{rec.ID, f, o, l}
	}
	if len(recs) == 0 {
		return nil
	}
	return s.write(ctx, "put records", func(tx *sql.Tx) error {
		args := make([]any, 0, putChunk*8)
		add := func(i int) {
			r, rec := rows[i], recs[i]
			args = append(args, r.id, rec.Seq, r.fields, r.order, r.links, rec.Format, rawColumn(rec.Raw), rec.Error)
		}
		i := 0
		if len(rows) >= putChunk {
			chunk := tx.StmtContext(ctx, s.ws.putRecords)
			for ; i+putChunk <= len(rows); i += putChunk {
				args = args[:0]
				for j := i; j < i+putChunk; j++ {
					add(j)
				}
				if _, err := chunk.ExecContext(ctx, args...); err != nil {
					return fmt.Errorf("records %q to %q: %w", rows[i].id, rows[i+putChunk-1].id, err)
				}
			}
		}
		one := tx.StmtContext(ctx, s.ws.putRecord)
		for ; i < len(rows); i++ {
			args = args[:0]
			add(i)
			if _, err := one.ExecContext(ctx, args...); err != nil {
				return fmt.Errorf("record %q: %w", rows[i].id, err)
			}
		}
		return nil
	})
}

// putChunk is how many records one putRecords statement inserts.
const putChunk = 64

func (s *sqliteStore) SetFields(ctx context.Context, recordID string, vals []Value) error {
	rows, err := encodeValues(recordID, vals)
	if err != nil {
		return err
	}
	err = s.write(ctx, fmt.Sprintf("set fields on record %q", recordID), func(tx *sql.Tx) error {
		return s.setFields(ctx, tx, recordID, vals, rows)
	})
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: set fields on record %q", ErrNotFound, recordID)
	}
	return err
}

// SetFieldsBatch is SetFields for many records in one transaction, so a
// batch costs one commit rather than one per record. A record the store
// does not have is left out and named in missing; the others are written.
func (s *sqliteStore) SetFieldsBatch(ctx context.Context, batch []RecordValues) (missing []string, err error) {
	rows := make([][]valueRow, len(batch))
	for i, rv := range batch {
		if rows[i], err = encodeValues(rv.ID, rv.Values); err != nil {
			return nil, err
		}
	}
	err = s.write(ctx, fmt.Sprintf("set fields on %d records", len(batch)), func(tx *sql.Tx) error {
		missing = missing[:0]
		for i, rv := range batch {
			err := s.setFields(ctx, tx, rv.ID, rv.Values, rows[i])
			if errors.Is(err, ErrNotFound) {
				missing = append(missing, rv.ID)
				continue
			}
			if err != nil {
				return fmt.Errorf("record %q: %w", rv.ID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return missing, nil
}

// valueRow is a Value's columns that need encoding.
type valueRow struct{ at, conflicts, history, via string }

func encodeValues(recordID string, vals []Value) ([]valueRow, error) {
	rows := make([]valueRow, len(vals))
	for i, v := range vals {
		if v.Field == "" {
			return nil, fmt.Errorf("store: set fields on record %q: value %d: empty field name", recordID, i)
		}
		c, err := encodeConflicts(v.Conflicts)
		if err != nil {
			return nil, fmt.Errorf("store: set fields on record %q: field %q: %w", recordID, v.Field, err)
		}
		at, err := formatTime(v.At)
		if err != nil {
			return nil, fmt.Errorf("store: set fields on record %q: field %q: %w", recordID, v.Field, err)
		}
		h, err := encodeHistory(v.History)
		if err != nil {
			return nil, fmt.Errorf("store: set fields on record %q: field %q: %w", recordID, v.Field, err)
		}
		via, err := json.Marshal(v.Via)
		if err != nil || v.Via == nil {
			via = []byte("[]")
		}
		rows[i] = valueRow{at, c, h, string(via)}
	}
	return rows, nil
}

// setFields writes one record's values in tx; ErrNotFound when the store
// does not have the record.
func (s *sqliteStore) setFields(ctx context.Context, tx *sql.Tx, recordID string, vals []Value, rows []valueRow) error {
	var one int
	err := tx.StmtContext(ctx, s.ws.recordExists).QueryRowContext(ctx, recordID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	if len(vals) == 0 {
		return nil
	}
	stmt := tx.StmtContext(ctx, s.ws.setField)
	for i, v := range vals {
		if v.Value == "" {
			if _, err := tx.StmtContext(ctx, s.ws.clearField).ExecContext(ctx, recordID, v.Field); err != nil {
				return fmt.Errorf("field %q: %w", v.Field, err)
			}
			continue
		}
		if _, err := stmt.ExecContext(ctx, recordID, v.Field, v.Value, v.Source, v.Mapping, v.Depth, rows[i].at, rows[i].conflicts, rows[i].history, v.Type,
			rows[i].via, v.Member, v.MemberKey, v.TLSError); err != nil {
			return fmt.Errorf("field %q: %w", v.Field, err)
		}
	}
	return nil
}

// write runs fn in one immediate transaction on the writer connection.
func (s *sqliteStore) write(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: %s: begin: %w", op, err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return fmt.Errorf("store: %s: %w", op, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: %s: commit: %w", op, err)
	}
	return nil
}

// The columns scanRecord and scanValue read, the record's with its
// outcome (records r LEFT JOIN outcomes o), the value's from fields f.
const (
	recordColumns = `r.id, r.seq, r.fields, r.field_order, r.links, r.format, r.raw, r.error, o.outcome`
	valueColumns  = `f.record, f.field, f.value, f.source, f.mapping, f.depth, f.at, f.conflicts, f.history, f.type, f.via, f.member, f.member_key, f.tls_error`
)

// scanRecord reads a row of recordColumns, Found left empty.
func scanRecord(row interface{ Scan(...any) error }) (Record, error) {
	var (
		rec                  Record
		fields, order, links string
		outcome              sql.NullString
	)
	if err := row.Scan(&rec.ID, &rec.Seq, &fields, &order, &links, &rec.Format, &rec.Raw, &rec.Error, &outcome); err != nil {
		return rec, err
	}
	if err := decodeRecordColumns(&rec, fields, order, links); err != nil {
		return rec, fmt.Errorf("record %q: %w", rec.ID, err)
	}
	if outcome.Valid {
		o, err := decodeOutcome(rec.ID, outcome.String)
		if err != nil {
			return rec, fmt.Errorf("record %q: column outcome: %w", rec.ID, err)
		}
		rec.Outcome = o
	}
	rec.Found = map[string]Value{}
	return rec, nil
}

// scanValue reads a row of valueColumns.
func scanValue(rows *sql.Rows) (string, Value, error) {
	var (
		id                  string
		v                   Value
		at, conflicts, hist string
		via                 string
	)
	if err := rows.Scan(&id, &v.Field, &v.Value, &v.Source, &v.Mapping, &v.Depth, &at, &conflicts, &hist, &v.Type,
		&via, &v.Member, &v.MemberKey, &v.TLSError); err != nil {
		return "", v, err
	}
	if via != "[]" {
		if err := json.Unmarshal([]byte(via), &v.Via); err != nil {
			return id, v, fmt.Errorf("record %q field %q: column via: %w", id, v.Field, err)
		}
	}
	var err error
	if v.At, err = parseTime(at); err != nil {
		return id, v, fmt.Errorf("record %q field %q: column at: %w", id, v.Field, err)
	}
	if v.Conflicts, err = decodeConflicts(conflicts); err != nil {
		return id, v, fmt.Errorf("record %q field %q: column conflicts: %w", id, v.Field, err)
	}
	if v.History, err = decodeHistory(hist); err != nil {
		return id, v, fmt.Errorf("record %q field %q: column history: %w", id, v.Field, err)
	}
	return id, v, nil
}

// Record reads one record and its found values in one read transaction.
func (s *sqliteStore) Record(ctx context.Context, id string) (Record, error) {
	var rec Record
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return rec, fmt.Errorf("store: record %q: begin: %w", id, err)
	}
	defer tx.Rollback()
	rec, err = scanRecord(tx.QueryRowContext(ctx, `SELECT `+recordColumns+`
		FROM records r LEFT JOIN outcomes o ON o.record = r.id WHERE r.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return rec, fmt.Errorf("%w: record %q", ErrNotFound, id)
	}
	if err != nil {
		return rec, fmt.Errorf("store: record %q: %w", id, err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+valueColumns+` FROM fields f WHERE f.record = ?`, id)
	if err != nil {
		return rec, fmt.Errorf("store: record %q: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		_, v, err := scanValue(rows)
		if err != nil {
			return rec, fmt.Errorf("store: %w", err)
		}
		rec.Found[v.Field] = v
	}
	if err := rows.Err(); err != nil {
		return rec, fmt.Errorf("store: record %q: %w", id, err)
	}
	return rec, nil
}

// Records walks records and fields side by side, both in (seq, id) order,
// inside one read transaction: one consistent snapshot, one row of each in
// memory at a time. WAL mode lets writers go on meanwhile, fn included.
func (s *sqliteStore) Records(ctx context.Context, fn func(Record) error) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("store: records: begin: %w", err)
	}
	defer tx.Rollback()

	recs, err := tx.QueryContext(ctx, `SELECT `+recordColumns+`
		FROM records r LEFT JOIN outcomes o ON o.record = r.id ORDER BY r.seq, r.id`)
	if err != nil {
		return fmt.Errorf("store: records: %w", err)
	}
	defer recs.Close()
	vals, err := tx.QueryContext(ctx, `SELECT `+valueColumns+`
		FROM records r JOIN fields f ON f.record = r.id ORDER BY r.seq, r.id`)
	if err != nil {
		return fmt.Errorf("store: records: %w", err)
	}
	defer vals.Close()

	var (
		pending   Value  // the next field row, not yet given to a record
		pendingID string // its record; "" when none is pending
	)
	nextVal := func() error {
		pendingID = ""
		if !vals.Next() {
			return vals.Err()
		}
		var err error
		pendingID, pending, err = scanValue(vals)
		return err
	}
	if err := nextVal(); err != nil {
		return fmt.Errorf("store: records: %w", err)
	}

	for recs.Next() {
		rec, err := scanRecord(recs)
		if err != nil {
			return fmt.Errorf("store: records: %w", err)
		}
		for pendingID == rec.ID {
			rec.Found[pending.Field] = pending
			if err := nextVal(); err != nil {
				return fmt.Errorf("store: records: %w", err)
			}
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	if err := recs.Err(); err != nil {
		return fmt.Errorf("store: records: %w", err)
	}
	return nil
}

func (s *sqliteStore) SetOutcomes(ctx context.Context, outs []Outcome) error {
	texts := make([]string, len(outs))
	for i, o := range outs {
		if o.Record == "" {
			return fmt.Errorf("store: set outcomes: outcome %d: empty record id", i)
		}
		if o.Reason == "" {
			continue
		}
		t, err := encodeOutcome(o)
		if err != nil {
			return fmt.Errorf("store: set outcomes: record %q: %w", o.Record, err)
		}
		texts[i] = t
	}
	if len(outs) == 0 {
		return nil
	}
	return s.write(ctx, fmt.Sprintf("set %d outcomes", len(outs)), func(tx *sql.Tx) error {
		put, del := tx.StmtContext(ctx, s.ws.putOutcome), tx.StmtContext(ctx, s.ws.delOutcome)
		for i, o := range outs {
			var err error
			if o.Reason == "" {
				_, err = del.ExecContext(ctx, o.Record)
			} else {
				_, err = put.ExecContext(ctx, texts[i], o.Record)
			}
			if err != nil {
				return fmt.Errorf("record %q: %w", o.Record, err)
			}
		}
		return nil
	})
}

func (s *sqliteStore) Robots(ctx context.Context, host string) (Robots, error) {
	var (
		r                  Robots
		fetchedAt, expires string
	)
	err := s.rs.robots.QueryRowContext(ctx, host).Scan(&r.Status, &r.Body, &fetchedAt, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return Robots{}, fmt.Errorf("%w: robots for %s", ErrNotFound, host)
	}
	if err != nil {
		return Robots{}, fmt.Errorf("store: robots for %s: %w", host, err)
	}
	if r.FetchedAt, err = parseTime(fetchedAt); err != nil {
		return Robots{}, fmt.Errorf("store: robots for %s: column fetched_at: %w", host, err)
	}
	if r.Expires, err = parseTime(expires); err != nil {
		return Robots{}, fmt.Errorf("store: robots for %s: column expires: %w", host, err)
	}
	return r, nil
}

func (s *sqliteStore) PutRobots(ctx context.Context, host string, r Robots) error {
	if host == "" {
		return errors.New("store: put robots: empty host")
	}
	body := r.Body
	if body == nil {
		body = []byte{} // the column is NOT NULL; nil would bind as NULL
	}
	fetchedAt, err := formatTime(r.FetchedAt)
	if err != nil {
		return fmt.Errorf("store: put robots for %s: fetched at: %w", host, err)
	}
	expires, err := formatTime(r.Expires)
	if err != nil {
		return fmt.Errorf("store: put robots for %s: expires: %w", host, err)
	}
	return s.write(ctx, "put robots for "+host, func(tx *sql.Tx) error {
		_, err := tx.StmtContext(ctx, s.ws.putRobots).ExecContext(ctx, host, r.Status, body, fetchedAt, expires)
		return err
	})
}

func (s *sqliteStore) Soft404(ctx context.Context, host string) (Soft404, error) {
	var (
		v                 Soft404
		probedAt, expires string
	)
	err := s.rs.soft404.QueryRowContext(ctx, host).Scan(&v.Print, &probedAt, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return Soft404{}, fmt.Errorf("%w: soft-404 verdict for %s", ErrNotFound, host)
	}
	if err != nil {
		return Soft404{}, fmt.Errorf("store: soft-404 verdict for %s: %w", host, err)
	}
	if v.ProbedAt, err = parseTime(probedAt); err != nil {
		return Soft404{}, fmt.Errorf("store: soft-404 verdict for %s: column probed_at: %w", host, err)
	}
	if v.Expires, err = parseTime(expires); err != nil {
		return Soft404{}, fmt.Errorf("store: soft-404 verdict for %s: column expires: %w", host, err)
	}
	if len(v.Print) == 0 {
		v.Print = nil
	}
	return v, nil
}

func (s *sqliteStore) PutSoft404(ctx context.Context, host string, v Soft404) error {
	if host == "" {
		return errors.New("store: put soft-404 verdict: empty host")
	}
	fp := v.Print
	if fp == nil {
		fp = []byte{} // the column is NOT NULL; nil would bind as NULL
	}
	probedAt, err := formatTime(v.ProbedAt)
	if err != nil {
		return fmt.Errorf("store: put soft-404 verdict for %s: probed at: %w", host, err)
	}
	expires, err := formatTime(v.Expires)
	if err != nil {
		return fmt.Errorf("store: put soft-404 verdict for %s: expires: %w", host, err)
	}
	return s.write(ctx, "put soft-404 verdict for "+host, func(tx *sql.Tx) error {
		_, err := tx.StmtContext(ctx, s.ws.putSoft404).ExecContext(ctx, host, fp, probedAt, expires)
		return err
	})
}

func (s *sqliteStore) LastCrawl(ctx context.Context, host string) (time.Time, error) {
	var at string
	err := s.rs.lastCrawl.QueryRowContext(ctx, host).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, fmt.Errorf("%w: last crawl of %s", ErrNotFound, host)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("store: last crawl of %s: %w", host, err)
	}
	t, err := parseTime(at)
	if err != nil {
		return time.Time{}, fmt.Errorf("store: last crawl of %s: column at: %w", host, err)
	}
	return t, nil
}

func (s *sqliteStore) PutLastCrawl(ctx context.Context, host string, at time.Time) error {
	if host == "" {
		return errors.New("store: put last crawl: empty host")
	}
	text, err := formatTime(at)
	if err != nil {
		return fmt.Errorf("store: put last crawl of %s: %w", host, err)
	}
	return s.write(ctx, "put last crawl of "+host, func(tx *sql.Tx) error {
		_, err := tx.StmtContext(ctx, s.ws.putLastCrawl).ExecContext(ctx, host, text)
		return err
	})
}

// PutLastCrawls records the last-crawl times of many hosts in one
// transaction, each kept only if it is later than the one stored, as
// PutLastCrawl does. Supervisors buffer these times and write them in
// batches, so a busy crawl costs one transaction per batch rather than one
// per request. Nothing is written if any entry is invalid.
func (s *sqliteStore) PutLastCrawls(ctx context.Context, times map[string]time.Time) error {
	type row struct{ host, at string }
	rows := make([]row, 0, len(times))
	for host, at := range times {
		if host == "" {
			return errors.New("store: put last crawls: empty host")
		}
		text, err := formatTime(at)
		if err != nil {
			return fmt.Errorf("store: put last crawls: %s: %w", host, err)
		}
		rows = append(rows, row{host, text})
	}
	if len(rows) == 0 {
		return nil
	}
	// Sorted so that a batch writes in the same order whatever the map's.
	sort.Slice(rows, func(i, j int) bool { return rows[i].host < rows[j].host })
	return s.write(ctx, fmt.Sprintf("put last crawls of %d hosts", len(rows)), func(tx *sql.Tx) error {
		stmt := tx.StmtContext(ctx, s.ws.putLastCrawl)
		for _, r := range rows {
			if _, err := stmt.ExecContext(ctx, r.host, r.at); err != nil {
				return fmt.Errorf("%s: %w", r.host, err)
			}
		}
		return nil
	})
}
