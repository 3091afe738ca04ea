package dispatcher

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"backfill/store"
	"backfill/wire"
)

const (
	ann    = "https://a.example/people/ann"
	zed    = "https://a.example/people/zed" // a decoy: someone else's profile
	about  = "https://a.example/about"
	deep   = "https://a.example/deep" // depth 2: beyond the limit
	team   = "https://shared.example/team"
	bob    = "https://b.example/people/bob"
	bob2   = "https://d.example/people/bob"
	cyPage = "https://c.example/people/cy"
)

func crawlWeb() map[string]page {
	return map[string]page{
		ann:    {fields: []wire.Field{fld("name", "Ann Lee"), fld("email", "ann@a.example")}, links: []string{zed, about, team}},
		zed:    {fields: []wire.Field{fld("name", "Zed Null"), fld("title", "Decoy Title"), fld("phone", "555")}},
		about:  {fields: []wire.Field{fld("email", "info@a.example"), fld("title", "Engineer")}, links: []string{deep}},
		deep:   {fields: []wire.Field{fld("phone", "999")}},
		team:   {fields: []wire.Field{fld("title", "Team")}},
		bob:    {fields: []wire.Field{fld("name", "Bob Roe")}, links: []string{bob2}},
		bob2:   {fields: []wire.Field{fld("name", "  bob  ROÉ "), fld("phone", "777")}},
		cyPage: {class: "status"},
	}
}

const crawlRecords = `id,name,email,title,phone,site,links
r1,Ann Lee,,,,` + ann + `,
r2,Bob Roe,bob@b.example,,,,` + bob + " " + team + `
r3,Cy,,,,` + cyPage + `,
r4,Dee,,,,,
r5,Eve,e@e.example,Boss,1,,
`

func TestCrawl(t *testing.T) {
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Fields = []string{"email", "title", "phone"}
	})
	rep := e.load("people.csv", crawlRecords)
	if rep.Records != 5 || rep.New != 5 || rep.Bad != 0 {
		t.Fatalf("load report %+v", rep)
	}
	sups := e.runWithTwo()
	st := crawl(t, e, sups, crawlWeb(), 20*time.Second)
	if e.err != nil {
		t.Fatalf("Run: %v", e.err)
	}

	// Routing: one supervisor per registrable domain.
	for dom, sups := range st.supOfDomain {
		if len(sups) != 1 {
			t.Errorf("domain %s went to %d supervisors: %v", dom, len(sups), sups)
		}
	}
	// Each URL once; nothing beyond the depth limit.
	want := []string{ann, zed, about, team, bob, bob2, cyPage}
	sort.Strings(want)
	var got []string
	for u, n := range st.requests {
		got = append(got, u)
		if n != 1 {
			t.Errorf("%s requested %d times", u, n)
		}
	}
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("requested %q\nwant %q", got, want)
	}
	for _, task := range st.tasks {
		wantDepth := 1
		if task.URL == ann || task.URL == bob || task.URL == team || task.URL == cyPage {
			wantDepth = 0
		}
		if task.Depth != wantDepth {
			t.Errorf("%s sent at depth %d, want %d", task.URL, task.Depth, wantDepth)
		}
	}

	recs := e.records()
	r1 := recs["r1"].Found
	check := func(rec string, found map[string]store.Value, field, value, source string, conflicts ...store.Conflict) {
		t.Helper()
		v, ok := found[field]
		if !ok {
			t.Errorf("%s.%s missing, want %q", rec, field, value)
			return
		}
		if v.Value != value || v.Source != source {
			t.Errorf("%s.%s = %q from %s, want %q from %s", rec, field, v.Value, v.Source, value, source)
		}
		if len(conflicts) > 0 && !reflect.DeepEqual(v.Conflicts, conflicts) {
			t.Errorf("%s.%s conflicts = %+v, want %+v", rec, field, v.Conflicts, conflicts)
		}
	}
	// The nearer page wins a conflict; the loser is kept.
	check("r1", r1, "email", "ann@a.example", ann, store.Conflict{Value: "info@a.example", Source: about, Depth: 1})
	// A tie at one depth goes to the smaller URL; the shared page was
	// applied to r1 too, so its value is the conflict.
	check("r1", r1, "title", "Engineer", about, store.Conflict{Value: "Team", Source: team, Depth: 1})
	// The decoy's phone never lands; neither does the page past the limit.
	if v, ok := r1["phone"]; ok {
		t.Errorf("r1.phone = %+v: a decoy or too-deep page leaked", v)
	}
	for _, v := range r1 {
		for _, c := range v.Conflicts {
			if c.Source == zed {
				t.Errorf("r1.%s has a conflict from the decoy: %+v", v.Field, c)
			}
		}
	}
	r2 := recs["r2"].Found
	check("r2", r2, "title", "Team", team)
	check("r2", r2, "phone", "777", bob2) // the name matches after normalization
	if _, ok := r2["email"]; ok {
		t.Errorf("r2.email written though it was not a target")
	}
	if len(recs["r3"].Found)+len(recs["r4"].Found)+len(recs["r5"].Found) != 0 {
		t.Errorf("unexpected values on r3/r4/r5")
	}

	s := e.sum
	if s.Records != 5 || s.Complete != 2 || s.Skipped != 1 || s.Partial != 1 || s.Untouched != 2 {
		t.Errorf("summary counts %+v", s)
	}
	if !reflect.DeepEqual(s.UntouchedIDs, []string{"r3", "r4"}) {
		t.Errorf("untouched ids %q", s.UntouchedIDs)
	}
	if s.Pages != 6 || s.Errors["status"] != 1 || s.Late != 0 {
		t.Errorf("summary pages %d errors %v late %d", s.Pages, s.Errors, s.Late)
	}
}

