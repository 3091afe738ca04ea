package dispatcher

import (
	"context"
	"strings"
	"testing"
	"time"

	"backfill/store"
	"backfill/wire"
)

// freshPage is a page of a web that changes between runs: it has
// validators, and answers a task whose validators match with 304.
type freshPage struct {
	fields        []wire.Field
	links         []string
	etag, lastMod string
	gone          bool // answers 404
}

// freshRun is what one run against a fresh web did.
type freshRun struct {
	tasks []wire.Task
	sum   *Summary
	recs  map[string]store.Record
}

// runFresh runs a dispatcher on dir's state with records, answering
// every task from web as a server with conditional GET would, and closes
// it when Run returns.
func runFresh(t *testing.T, dir string, tweak func(*Config), records string, web map[string]freshPage) freshRun {
	t.Helper()
	e := newEnv(t, dir, func(c *Config) {
		c.Fields = []string{"email", "title"}
		c.Depth = 0
		if tweak != nil {
			tweak(c)
		}
	})
	e.load("records.csv", records)
	sup := newSup(t, "s1", e.d.Endpoint(), 4, false, e.set.Digest())
	e.run(context.Background())
	if !sup.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	var run freshRun
	deadline := time.Now().Add(20 * time.Second)
	for !e.finished() {
		if time.Now().After(deadline) {
			t.Fatal("dispatcher still running after 20s")
		}
		sup.poll(10 * time.Millisecond)
		for _, task := range sup.held {
			run.tasks = append(run.tasks, task)
			answerFresh(t, sup, task, web)
		}
		sup.held = nil
	}
	if e.err != nil {
		t.Fatalf("Run: %v", e.err)
	}
	run.sum = e.sum
	run.recs = e.records()
	e.close()
	return run
}

func answerFresh(t *testing.T, s *testSup, task wire.Task, web map[string]freshPage) {
	t.Helper()
	res := wire.Result{TaskID: task.ID, Lease: task.Lease, Supervisor: s.Hello.Supervisor, URL: task.URL, FetchedAt: time.Now()}
	p, ok := web[task.URL]
	switch {
	case !ok || p.gone:
		res.Class, res.Status = "bad-status", 404
	case (task.ETag != "" && task.ETag == p.etag) || (task.ETag == "" && task.LastModified != "" && task.LastModified == p.lastMod):
		res.Status, res.NotModified = 304, true
		res.ETag = p.etag
	default:
		res.Status = 200
		res.Fields = p.fields
		for _, l := range p.links {
			res.Links = append(res.Links, wire.Link{URL: l})
		}
		res.ETag, res.LastModified = p.etag, p.lastMod
	}
	if err := s.Out.Send(wire.KindResult, res, time.Second); err != nil {
		t.Fatal(err)
	}
}

const (
	pageA = "https://a.example/people/a"
	pageB = "https://b.example/people/b"
	pageC = "https://c.example/people/c"
	pageD = "https://d.example/people/d"
	lm1   = "Mon, 02 Mar 2026 10:00:00 GMT"
)

// A page fetched by an earlier run and reached by a new record is reused
// as long as it is younger than the recrawl age, and fetched again,
// conditionally, once older; a 304 applies the cached extraction.
func TestRecrawlAfter(t *testing.T) {
	first := `id,name,email,title,links
r1,Ann,,,` + pageA + `
`
	second := first + `r2,Ann,,,` + pageA + `
`
	cases := []struct {
		name      string
		age       time.Duration
		etag, lm  string
		wantTasks int
		wantSent  wire.Task // validators the task carried
	}{
		{"no recrawl age reuses", 0, `"a1"`, lm1, 0, wire.Task{}},
		{"young page reused", time.Hour, `"a1"`, lm1, 0, wire.Task{}},
		{"old page with an etag", time.Nanosecond, `"a1"`, lm1, 1, wire.Task{ETag: `"a1"`, LastModified: lm1}},
		{"old page with last-modified only", time.Nanosecond, "", lm1, 1, wire.Task{LastModified: lm1}},
		{"old page without validators", time.Nanosecond, "", "", 1, wire.Task{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			web := map[string]freshPage{pageA: {fields: []wire.Field{fld("name", "Ann"), fld("email", "ann@a.example"), fld("title", "Chief")},
				etag: c.etag, lastMod: c.lm}}
			one := runFresh(t, dir, nil, first, web)
			if len(one.tasks) != 1 || one.tasks[0].ETag != "" || one.tasks[0].LastModified != "" {
				t.Fatalf("first run tasks %+v, want one unconditional", one.tasks)
			}
			two := runFresh(t, dir, func(c2 *Config) { c2.RecrawlAfter = c.age }, second, web)
			if len(two.tasks) != c.wantTasks {
				t.Fatalf("second run sent %d tasks, want %d: %+v", len(two.tasks), c.wantTasks, two.tasks)
			}
			if c.wantTasks == 1 {
				got := two.tasks[0]
				if got.ETag != c.wantSent.ETag || got.LastModified != c.wantSent.LastModified {
					t.Errorf("task validators %q %q, want %q %q", got.ETag, got.LastModified, c.wantSent.ETag, c.wantSent.LastModified)
				}
				if two.sum.Recrawled != 1 {
					t.Errorf("Recrawled = %d, want 1", two.sum.Recrawled)
				}
				conditional := c.etag != "" || c.lm != ""
				if wantNM := int64(0); conditional {
					wantNM = 1
					if two.sum.NotModified != wantNM || two.sum.Pages != 0 {
						t.Errorf("NotModified %d, Pages %d; want 1 and 0", two.sum.NotModified, two.sum.Pages)
					}
				} else if two.sum.NotModified != 0 || two.sum.Pages != 1 {
					t.Errorf("NotModified %d, Pages %d; want 0 and 1", two.sum.NotModified, two.sum.Pages)
				}
			} else if two.sum.Recrawled != 0 {
				t.Errorf("Recrawled = %d, want 0", two.sum.Recrawled)
			}
			for _, id := range []string{"r1", "r2"} {
				f := two.recs[id].Found
				if f["email"].Value != "ann@a.example" || f["title"].Value != "Chief" {
					t.Errorf("%s found %+v", id, f)
				}
				if len(f["email"].History) > 0 {
					t.Errorf("%s: history %+v without a refresh", id, f["email"].History)
				}
			}
			if two.sum.Complete != 2 {
				t.Errorf("Complete = %d, want 2", two.sum.Complete)
			}
		})
	}
}

