package dispatcher

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"backfill/fetch"
	"backfill/wire"
)

func TestTransient(t *testing.T) {
	tests := []struct {
		class  string
		status int
		want   bool
	}{
		{"dns", 0, true}, {"dns-timeout", 0, true}, {"connect", 0, true}, {"timeout", 0, true}, {"blocked-address", 0, true},
		{"blacklisted", 0, true}, {"robots-unavailable", 0, true},
		{"bad-status", 500, true}, {"bad-status", 503, true}, {"bad-status", 429, true},
		{"bad-status", 404, false}, {"bad-status", 410, false}, {"bad-status", 403, false},
		{"robots", 0, false}, {"soft-404", 0, false}, {"too-large", 0, false}, {"not-html", 0, false},
		{"tls", 0, false}, {"crawl-delay", 0, false}, {"panic", 0, false}, {"", 0, false},
	}
	for _, tc := range tests {
		if got := transient(tc.class, tc.status); got != tc.want {
			t.Errorf("transient(%q, %d) = %v, want %v", tc.class, tc.status, got, tc.want)
		}
	}
}

// TestRetryAcrossRuns crawls a web whose pages fail in every way, on one
// state directory, process after process: each rerun fetches again the
// pages that failed transiently, until they have failed RetryAttempts
// times; permanent failures are kept unless RetryFailed; a page that
// comes back gives its record the values and links it holds; a page no
// incomplete record wants is not fetched again.
func TestRetryAcrossRuns(t *testing.T) {
	dir := t.TempDir()
	u := func(h string) string { return "https://" + h + ".example/" }
	fail := map[string]page{
		u("dns"):      {class: "dns"},
		u("connect"):  {class: "connect"},
		u("timeout"):  {class: "timeout"},
		u("busy"):     {class: "bad-status", status: 503},
		u("slow"):     {class: "bad-status", status: 429},
		u("blocked"):  {class: "blocked-address"},
		u("norobots"): {class: "robots-unavailable"},
		u("gone"):     {class: "bad-status", status: 404},
		u("private"):  {class: "robots"},
	}
	// Every failing page is a record's only link, except that done's
	// record is complete from another link: its failed page is not
	// wanted.
	lines := []string{"id,name,email,link,link2"}
	for h := range fail {
		host := strings.TrimSuffix(strings.TrimPrefix(h, "https://"), ".example/")
		lines = append(lines, fmt.Sprintf("r-%s,%s,,%s,", host, host, h))
	}
	lines = append(lines, "r-done,Done,,"+u("unwanted")+","+u("ok"))
	fail[u("unwanted")] = page{class: "connect"}
	ok := map[string]page{u("ok"): {fields: []wire.Field{fld("email", "done@ok.example")}}}
	web := func(failing map[string]page) map[string]page {
		w := maps.Clone(ok)
		maps.Copy(w, failing)
		return w
	}
	records := csvOf(lines...)
	transientN := 7
	run := func(tweak func(*Config), w map[string]page) (*Summary, crawlStats) {
		t.Helper()
		e := newEnv(t, dir, func(c *Config) {
			c.Fields = []string{"email"}
			if tweak != nil {
				tweak(c)
			}
		})
		e.load("r.csv", records)
		var st crawlStats
		if w == nil { // nothing to fetch: Run ends without supervisors
			e.run(context.Background())
			select {
			case <-e.done:
			case <-time.After(20 * time.Second):
				t.Fatal("Run with nothing to fetch did not return")
			}
		} else {
			st = crawl(t, e, e.runWithTwo(), w, 20*time.Second)
		}
		if e.err != nil {
			t.Fatalf("Run: %v", e.err)
		}
		e.close()
		return e.sum, st
	}

	// Run 1: everything fails but ok.
	sum, st := run(nil, web(fail))
	if len(st.requests) != len(fail)+1 || sum.Complete != 1 {
		t.Fatalf("run 1: requests %v, complete %d", st.requests, sum.Complete)
	}
	// Runs 2 and 3: the transient failures are fetched again, and fail
	// again; the permanent ones and the unwanted page are not.
	for i := 2; i <= 3; i++ {
		sum, st = run(nil, web(fail))
		want := map[string]int64{"dns": 1, "connect": 1, "timeout": 1, "bad-status": 2, "blocked-address": 1, "robots-unavailable": 1}
		if !reflect.DeepEqual(sum.Retried, want) || sum.RetryKept != 2 || sum.RetryExhausted != 0 {
			t.Errorf("run %d: retried %v, kept %d, exhausted %d; want %v, 2, 0", i, sum.Retried, sum.RetryKept, sum.RetryExhausted, want)
		}
		if len(st.requests) != transientN || st.requests[u("gone")]+st.requests[u("private")]+st.requests[u("unwanted")] != 0 {
			t.Errorf("run %d requested %v", i, st.requests)
		}
	}
	// Run 4: three failures in a row each; none is fetched again.
	sum, st = run(nil, nil)
	if len(sum.Retried) != 0 || sum.RetryExhausted != int64(transientN) || sum.RetryKept != 2 || len(st.requests) != 0 {
		t.Errorf("run 4: retried %v, exhausted %d, kept %d, requests %v", sum.Retried, sum.RetryExhausted, sum.RetryKept, st.requests)
	}
	// Run 5 with RetryFailed: every wanted failed page is fetched again;
	// two of them are back and fill their records.
	back := maps.Clone(fail)
	back[u("busy")] = page{fields: []wire.Field{fld("email", "busy@busy.example")}, links: []string{u("busy") + "more"}}
	back[u("gone")] = page{fields: []wire.Field{fld("name", "gone")}, links: []string{u("gone") + "more"}}
	back[u("gone")+"more"] = page{fields: []wire.Field{fld("email", "gone@gone.example")}}
	sum, st = run(func(c *Config) { c.RetryFailed = true }, web(back))
	if sum.Retried["bad-status"] != 3 || sum.Retried["robots"] != 1 || sum.Retried["connect"] != 1 || st.requests[u("unwanted")] != 0 {
		t.Errorf("run 5: retried %v, requests %v", sum.Retried, st.requests)
	}
	if st.requests[u("gone")+"more"] != 1 {
		t.Errorf("run 5: the link of a page that came back was not followed: %v", st.requests)
	}
	e := newEnv(t, dir, nil)
	recs := e.records()
	if v := recs["r-gone"].Found["email"]; v.Value != "gone@gone.example" || v.Depth != 1 {
		t.Errorf("r-gone.email = %+v", v)
	}
	if v := recs["r-busy"].Found["email"]; v.Value != "busy@busy.example" {
		t.Errorf("r-busy.email = %+v", v)
	}
	if sum.Complete != 3 {
		t.Errorf("run 5: %d complete, want 3", sum.Complete)
	}
	// The count of failures in a row was cleared for the pages that came
	// back, and kept growing for the others.
	for h, want := range map[string]int{u("busy"): 0, u("dns"): 4, u("gone"): 0, u("unwanted"): 1} {
		var n int
		if err := e.d.st.conn.QueryRowContext(context.Background(), `SELECT attempts FROM urls WHERE key = ?`, urlKey(h)).Scan(&n); err != nil || n != want {
			t.Errorf("%s: attempts %d (%v), want %d", h, n, err, want)
		}
	}
}