func TestFlowControl(t *testing.T) {
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.HostInFlight = 2
		c.Fields = []string{"phone"}
	})
	var links []string
	web := make(map[string]page)
	for i := range 20 {
		for _, h := range []string{"busy.example", fmt.Sprintf("h%d.example", i)} {
			u := fmt.Sprintf("https://%s/p%d", h, i)
			links = append(links, u)
			web[u] = page{}
		}
	}
	content := "id,links\nr1,"
	for _, l := range links {
		content += l + " "
	}
	e.load("r.csv", content+"\n")
	s1 := newSup(t, "s1", e.d.Endpoint(), 4, false, e.set.Digest())
	e.run(context.Background())
	if !s1.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	st := crawl(t, e, []*testSup{s1}, web, 20*time.Second)
	if len(st.requests) != 40 {
		t.Errorf("%d URLs requested, want 40", len(st.requests))
	}
	// The limits were reached (so the checks in crawl could fail), never passed.
	if st.maxSup["s1"] != 4 || st.maxHost != 2 {
		t.Errorf("max in flight: supervisor %d (cap 4), host %d (limit 2)", st.maxSup["s1"], st.maxHost)
	}
	if e.sum.Pages != 40 || e.sum.Untouched != 1 {
		t.Errorf("summary %+v", e.sum)
	}
}

func TestCompletionDropsQueuedTasks(t *testing.T) {
	e := newEnv(t, t.TempDir(), func(c *Config) { c.Fields = []string{"email"} })
	l := func(i int) string { return fmt.Sprintf("https://l%d.example/", i) }
	web := map[string]page{l(1): {fields: []wire.Field{fld("email", "x@l1.example")}}}
	for i := 2; i <= 5; i++ {
		web[l(i)] = page{}
	}
	e.load("r.csv", csvOf("id,links",
		fmt.Sprintf("rx,%s %s %s %s %s", l(1), l(2), l(3), l(4), l(5)),
		"ry,"+l(5)))
	s1 := newSup(t, "s1", e.d.Endpoint(), 1, false, e.set.Digest())
	e.run(context.Background())
	if !s1.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	st := crawl(t, e, []*testSup{s1}, web, 20*time.Second)
	var got []string
	for _, task := range st.tasks {
		got = append(got, task.URL)
	}
	// rx completes on l1; l2..l4 are dropped; l5 stays because ry wants it.
	if want := []string{l(1), l(5)}; !reflect.DeepEqual(got, want) {
		t.Errorf("requested %q, want %q", got, want)
	}
	if e.sum.Complete != 1 || e.sum.Untouched != 1 {
		t.Errorf("summary %+v", e.sum)
	}
}

func TestLeaseExpiryAndLateResult(t *testing.T) {
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Lease = 300 * time.Millisecond
		c.Fields = []string{"email"}
	})
	e.load("r.jsonl", `{"id":"r1","links":["https://x.example/"]}`+"\n")
	web := map[string]page{"https://x.example/": {fields: []wire.Field{fld("email", "a@x.example")}}}
	s1 := newSup(t, "s1", e.d.Endpoint(), 2, false, e.set.Digest())
	e.run(context.Background())
	if !s1.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(s1.got) < 2 && time.Now().Before(deadline) {
		s1.poll(50 * time.Millisecond) // holds the first task: its lease expires
	}
	if len(s1.got) < 2 {
		t.Fatalf("task not re-sent after its lease expired (got %d)", len(s1.got))
	}
	first, last := s1.got[0], s1.got[len(s1.got)-1]
	if first.ID != last.ID {
		t.Fatalf("re-sent task %+v after %+v: want the same id", last, first)
	}
	s1.answer(first, web) // the expired lease
	s1.answer(last, web)  // its renewal
	s1.answer(last, web)  // duplicate
	s1.held = nil
	crawl(t, e, []*testSup{s1}, web, 10*time.Second)
	if e.err != nil {
		t.Fatal(e.err)
	}
	if e.sum.Pages != 1 || e.sum.Expired < 1 || e.sum.Complete != 1 {
		t.Errorf("summary %+v", e.sum)
	}
	// The expired lease and its renewal went to one member: they share
	// a token (cluster.Tokens), so whichever answer comes first is taken
	// and the others are late; the run ends as soon as the record
	// completes, so those may arrive after it. The page counts once.
	if v := e.records()["r1"].Found["email"]; v.Value != "a@x.example" {
		t.Errorf("email %+v", v)
	}
}