// A refresh re-checks the values older than the recrawl age: a changed
// value replaces the old one, which goes to the field's history; an
// unchanged one gets a new At and no history; one no longer found stays;
// a value the user gave is never touched.
func TestRefresh(t *testing.T) {
	dir := t.TempDir()
	records := `id,name,email,title,links
r1,Ann,,,` + pageA + `
r2,Bob,,,` + pageB + `
r3,Cy,cy@mine.example,,` + pageC + `
r4,Dee,,,` + pageD + `
`
	web := map[string]freshPage{
		pageA: {fields: []wire.Field{fld("name", "Ann"), fld("email", "ann@old.example"), fld("title", "Chief")}, etag: `"a1"`},
		pageB: {fields: []wire.Field{fld("name", "Bob"), fld("email", "bob@b.example"), fld("title", "Clerk")}, lastMod: lm1},
		pageC: {fields: []wire.Field{fld("name", "Cy"), fld("email", "cy@other.example"), fld("title", "Boss")}, etag: `"c1"`},
		pageD: {fields: []wire.Field{fld("name", "Dee"), fld("email", "dee@d.example"), fld("title", "Cook")}, etag: `"d1"`},
	}
	one := runFresh(t, dir, nil, records, web)
	if one.sum.Complete != 4 || len(one.tasks) != 4 {
		t.Fatalf("first run: %d complete, %d tasks", one.sum.Complete, len(one.tasks))
	}

	// Ann's page changes, Dee's is gone; Bob's and Cy's are as they were.
	web[pageA] = freshPage{fields: []wire.Field{fld("name", "Ann"), fld("email", "ann@new.example"), fld("title", "Chief")}, etag: `"a2"`}
	web[pageD] = freshPage{gone: true}
	two := runFresh(t, dir, func(c *Config) { c.RecrawlAfter, c.Refresh = time.Nanosecond, true }, records, web)

	sent := map[string]wire.Task{}
	for _, task := range two.tasks {
		sent[task.URL] = task
	}
	wantSent := map[string][2]string{pageA: {`"a1"`, ""}, pageB: {"", lm1}, pageC: {`"c1"`, ""}, pageD: {`"d1"`, ""}}
	if len(two.tasks) != len(wantSent) {
		t.Errorf("refresh sent %d tasks, want %d: %+v", len(two.tasks), len(wantSent), two.tasks)
	}
	for u, v := range wantSent {
		if got := sent[u]; got.ETag != v[0] || got.LastModified != v[1] {
			t.Errorf("task for %s carried %q %q, want %q %q", u, got.ETag, got.LastModified, v[0], v[1])
		}
	}
	s := two.sum
	if s.Changed != 1 || s.Refreshed != 4 || s.Unconfirmed != 2 || s.NotModified != 2 || s.Pages != 1 || s.Complete != 4 {
		t.Errorf("summary changed %d refreshed %d unconfirmed %d not-modified %d pages %d complete %d; want 1 4 2 2 1 4",
			s.Changed, s.Refreshed, s.Unconfirmed, s.NotModified, s.Pages, s.Complete)
	}

	before, after := one.recs, two.recs
	// Changed: the old value is history.
	email := after["r1"].Found["email"]
	old := before["r1"].Found["email"]
	want := []store.Prior{{Value: "ann@old.example", Source: pageA, Mapping: "profile", Depth: 0, At: old.At}}
	if email.Value != "ann@new.example" || len(email.History) != 1 {
		t.Fatalf("r1 email %+v", email)
	}
	if email.History[0].Replaced.Before(old.At) || email.History[0].Replaced.After(time.Now()) {
		t.Errorf("r1 email replaced at %v", email.History[0].Replaced)
	}
	got := append([]store.Prior(nil), email.History...)
	got[0].Replaced = time.Time{}
	if !historyEqual(got, want) {
		t.Errorf("r1 email history %+v, want %+v", got, want)
	}
	// Unchanged, fetched again (r1 title) or answered 304 (r2, r3 title):
	// a newer At and no history.
	for _, c := range []struct{ rec, field, value string }{
		{"r1", "title", "Chief"}, {"r2", "email", "bob@b.example"}, {"r2", "title", "Clerk"}, {"r3", "title", "Boss"},
	} {
		v, was := after[c.rec].Found[c.field], before[c.rec].Found[c.field]
		if v.Value != c.value || len(v.History) != 0 || !v.At.After(was.At) {
			t.Errorf("%s %s = %+v, was %+v: want %q unchanged with a newer At and no history", c.rec, c.field, v, was, c.value)
		}
	}
	// Not found again: the old value stands as it was.
	for _, f := range []string{"email", "title"} {
		v, was := after["r4"].Found[f], before["r4"].Found[f]
		if v.Value != was.Value || !v.At.Equal(was.At) || len(v.History) != 0 {
			t.Errorf("r4 %s = %+v, want it as it was: %+v", f, v, was)
		}
	}
	// The user's own value is never a target.
	if v, ok := after["r3"].Found["email"]; ok {
		t.Errorf("r3's own email was overwritten by %+v", v)
	}
	if after["r3"].Fields["email"] != "cy@mine.example" {
		t.Errorf("r3 email input %q", after["r3"].Fields["email"])
	}

	// Refreshing again at once finds nothing old enough.
	three := runFresh(t, dir, func(c *Config) { c.RecrawlAfter, c.Refresh = time.Hour, true }, records, web)
	if len(three.tasks) != 0 || three.sum.Refreshed+three.sum.Changed+three.sum.Unconfirmed != 0 {
		t.Errorf("a refresh of fresh values sent %d tasks, summary %+v", len(three.tasks), three.sum)
	}
	if h3, h2 := three.recs["r1"].Found["email"].History, after["r1"].Found["email"].History; !historyEqual(h3, h2) {
		t.Errorf("history changed by an empty refresh: %+v, was %+v", h3, h2)
	}
}

