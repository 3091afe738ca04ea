package dispatcher

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strconv"
	"strings"

	"backfill/sqlitedb"

	"modernc.org/sqlite"
)

// stateSchema is the state database's schema as migrations (see
// sqlitedb): entry i moves a file from user_version i to i+1. Append only.
//
// Version 4 is the lean state of issue 14, sized for millions of records
// on a small machine:
//
//   - urls is the seen-URL store and the frontier in one table, keyed by
//     urlKey (8 bytes of the URL's SHA-256 as an integer, SQLite's rowid:
//     no second index). The URL text is kept only while the task is
//     queued (to send it); a fetched page keeps its key, outcome and
//     cached extraction. urls_ready orders the queued tasks (partial:
//     done ones leave it).
//   - records.links holds a record's own links (a refresh revisits them).
//     They enter urls and links when the frontier reaches the record (see
//     seeds.go), in record order, rather than when it is taken in.
//   - links says which record (by its seq) reached which URL at which
//     depth; links_rec finds a record's URLs.
//   - records holds a record's crawl state only: its id, file and line, its own
//     values of the match-key fields (attribution compares pages with
//     them), its target set (target_sets: most records share one), the
//     values found and whether it is complete. The record itself — every
//     field, the input's order and bytes — is in the store alone, which
//     is what export reads back: one copy of the input, not two.
//   - hosts and records.queued count the tasks queued per host and per
//     record for the budgets, tagged with the dispatcher process that
//     counted them (see budgetGen): budgets are per process.
//   - loads remembers how far each records file was taken in, so a resume
//     skips what it has (and a crash mid-intake carries on from there),
//     and numbers the files for records.file: a record whose id another
//     line of its own file has is a duplicate, one of another file is
//     known.
//   - malformed holds the malformed input lines (their ids, their places
//     in the input order, the file and line each is on), which the store
//     keeps for export and the crawl never reads (malformed.go).
//   - refusals holds the pages a record refused because a match key
//     disagreed, and outcomes the records whose outcome the store holds
//     (outcomes.go), both by the record's seq.
//   - meta holds counters a resume would otherwise count over every row,
//     and the crawl's totals across restarts (totals.go).
//
// Version 5 adds urls.found (schemaV5), version 6 what the outcomes say
// of the links a record did not follow (schemaV6), version 7 urls.hops
// and links.via (schemaV7).
//
// Versions 1 to 3 are the schema of earlier builds; a state they wrote is
// converted in place.
var stateSchema = []sqlitedb.Migration{
	{SQL: []string{schemaV1, outboxSchema}, Func: addColumns("seen", "etag TEXT NOT NULL DEFAULT ''", "last_modified TEXT NOT NULL DEFAULT ''")},
	// 2: failed fetches of a page in a row, across runs (retry.go)
	{Func: addColumns("seen", "attempts INTEGER NOT NULL DEFAULT 0")},
	{SQL: schemaV3},
	{SQL: schemaV4},
	{SQL: schemaV5},
	{SQL: schemaV6},
	{SQL: schemaV7},
}