func TestResume(t *testing.T) {
	dir := t.TempDir()
	web := make(map[string]page)
	var lines []string
	lines = append(lines, "id,links")
	for i := range 6 {
		u := fmt.Sprintf("https://p%d.example/", i)
		sub := fmt.Sprintf("https://p%d.example/sub", i)
		web[u] = page{links: []string{sub}}
		web[sub] = page{fields: []wire.Field{fld("email", fmt.Sprintf("%d@p.example", i))}}
		lines = append(lines, fmt.Sprintf("r%d,%s", i, u))
	}
	records := csvOf(lines...)
	tweak := func(c *Config) { c.Fields = []string{"email"} }

	// First run: answer three tasks, hold the rest, stop.
	e := newEnv(t, dir, tweak)
	e.load("r.csv", records)
	ctx, cancel := context.WithCancel(context.Background())
	s1 := newSup(t, "s1", e.d.Endpoint(), 4, false, e.set.Digest())
	e.run(ctx)
	if !s1.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	answered := make(map[string]bool)
	deadline := time.Now().Add(10 * time.Second)
	for len(answered) < 3 && time.Now().Before(deadline) {
		s1.poll(20 * time.Millisecond)
		for _, task := range s1.held {
			if len(answered) < 3 && !answered[task.URL] {
				s1.answer(task, web)
				answered[task.URL] = true
			}
		}
	}
	for e.pages.Load() < 3 && time.Now().Before(deadline) {
		s1.poll(20 * time.Millisecond)
	}
	if e.pages.Load() < 3 {
		t.Fatalf("first run committed %d pages, want 3", e.pages.Load())
	}
	// s1 holds a task it has not answered when the dispatcher goes.
	var unanswered *wire.Task
	for unanswered == nil && time.Now().Before(deadline) {
		s1.poll(20 * time.Millisecond)
		for i, task := range s1.held {
			if !answered[task.URL] {
				unanswered = &s1.held[i]
				break
			}
		}
	}
	if unanswered == nil {
		t.Fatal("s1 never held a task beyond the three it answered")
	}
	cancel()
	<-e.done
	e.close()

	// Second run on the same state: done URLs are not fetched again. s1's
	// answer to its old lease reaches the new dispatcher before anything
	// is dispatched: the task, queued again, is taken from it.
	e2 := newEnv(t, dir, tweak)
	if rep := e2.load("r.csv", records); rep.Records != 6 || rep.New != 0 {
		t.Errorf("reload report %+v, want 6 records, 0 new", rep)
	}
	late := newSup(t, "s1", e2.d.Endpoint(), 4, false, e2.set.Digest())
	e2.run(context.Background())
	late.answer(*unanswered, web)
	answered[unanswered.URL] = true
	for e2.pages.Load() < 1 && time.Now().Before(deadline) {
		late.poll(20 * time.Millisecond)
	}
	s2 := newSup(t, "s2", e2.d.Endpoint(), 4, false, e2.set.Digest())
	if !s2.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	st := crawl(t, e2, []*testSup{s2}, web, 20*time.Second)
	for u := range st.requests {
		if answered[u] {
			t.Errorf("%s fetched again after resume", u)
		}
	}
	if e2.sum.Adopted != 1 || e2.sum.Late != 0 {
		t.Errorf("adopted %d, late %d results; want the earlier lease's one adopted", e2.sum.Adopted, e2.sum.Late)
	}
	if len(st.requests)+len(answered) != len(web) {
		t.Errorf("fetched %d + %d URLs, want %d", len(answered), len(st.requests), len(web))
	}
	if e2.sum.Complete != 6 {
		t.Errorf("summary %+v", e2.sum)
	}
	for id, r := range e2.records() {
		if r.Found["email"].Value == "" {
			t.Errorf("record %s has no email after resume", id)
		}
	}
}