// historyEqual compares histories with times by Equal.
func historyEqual(a, b []store.Prior) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Value != y.Value || x.Source != y.Source || x.Mapping != y.Mapping || x.Depth != y.Depth ||
			!x.At.Equal(y.At) || !x.Replaced.Equal(y.Replaced) {
			return false
		}
	}
	return true
}

// Refresh without a recrawl age is a configuration error.
func TestRefreshNeedsAge(t *testing.T) {
	_, err := New(Config{StateDir: t.TempDir(), Mappings: loadSet(t), Store: nil, Refresh: true})
	if err == nil {
		t.Fatal("New accepted Refresh without a store or age")
	}
	dir := t.TempDir()
	st, err := store.Open(context.Background(), dir+"/out.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = New(Config{StateDir: dir, Listen: "tcp://127.0.0.1:*", Mappings: loadSet(t), Store: st, Refresh: true})
	if err == nil || !strings.Contains(err.Error(), "recrawl age") {
		t.Fatalf("New = %v, want an error about the recrawl age", err)
	}
}

// Records taken in together that all reach one page older than the
// recrawl age queue it once: the page is fetched once and counted once.
func TestRecrawlOnceForManyRecords(t *testing.T) {
	dir := t.TempDir()
	web := map[string]freshPage{pageA: {fields: []wire.Field{fld("name", "Ann"), fld("email", "ann@a.example"), fld("title", "Chief")}}}
	first := "id,name,email,title,links\nr1,Ann,,," + pageA + "\n"
	runFresh(t, dir, nil, first, web)
	second := first + "r2,Ann,,," + pageA + "\nr3,Ann,,," + pageA + "\n"
	two := runFresh(t, dir, func(c *Config) { c.RecrawlAfter = time.Nanosecond }, second, web)
	if len(two.tasks) != 1 || two.sum.Recrawled != 1 {
		t.Errorf("second run sent %d tasks and counted %d recrawled, want 1 and 1", len(two.tasks), two.sum.Recrawled)
	}
	if two.sum.Complete != 3 {
		t.Errorf("Complete = %d, want 3", two.sum.Complete)
	}
}
