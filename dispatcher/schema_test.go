package dispatcher

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"backfill/sqlitedb"
)

// TestStateMigrationFromV3 opens a state.db as the build of schema version
// 3 left it (text record ids in malformed, refusals and outcomes): it is
// converted to the lean schema with those rows kept, by the records'
// seqs, and a malformed line known by its id only (file 0).
func TestStateMigrationFromV3(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	page := "https://p.example/a"
	hex := taskID(urlKey(page))
	stmts := []string{schemaV1, outboxSchema,
		`ALTER TABLE seen ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0`}
	stmts = append(stmts, schemaV3...)
	stmts = append(stmts,
		`INSERT INTO seen(id, url, first_seen, class, last_crawled, result) VALUES ('`+hex+`', '`+page+`', 1, '', 5, '{"s":"`+page+`"}')`,
		`INSERT INTO frontier(id, url, host, domain, depth, matched, priority, render, seq, state) VALUES
			('`+hex+`', '`+page+`', 'p.example', 'p.example', 0, 1, 0, 0, 1, 2)`,
		`INSERT INTO records(id, seq, fields, targets, filled, nfilled, complete, skipped) VALUES
			('r1', 1, '{"id":"r1"}', '["email"]', '{}', 0, 0, 0),
			('r2', 3, '{"id":"r2"}', '["email"]', '{}', 0, 0, 0)`,
		`INSERT INTO task_records(url_id, record_id, depth) VALUES ('`+hex+`', 'r2', 0)`,
		`INSERT INTO malformed(id, seq) VALUES ('line 3', 2)`,
		`INSERT INTO refusals(record_id, page, field, page_value, record_value) VALUES ('r2', '`+page+`', 'name', 'Bo', 'Al')`,
		`INSERT INTO outcomes(record_id) VALUES ('r1'), ('r2')`,
		fmt.Sprintf(`PRAGMA user_version = %d`, 3),
	)
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("version 3 state: %v\n%s", err, q)
		}
	}
	db.Close()

	ctx := context.Background()
	st, err := openState(ctx, dir)
	if err != nil {
		t.Fatalf("open version 3 state: %v", err)
	}
	defer st.close()
	var v int
	if err := st.conn.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil || v != len(stateSchema) || v != 7 {
		t.Errorf("user_version %d (%v), want %d = 7", v, err, len(stateSchema))
	}
	checks := []struct {
		q    string
		want string
	}{
		{`SELECT group_concat(id || ':' || seq || ':' || file || ':' || line) FROM malformed`, "line 3:2:0:0"},
		{`SELECT group_concat(rec || ':' || page || ':' || field || ':' || page_value || ':' || record_value) FROM refusals`, "3:" + page + ":name:Bo:Al"},
		{`SELECT group_concat(rec, ',') FROM (SELECT rec FROM outcomes ORDER BY rec)`, "1,3"},
		{`SELECT group_concat(l.rec || ':' || u.class || ':' || u.state) FROM links l JOIN urls u ON u.key = l.url`, "3::2"},
	}
	for _, c := range checks {
		var got sql.NullString
		if err := st.conn.QueryRowContext(ctx, c.q).Scan(&got); err != nil || got.String != c.want {
			t.Errorf("%s: %q (%v), want %q", c.q, got.String, err, c.want)
		}
	}
}