func TestMembership(t *testing.T) {
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Fields = []string{"phone"}
	})
	plain, app := "https://p.example/x", "https://r.example/app/1"
	web := map[string]page{plain: {}, app: {}} // r1 never completes: every task must be answered
	e.load("r.csv", csvOf("id,links", "r1,"+plain+" "+app))
	digest := e.set.Digest()
	wrong := newSup(t, "wrong", e.d.Endpoint(), 4, true, "other-digest")
	a := newSup(t, "a", e.d.Endpoint(), 4, false, digest)
	e.run(context.Background())
	if wrong.join(500 * time.Millisecond) {
		t.Fatal("a supervisor with other mappings was welcomed")
	}
	if !a.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	// a takes the plain task, goes silent holding it, and is dropped.
	deadline := time.Now().Add(10 * time.Second)
	for len(a.got) == 0 && time.Now().Before(deadline) {
		a.poll(20 * time.Millisecond)
	}
	if len(a.got) != 1 || a.got[0].URL != plain || a.got[0].Render {
		t.Fatalf("a got %+v, want only the plain task", a.got)
	}
	for e.wait.Load() != 1 && time.Now().Before(deadline) {
		a.poll(20 * time.Millisecond)
	}
	if e.wait.Load() != 1 {
		t.Fatalf("render tasks waiting = %d, want 1", e.wait.Load())
	}
	// The status file shows a holding the plain task and the render task
	// waiting for a member that renders.
	var st Status
	for time.Now().Before(deadline) {
		a.poll(20 * time.Millisecond)
		var err error
		if st, err = ReadStatus(e.cfg.StateDir); err == nil && st.WaitingRender == 1 && len(st.Members) == 1 && st.Members[0].InFlight == 1 {
			break
		}
	}
	if st.State != StateRunning || st.Records != 1 || st.WaitingRender != 1 || st.InFlight != 1 ||
		len(st.Members) != 1 || st.Members[0].Name != "a" || st.Members[0].InFlight != 1 || st.Members[0].Capacity != 4 {
		t.Fatalf("status while a holds the plain task: %+v", st)
	}
	a.Silent = true
	silentAt := time.Now() // a is dropped three heartbeats after its last
	// b (render-capable) joins: it gets the render task, and the plain task
	// once a is dropped for silence.
	b := newSup(t, "b", e.d.Endpoint(), 4, true, digest)
	if !b.join(5 * time.Second) {
		t.Fatal("no welcome for b")
	}
	crawl(t, e, []*testSup{b}, web, 10*time.Second)
	var got []string
	for _, task := range b.got {
		got = append(got, task.URL)
		// The plain task moved from a, which may go on requesting it
		// until its lease is over and its longest request (a minute, as
		// its Hello says none) after: it carries that time to b. The
		// render task never moved.
		switch {
		case task.URL == plain && (task.HostLast.Before(silentAt.Add(DefaultMemberLease)) || task.HostLast.After(time.Now().Add(DefaultMemberLease+time.Minute))):
			t.Errorf("the moved task's HostLast = %v, want a's lease and a minute after it was last heard (about %v)", task.HostLast, silentAt.Add(DefaultMemberLease+time.Minute))
		case task.URL == app && !task.HostLast.IsZero():
			t.Errorf("a task that never moved carries HostLast %v", task.HostLast)
		}
	}
	sort.Strings(got)
	if want := []string{plain, app}; !reflect.DeepEqual(got, []string{want[0], want[1]}) {
		t.Errorf("b got %q, want %q", got, want)
	}
	if e.sum.Refused < 1 || e.sum.Untouched != 1 || e.sum.Pages != 2 {
		t.Errorf("summary %+v", e.sum)
	}
	st, err := ReadStatus(e.cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateFinished || st.Pages != 2 || st.Records != 1 || st.Queued != 0 || st.InFlight != 0 ||
		len(st.Members) != 1 || st.Members[0].Name != "b" || !st.Members[0].Render ||
		len(st.Left) != 1 || st.Left[0].Name != "a" || st.Left[0].Reason != "silent" || st.Left[0].Left.IsZero() {
		t.Errorf("final status: %+v", st)
	}
}

// TestExpectedMembersWithoutRender: when every supervisor the crawl expects
// has joined and none renders, render tasks can never be served; the run
// ends once the rest is done and counts them as waiting, rather than wait
// for a render node that will not come.
func TestExpectedMembersWithoutRender(t *testing.T) {
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Fields = []string{"phone"}
		c.Expect = 1
	})
	plain, app := "https://p.example/x", "https://r.example/app/1"
	web := map[string]page{plain: {}, app: {}}
	e.load("r.csv", csvOf("id,links", "r1,"+plain+" "+app))
	a := newSup(t, "a", e.d.Endpoint(), 4, false, e.set.Digest())
	e.run(context.Background())
	if !a.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	crawl(t, e, []*testSup{a}, web, 10*time.Second)
	if len(a.got) != 1 || a.got[0].URL != plain {
		t.Errorf("a got %+v, want only the plain task", a.got)
	}
	if e.sum.Waiting != 1 || e.sum.Pages != 1 {
		t.Errorf("summary waiting %d pages %d, want 1 and 1", e.sum.Waiting, e.sum.Pages)
	}
}
