package dispatcher

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backfill/etl"
	"backfill/wire"
)

// textPage is a fetched page with visible text, answered with the content
// fingerprint a supervisor computes.
type textPage struct {
	text  string
	title string
	links []string
}

// answerText answers task as a supervisor would for a page of web.
func answerText(t *testing.T, s *testSup, task wire.Task, web map[string]textPage) {
	t.Helper()
	res := wire.Result{TaskID: task.ID, Lease: task.Lease, Supervisor: s.Hello.Supervisor, URL: task.URL, FetchedAt: time.Now()}
	p, ok := web[task.URL]
	if !ok {
		res.Class, res.Status = "status", 404
	} else {
		res.Status = 200
		if p.title != "" {
			res.Fields = []wire.Field{fld("title", p.title)}
		}
		for _, l := range p.links {
			res.Links = append(res.Links, wire.Link{URL: l})
		}
		fp := etl.TextFingerprint(p.text)
		res.TextHash, res.Simhash, res.Words = fp.Exact[:], fp.Sim, fp.Words
	}
	if err := s.Out.Send(wire.KindResult, res, time.Second); err != nil {
		t.Fatal(err)
	}
}

// crawlText answers every task from web until Run returns, and reports
// which URLs were requested.
func crawlText(t *testing.T, e *env, s *testSup, web map[string]textPage) map[string]bool {
	t.Helper()
	requested := make(map[string]bool)
	deadline := time.Now().Add(20 * time.Second)
	for !e.finished() {
		if time.Now().After(deadline) {
			t.Fatal("dispatcher still running after 20s")
		}
		s.poll(10 * time.Millisecond)
		for _, task := range s.held {
			requested[task.URL] = true
			answerText(t, s, task, web)
		}
		s.held = nil
	}
	if e.err != nil {
		t.Fatalf("Run: %v", e.err)
	}
	return requested
}

// startText runs e with one supervisor that has joined.
func startText(t *testing.T, e *env) *testSup {
	t.Helper()
	s := newSup(t, "s1", e.d.Endpoint(), 4, false, e.set.Digest())
	e.run(context.Background())
	if !s.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	return s
}

// TestDuplicatePages: of two URLs that serve the same text, the one committed
// second is a duplicate: its values still go to its record, its links are
// not followed. Short pages are never duplicates. A dispatcher that
// resumes still knows the fingerprints: a third copy, or a copy with one
// word changed, is a duplicate too.
func TestDuplicatePages(t *testing.T) {
	var words []string
	for i := range 200 {
		words = append(words, fmt.Sprintf("word%d", i))
	}
	body := "Profile template. " + strings.Join(words, " ")
	edited := strings.Replace(body, "word100 ", "changed ", 1)
	a, b := etl.TextFingerprint(body), etl.TextFingerprint(edited)
	if a.Exact == b.Exact || etl.SimDistance(a.Sim, b.Sim) > simMaxDistance {
		t.Fatalf("fixture: the edited text is not a near duplicate (distance %d)", etl.SimDistance(a.Sim, b.Sim))
	}
	// Copies on one host are duplicates; the same text on other hosts
	// (one template, many sites) is not, and their links are followed.
	const (
		pa, pb, pe, pf = "https://a.example/p", "https://a.example/q", "https://a.example/r", "https://a.example/s"
		sc, sd         = "https://c.example/p", "https://d.example/p"
		px, py         = "https://x.example/p", "https://y.example/p"
	)
	sub := func(p string) string { return p + "/sub" }
	web := map[string]textPage{
		pa: {text: body, title: "A", links: []string{sub(pa)}},
		pb: {text: body, title: "B", links: []string{sub(pb)}},
		sc: {text: "Loading, please wait", title: "C", links: []string{sub(sc)}},
		sd: {text: "Loading, please wait", title: "D", links: []string{sub(sd)}},
		pe: {text: body, title: "E", links: []string{sub(pe)}},
		pf: {text: edited, title: "F", links: []string{sub(pf)}},
		px: {text: body, title: "X", links: []string{sub(px)}},
		py: {text: body, title: "Y", links: []string{sub(py)}},
	}
	for _, p := range []string{pa, pb, sc, sd, pe, pf, px, py} {
		web[sub(p)] = textPage{text: "contact page of " + p}
	}
	dir := t.TempDir()
	tweak := func(c *Config) { c.Fields = []string{"email", "title"} }

	e := newEnv(t, dir, tweak)
	e.load("r.csv", csvOf("id,links", "ra,"+pa, "rb,"+pb, "rc,"+sc, "rd,"+sd, "rx,"+px, "ry,"+py))
	got := crawlText(t, e, startText(t, e), web)
	if e.sum.Duplicates != 1 {
		t.Errorf("Summary.Duplicates = %d, want 1", e.sum.Duplicates)
	}
	// Whichever of a and b was committed first is the original; the
	// other's link is not followed.
	if got[sub(pa)] == got[sub(pb)] {
		t.Errorf("links followed: a's %v, b's %v; want exactly one", got[sub(pa)], got[sub(pb)])
	}
	if !got[pa] || !got[pb] || !got[sub(sc)] || !got[sub(sd)] {
		t.Errorf("requested %v: want both copies and both short pages' links", got)
	}
	if !got[sub(px)] || !got[sub(py)] {
		t.Errorf("requested %v: the same text on two other hosts is not a duplicate; want both their links", got)
	}
	recs := e.records()
	for id, want := range map[string]string{"ra": "A", "rb": "B", "rc": "C", "rd": "D"} {
		if v := recs[id].Found["title"]; v.Value != want {
			t.Errorf("%s.title = %+v, want %q: a duplicate's values still apply", id, v, want)
		}
	}
	orig, dup := pa, pb
	if got[sub(pb)] {
		orig, dup = pb, pa
	}
	e.close()

	// The state records the duplicate against the first page.
	db, err := sql.Open("sqlite", filepath.Join(dir, "state", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	var first string
	err = db.QueryRow(`SELECT duplicate_of FROM fingerprints WHERE url = ?`, dup).Scan(&first)
	db.Close()
	if err != nil || first != orig {
		t.Errorf("state: %s duplicate of %q (%v), want %q", dup, first, err, orig)
	}

	// Resumed: a third copy and a near copy are duplicates of the first.
	e2 := newEnv(t, dir, tweak)
	e2.load("r2.csv", csvOf("id,links", "re,"+pe, "rf,"+pf))
	got = crawlText(t, e2, startText(t, e2), web)
	if e2.sum.Duplicates != 2 {
		t.Errorf("after resume: Summary.Duplicates = %d, want 2", e2.sum.Duplicates)
	}
	if !got[pe] || !got[pf] || got[sub(pe)] || got[sub(pf)] {
		t.Errorf("after resume requested %v: want e and f, not their links", got)
	}
	recs = e2.records()
	if recs["re"].Found["title"].Value != "E" || recs["rf"].Found["title"].Value != "F" {
		t.Errorf("after resume: titles %+v %+v", recs["re"].Found["title"], recs["rf"].Found["title"])
	}
}
