package dispatcher

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
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
	if err := st.conn.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil || v != len(stateSchema) || v != 4 {
		t.Errorf("user_version %d (%v), want %d = 4", v, err, len(stateSchema))
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