// TestStateMigration opens a state.db as the build before versioning left
// it (seen without the validator and attempt columns, user_version 0,
// text ids): it is converted to the lean schema, and what was there is
// kept — a queued task with its URL, a failed page with its URL and class,
// a fetched page with its cached result but no URL, the records with their
// targets, values and links. A state of a newer build is refused.
func TestStateMigration(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(schemaV1, `
	result BLOB, etag TEXT NOT NULL DEFAULT '', last_modified TEXT NOT NULL DEFAULT '');`, `
	result BLOB);`, 1)
	if old == schemaV1 {
		t.Fatal("the old schema is the new one: the test no longer models the old state")
	}
	queued, failed, done := "https://q.example/", "https://f.example/", "https://d.example/"
	hex := func(u string) string { return taskID(urlKey(u)) }
	for _, q := range []string{old, outboxSchema,
		`INSERT INTO seen(id, url, first_seen, class, last_crawled, result) VALUES
			('` + hex(queued) + `', '` + queued + `', 1, '', 0, NULL),
			('` + hex(failed) + `', '` + failed + `', 1, 'connect', 5, NULL),
			('` + hex(done) + `', '` + done + `', 1, '', 5, '{"s":"https://d.example/"}')`,
		`INSERT INTO frontier(id, url, host, domain, depth, matched, priority, render, seq, state) VALUES
			('` + hex(queued) + `', '` + queued + `', 'q.example', 'q.example', 1, 0, 0, 0, 7, 0),
			('` + hex(failed) + `', '` + failed + `', 'f.example', 'f.example', 0, 0, 0, 0, 8, 2),
			('` + hex(done) + `', '` + done + `', 'd.example', 'd.example', 0, 0, 0, 0, 9, 2)`,
		`INSERT INTO records(id, seq, fields, targets, filled, nfilled, complete, skipped) VALUES
			('r1', 1, '{"id":"r1","name":"Ann"}', '["email"]', '{}', 0, 0, 0),
			('r2', 2, '{"id":"r2"}', '["email"]', '{"email":{"Field":"email","Value":"b@x.example"}}', 1, 1, 0)`,
		`INSERT INTO task_records(url_id, record_id, depth) VALUES
			('` + hex(failed) + `', 'r1', 0), ('` + hex(queued) + `', 'r1', 1), ('` + hex(done) + `', 'r2', 0)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("old state: %v\n%s", err, q)
		}
	}
	db.Close()

	ctx := context.Background()
	st, err := openState(ctx, dir)
	if err != nil {
		t.Fatalf("open old state: %v", err)
	}
	var v int
	if err := st.conn.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil || v != len(stateSchema) {
		t.Errorf("user_version %d (%v), want %d", v, err, len(stateSchema))
	}
	urls := []struct {
		u, class string
		state    int
		keepsURL bool
	}{{queued, "", stateQueued, true}, {failed, "connect", stateDone, true}, {done, "", stateDone, false}}
	for _, w := range urls {
		var u sql.NullString
		var class string
		var state, attempts int
		if err := st.conn.QueryRowContext(ctx, `SELECT url, class, state, attempts FROM urls WHERE key = ?`, urlKey(w.u)).Scan(&u, &class, &state, &attempts); err != nil {
			t.Fatalf("%s: %v", w.u, err)
		}
		if class != w.class || state != w.state || attempts != 0 || u.Valid != w.keepsURL || (u.Valid && u.String != w.u) {
			t.Errorf("%s: url %v, class %q, state %d, attempts %d", w.u, u, class, state, attempts)
		}
	}
	var links, ownLinks, nfilled int
	var targets string
	if err := st.conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM links`).Scan(&links); err != nil || links != 3 {
		t.Errorf("%d links (%v), want 3", links, err)
	}
	if err := st.conn.QueryRowContext(ctx, `SELECT json_array_length(r.links), t.names, (SELECT nfilled FROM records WHERE id = 'r2')
		FROM records r JOIN target_sets t ON t.id = r.targets WHERE r.id = 'r1'`).Scan(&ownLinks, &targets, &nfilled); err != nil ||
		ownLinks != 1 || targets != `["email"]` || nfilled != 1 {
		t.Errorf("records: r1 own links %d, targets %s, r2 filled %d (%v)", ownLinks, targets, nfilled, err)
	}
	st.close()
	// Opening it again changes nothing.
	if st, err = openState(ctx, dir); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if _, err := st.conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, len(stateSchema)+1)); err != nil {
		t.Fatal(err)
	}
	st.close()
	if _, err := openState(ctx, dir); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("a newer state opened: %v", err)
	}
}

// TestREADMESaysWhatARerunRetries: README's "Fetched again on a rerun"
// names every failure class a rerun fetches again, and nowhere says a
// rerun leaves one of them alone (it once said so of dns).
func TestREADMESaysWhatARerunRetries(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	_, bullet, ok := strings.Cut(readme, "- Fetched again on a rerun:")
	bullet, _, _ = strings.Cut(bullet, "\n- ")
	if !ok {
		t.Fatal(`README has no "Fetched again on a rerun" bullet`)
	}
	for _, c := range []fetch.Class{fetch.ClassDNS, fetch.ClassDNSTimeout, fetch.ClassConnect, fetch.ClassTimeout, fetch.ClassBlocked, fetch.ClassRobotsUnavailable} {
		class := string(c)
		if !transient(class, 0) {
			t.Errorf("class %s is not retried on a rerun: update this test's list", class)
		}
		if !strings.Contains(bullet, "`"+class+"`") {
			t.Errorf("README's rerun bullet does not name %s, which a rerun fetches again", class)
		}
		if strings.Contains(readme, "unlike\n  `"+class+"`") || strings.Contains(readme, "unlike `"+class+"`") {
			t.Errorf("README says a rerun does not retry %s", class)
		}
	}
}