// schemaV1 is the state of earlier builds (user_version 0, tables
// created IF NOT EXISTS).
const schemaV1 = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS seen (
	id TEXT PRIMARY KEY, url TEXT NOT NULL, first_seen INTEGER NOT NULL,
	last_crawled INTEGER NOT NULL DEFAULT 0, class TEXT NOT NULL DEFAULT '', status INTEGER NOT NULL DEFAULT 0,
	result BLOB, etag TEXT NOT NULL DEFAULT '', last_modified TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS frontier (
	id TEXT PRIMARY KEY, url TEXT NOT NULL, host TEXT NOT NULL, domain TEXT NOT NULL,
	depth INTEGER NOT NULL, matched INTEGER NOT NULL, priority INTEGER NOT NULL, render INTEGER NOT NULL,
	seq INTEGER NOT NULL, state INTEGER NOT NULL, lease INTEGER NOT NULL DEFAULT 0,
	deadline INTEGER NOT NULL DEFAULT 0, supervisor TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS task_records (
	url_id TEXT NOT NULL, record_id TEXT NOT NULL, depth INTEGER NOT NULL,
	PRIMARY KEY (url_id, record_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS records (
	id TEXT PRIMARY KEY, seq INTEGER NOT NULL, fields BLOB NOT NULL, targets BLOB NOT NULL,
	filled BLOB NOT NULL, nfilled INTEGER NOT NULL, complete INTEGER NOT NULL, skipped INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS prior (
	record_id TEXT NOT NULL, field TEXT NOT NULL, value BLOB NOT NULL, open INTEGER NOT NULL,
	PRIMARY KEY (record_id, field)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fingerprints (
	seq INTEGER PRIMARY KEY, url_id TEXT NOT NULL, exact BLOB NOT NULL, sim INTEGER NOT NULL,
	words INTEGER NOT NULL, duplicate_of TEXT NOT NULL DEFAULT '');
`

// outboxSchema: see outbox.go. Unchanged since version 1.
const outboxSchema = `
CREATE TABLE IF NOT EXISTS outbox (
	record_id TEXT NOT NULL,
	field     TEXT NOT NULL,
	value     BLOB NOT NULL,              -- JSON of the store.Value
	gen       INTEGER NOT NULL,           -- grows with every write of the row
	refused   INTEGER NOT NULL DEFAULT 0, -- the store has no such record (this process)
	PRIMARY KEY (record_id, field)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS outbox_ready ON outbox(refused, gen);
`

// addColumns is a migration adding columns (each "name TYPE ...") to
// table, those it does not have yet: a file written before the version
// was kept may have some of them (CREATE TABLE IF NOT EXISTS leaves an
// existing table as it is).
func addColumns(table string, cols ...string) func(context.Context, *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		have := make(map[string]bool)
		rows, err := tx.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, table)
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
			if _, err := tx.ExecContext(ctx, `ALTER TABLE `+table+` ADD COLUMN `+col); err != nil {
				return fmt.Errorf("add %s.%s: %w", table, name, err)
			}
		}
		return nil
	}
}

// schemaV3 keeps malformed input lines (which are there, and their place
// in the input order), the pages a record refused because a match key
// disagreed, and the records whose outcome the store holds, by record id.
var schemaV3 = []string{
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
	) WITHOUT ROWID`,
}

// schemaV4 creates the lean tables, converts what versions 1 to 3 held
// and drops their tables. backfill_url_key turns version 1's hex task ids
// into urlKey's integers (both are the first 8 bytes of the URL's
// SHA-256). Converted records keep every field as their own values
// (version 1 kept them all; attribution reads only the match keys) and
// their seq as their line; converted malformed lines have file 0, which
// Load reads as "known by id only".
var schemaV4 = []string{
	`CREATE TABLE target_sets (id INTEGER PRIMARY KEY, names TEXT NOT NULL UNIQUE)`,
	`CREATE TABLE records_v2 (
		seq      INTEGER PRIMARY KEY,
		id       TEXT NOT NULL UNIQUE,
		file     INTEGER NOT NULL DEFAULT 0,
		line     INTEGER NOT NULL,
		own      BLOB,
		links    BLOB,
		targets  INTEGER NOT NULL,
		filled   BLOB,
		nfilled  INTEGER NOT NULL DEFAULT 0,
		complete INTEGER NOT NULL,
		skipped  INTEGER NOT NULL,
		queued   INTEGER NOT NULL DEFAULT 0)`,
	`CREATE TABLE urls (
		key           INTEGER PRIMARY KEY,
		url           TEXT,
		depth         INTEGER NOT NULL,
		state         INTEGER NOT NULL,
		matched       INTEGER NOT NULL,
		priority      INTEGER NOT NULL,
		render        INTEGER NOT NULL,
		seq           INTEGER NOT NULL,
		first_seen    INTEGER NOT NULL,
		last_crawled  INTEGER NOT NULL DEFAULT 0,
		class         TEXT NOT NULL DEFAULT '',
		status        INTEGER NOT NULL DEFAULT 0,
		result        BLOB,
		etag          TEXT NOT NULL DEFAULT '',
		last_modified TEXT NOT NULL DEFAULT '',
		attempts      INTEGER NOT NULL DEFAULT 0)`,
	`CREATE TABLE links (
		url   INTEGER NOT NULL,
		rec   INTEGER NOT NULL,
		depth INTEGER NOT NULL,
		PRIMARY KEY (url, rec)) WITHOUT ROWID`,
	`CREATE TABLE hosts (host TEXT PRIMARY KEY, queued INTEGER NOT NULL) WITHOUT ROWID`,
	`CREATE TABLE prior_v2 (
		rec   INTEGER NOT NULL,
		field TEXT NOT NULL,
		value BLOB NOT NULL,
		open  INTEGER NOT NULL,
		PRIMARY KEY (rec, field)) WITHOUT ROWID`,
	`CREATE TABLE fingerprints_v2 (
		seq          INTEGER PRIMARY KEY,
		url          TEXT NOT NULL,
		exact        BLOB NOT NULL,
		sim          INTEGER NOT NULL,
		words        INTEGER NOT NULL,
		duplicate_of TEXT NOT NULL DEFAULT '')`,
	`CREATE TABLE loads (
		path    TEXT PRIMARY KEY,
		num     INTEGER NOT NULL UNIQUE,
		size    INTEGER NOT NULL,
		mtime   INTEGER NOT NULL,
		offset  INTEGER NOT NULL,
		line    INTEGER NOT NULL,
		records INTEGER NOT NULL,
		bad     INTEGER NOT NULL,
		fresh   INTEGER NOT NULL,
		unfillable INTEGER NOT NULL,
		done    INTEGER NOT NULL) WITHOUT ROWID`,

	`INSERT INTO target_sets(names) SELECT DISTINCT CAST(targets AS TEXT) FROM records`,
	`INSERT INTO records_v2(seq, id, line, own, links, targets, filled, nfilled, complete, skipped)
		SELECT r.seq, r.id, r.seq, r.fields,
			(SELECT json_group_array(s.url) FROM task_records tr JOIN seen s ON s.id = tr.url_id
				WHERE tr.record_id = r.id AND tr.depth = 0),
			t.id, NULLIF(CAST(r.filled AS TEXT), '{}'), r.nfilled, r.complete, r.skipped
		FROM records r JOIN target_sets t ON t.names = CAST(r.targets AS TEXT)`,
	`INSERT INTO urls(key, url, depth, state, matched, priority, render, seq, first_seen,
			last_crawled, class, status, result, etag, last_modified, attempts)
		SELECT backfill_url_key(f.id), CASE WHEN f.state IN (0, 1) OR s.class != '' THEN f.url END, f.depth,
			CASE f.state WHEN 1 THEN 0 ELSE f.state END, f.matched, f.priority, f.render, f.seq, s.first_seen,
			s.last_crawled, s.class, s.status, s.result, s.etag, s.last_modified, s.attempts
		FROM frontier f JOIN seen s ON s.id = f.id`,
	`INSERT INTO links(url, rec, depth)
		SELECT backfill_url_key(tr.url_id), r.seq, tr.depth FROM task_records tr JOIN records r ON r.id = tr.record_id`,
	`INSERT INTO prior_v2(rec, field, value, open)
		SELECT r.seq, p.field, p.value, p.open FROM prior p JOIN records r ON r.id = p.record_id`,
	`INSERT INTO fingerprints_v2(seq, url, exact, sim, words, duplicate_of)
		SELECT f.seq, s.url, f.exact, f.sim, f.words, f.duplicate_of FROM fingerprints f JOIN seen s ON s.id = f.url_id`,
	`CREATE TABLE refusals_v2 (
		rec          INTEGER NOT NULL,
		page         TEXT NOT NULL,
		field        TEXT NOT NULL,
		page_value   TEXT NOT NULL,
		record_value TEXT NOT NULL,
		PRIMARY KEY (rec, page)) WITHOUT ROWID`,
	`INSERT INTO refusals_v2(rec, page, field, page_value, record_value)
		SELECT r.seq, f.page, f.field, f.page_value, f.record_value FROM refusals f JOIN records r ON r.id = f.record_id`,
	`CREATE TABLE outcomes_v2 (rec INTEGER PRIMARY KEY)`,
	`INSERT INTO outcomes_v2(rec) SELECT r.seq FROM outcomes o JOIN records r ON r.id = o.record_id`,
	`ALTER TABLE malformed ADD COLUMN file INTEGER NOT NULL DEFAULT 0`,
	`ALTER TABLE malformed ADD COLUMN line INTEGER NOT NULL DEFAULT 0`,
	`DROP TABLE seen`,
	`DROP TABLE frontier`,
	`DROP TABLE task_records`,
	`DROP TABLE records`,
	`DROP TABLE prior`,
	`DROP TABLE fingerprints`,
	`DROP TABLE refusals`,
	`DROP TABLE outcomes`,
	`ALTER TABLE records_v2 RENAME TO records`,
	`ALTER TABLE prior_v2 RENAME TO prior`,
	`ALTER TABLE fingerprints_v2 RENAME TO fingerprints`,
	`ALTER TABLE refusals_v2 RENAME TO refusals`,
	`ALTER TABLE outcomes_v2 RENAME TO outcomes`,
	`CREATE INDEX urls_ready ON urls(matched DESC, priority DESC, depth, seq) WHERE state = 0`,
	`CREATE INDEX urls_failed ON urls(key) WHERE state = 2 AND class != ''`,
	`CREATE INDEX links_rec ON links(rec)`,
	`CREATE INDEX prior_open ON prior(open) WHERE open = 1`,
	`CREATE INDEX malformed_line ON malformed(file, line)`,
	// The counters a resume reads (see resume); an empty state has none.
	// Every converted record's links are in urls already.
	`DELETE FROM meta WHERE key IN ('records', 'complete', 'partial', 'queued', 'refresh_open', 'malformed')`,
	`INSERT INTO meta(key, value) SELECT 'seeded', COALESCE(MAX(seq), 0) FROM records`,
}

// schemaV5 adds urls.found: 1 when the page's cached extraction has
// values (markDone sets it with the result). The end-of-run outcomes
// (outcomes.go) asked that of every page a record reached by searching
// the result's JSON, reading every cached extraction; a flag beside it
// answers without them. Pages fetched before are flagged from their
// results.
var schemaV5 = []string{
	`ALTER TABLE urls ADD COLUMN found INTEGER NOT NULL DEFAULT 0`,
	`UPDATE urls SET found = 1 WHERE instr(result, '"f":') > 0`,
}

// schemaV6 keeps what the outcomes (outcomes.go) say of the links a record
// did not follow: beyond holds, per record, the first link a mapping
// matches that a page reached at the depth limit offered (its key, and
// its depth, one more than --depth was), and records.long the start of a
// record's own link refused for its length when the record has no other.
var schemaV6 = []string{
	`CREATE TABLE beyond (
		rec   INTEGER PRIMARY KEY,
		url   TEXT NOT NULL,
		key   INTEGER NOT NULL,
		depth INTEGER NOT NULL)`,
	`ALTER TABLE records ADD COLUMN long TEXT`,
}

// schemaV7 keeps what redirects to other hosts leave behind (see
// redirect.go): urls.hops counts the redirects across hosts that led to a
// queued URL, for the chain's limit; links.via is, for a record that
// reached a URL through such redirects, the URLs that led there (a JSON
// array, first to last; NULL for a link followed as it is), which the
// values found there carry to the export.
var schemaV7 = []string{
	`ALTER TABLE urls ADD COLUMN hops INTEGER NOT NULL DEFAULT 0`,
	`ALTER TABLE links ADD COLUMN via TEXT`,
}

func init() {
	// Version 1's task ids are 16 hex digits; their value is the key.
	sqlite.MustRegisterDeterministicScalarFunction("backfill_url_key", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		s, ok := args[0].(string)
		if !ok {
			return nil, fmt.Errorf("backfill_url_key: %T, want a hex string", args[0])
		}
		u, err := strconv.ParseUint(s, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("backfill_url_key: %w", err)
		}
		return int64(u), nil
	})
}