// TestStateMigrationFromV4 opens a state.db as the build of schema version
// 4 left it: urls gains found, set for the pages whose cached extraction
// has values, every row is kept, and the outcomes of its incomplete
// records are what version 4's query (which searched the results) made
// of them.
func TestStateMigrationFromV4(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqlitedb.Migrate(ctx, db, stateSchema[:4]); err != nil {
		t.Fatalf("version 4 state: %v", err)
	}
	page := func(i int) int64 { return urlKey(fmt.Sprintf("https://p.example/%d", i)) }
	// Record 1 reached a page with values and one matched without;
	// 2 a page without values a mapping did not match, and one that
	// failed; 3 a queued page; 4 is complete; 5 refused a page; 6 has
	// links the frontier has not reached (seeded is 5).
	stmts := []string{
		`INSERT INTO target_sets(id, names) VALUES (1, '["email"]')`,
		`INSERT INTO records(seq, id, line, targets, complete, skipped, links) VALUES
			(1, 'r1', 1, 1, 0, 0, NULL), (2, 'r2', 2, 1, 0, 0, NULL), (3, 'r3', 3, 1, 0, 0, NULL),
			(4, 'r4', 4, 1, 1, 0, NULL), (5, 'r5', 5, 1, 0, 0, NULL), (6, 'r6', 6, 1, 0, 0, '["https://q.example/"]')`,
		fmt.Sprintf(`INSERT INTO urls(key, url, depth, state, matched, priority, render, seq, first_seen, last_crawled, class, result) VALUES
			(%d, NULL, 0, 2, 0, 0, 0, 1, 1, 5, '', '{"s":"https://p.example/1","f":[{"name":"email","values":["a@p.example"]}]}'),
			(%d, NULL, 0, 2, 1, 0, 0, 2, 1, 5, '', '{"s":"https://p.example/2"}'),
			(%d, NULL, 0, 2, 0, 0, 0, 3, 1, 5, '', '{"s":"https://p.example/3","l":["https://p.example/f"]}'),
			(%d, 'https://p.example/4', 0, 2, 0, 0, 0, 4, 1, 5, 'dns', NULL),
			(%d, 'https://p.example/5', 1, 0, 0, 0, 0, 5, 1, 0, '', NULL)`,
			page(1), page(2), page(3), page(4), page(5)),
		fmt.Sprintf(`INSERT INTO links(url, rec, depth) VALUES (%d, 1, 0), (%d, 1, 1), (%d, 2, 0), (%d, 2, 1), (%d, 3, 0), (%d, 4, 0), (%d, 5, 0)`,
			page(1), page(2), page(3), page(4), page(5), page(1), page(1)),
		`INSERT INTO refusals(rec, page, field, page_value, record_value) VALUES (5, 'https://p.example/1', 'name', 'Bo', 'Al')`,
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("version 4 state: %v\n%s", err, q)
		}
	}
	// Version 4's query, as outcomes ran it.
	v4Pages := strings.Replace(outcomePages, "u.found = 1", `instr(u.result, '"f":') > 0`, 1)
	if v4Pages == outcomePages {
		t.Fatal("outcomePages no longer reads urls.found")
	}
	v4Pages = strings.Replace(v4Pages, "COALESCE(r.long, '')", "''", 1) // version 6
	dump := func(db interface {
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	}, q string, args ...any) []string {
		t.Helper()
		rows, err := db.QueryContext(ctx, q, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		var out []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(vals...))
		}
		return out
	}
	const seeded = 5
	tables := []string{`SELECT seq, id, file, line, own, links, targets, filled, nfilled, complete, skipped, queued FROM records ORDER BY seq`, `SELECT url, rec, depth FROM links ORDER BY url, rec`,
		`SELECT * FROM refusals`, `SELECT key, url, depth, state, matched, seq, last_crawled, class, result FROM urls ORDER BY key`}
	var before [][]string
	for _, q := range tables {
		before = append(before, dump(db, q))
	}
	wantPages := dump(db, v4Pages, seeded)
	wantFailed := dump(db, outcomeFailed, seeded)
	db.Close()

	st, err := openState(ctx, dir)
	if err != nil {
		t.Fatalf("open version 4 state: %v", err)
	}
	defer st.close()
	var v int
	if err := st.conn.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil || v != len(stateSchema) || v != 7 {
		t.Errorf("user_version %d (%v), want %d = 7", v, err, len(stateSchema))
	}
	for i, q := range tables {
		if got := dump(st.conn, q); !slices.Equal(got, before[i]) {
			t.Errorf("%s after the migration:\n got %q\nwant %q", q, got, before[i])
		}
	}
	// Version 6: no redirect chains, no hops, in a state of before.
	if got := dump(st.conn, `SELECT COUNT(*) FROM links WHERE via IS NOT NULL UNION ALL SELECT COUNT(*) FROM urls WHERE hops != 0`); !slices.Equal(got, []string{"0", "0"}) {
		t.Errorf("links with a chain, urls with hops after the migration: %q, want none", got)
	}
	found := dump(st.conn, `SELECT key FROM urls WHERE found = 1`)
	if want := []string{fmt.Sprint(page(1))}; !slices.Equal(found, want) {
		t.Errorf("found pages %q, want %q (the page with values)", found, want)
	}
	if got := dump(st.conn, outcomePages, seeded); !slices.Equal(got, wantPages) || len(got) != 4 {
		t.Errorf("outcome pages after the migration:\n got %q\nwant %q (4 incomplete records reached)", got, wantPages)
	}
	if got := dump(st.conn, outcomeUnreached, seeded); !slices.Equal(got, []string{"0 1"}) {
		t.Errorf("unreached records after the migration: %q, want one with links (record 6), \"0 1\"", got)
	}
	if got := dump(st.conn, outcomeFailed, seeded); !slices.Equal(got, wantFailed) || len(got) != 1 {
		t.Errorf("outcome failures after the migration: %q, want %q", got, wantFailed)
	}
}
