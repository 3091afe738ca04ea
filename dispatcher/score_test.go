package dispatcher

import (
	"container/heap"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backfill/etl"
	"backfill/linkscore"
	"backfill/store"
	"backfill/wire"
)

// logLines are the JSON log lines of l whose msg is msg.
func logLines(t *testing.T, l *syncBuffer, msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(l.String(), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// profileSet is a mapping set of one profile mapping (/people/ pages:
// name, the match key, and email) and nothing generic: a page outside
// /people/ gives no record anything.
func profileSet(t *testing.T) *etl.Set {
	t.Helper()
	dir := t.TempDir()
	m := `[{"name": "profile", "url_patterns": [{"type": "regex", "pattern": "^https?://[^/]+/people/"}],
		"fields": [{"name": "name", "match": true, "processors": [{"type": "xpath", "parameters": {"expression": "//h1/text()"}}]},
			{"name": "email", "processors": [{"type": "xpath", "parameters": {"expression": "//a[@class='email']/text()"}}]}]}]`
	if err := os.WriteFile(filepath.Join(dir, "profile.json"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := etl.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestFrontierPrunesAtLastDepth: at the depth limit, a link whose page no
// mapping runs on can give the record nothing, and is not fetched; the
// summary counts it by reason, and a debug log line says why, as another
// says why each link followed was (its cue, the anchor text naming the
// record included). Requests are counted per record completed.
func TestFrontierPrunesAtLastDepth(t *testing.T) {
	const (
		home   = "https://a.example/home"
		about  = "https://a.example/about"
		ann    = "https://a.example/people/42"
		other  = "https://b.example/people/zed-null"
		anchor = "Ann Lee's profile"
	)
	var logs syncBuffer
	e := newEnvSet(t, t.TempDir(), profileSet(t), func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	e.load("r.csv", csvOf("id,name,email,link", "r1,Ann Lee,,"+home))
	web := map[string]page{
		home:  {links: []string{about, ann, other}, texts: map[string]string{ann: anchor, about: "About"}},
		about: {fields: []wire.Field{fld("email", "never@a.example")}},
		ann:   {fields: []wire.Field{fld("name", "Ann Lee"), fld("email", "ann@a.example")}},
		other: {fields: []wire.Field{fld("name", "Zed Null")}},
	}
	sups := e.runWithTwo()
	st := crawl(t, e, sups, web, 20*time.Second)
	if e.err != nil {
		t.Fatalf("Run: %v", e.err)
	}
	if st.requests[about] != 0 || st.requests[home] != 1 || st.requests[ann] != 1 {
		t.Errorf("requests %v: want the homepage and Ann's profile, not %s", st.requests, about)
	}
	if e.sum.Pruned[PruneLastDepth] != 1 || e.sum.Complete != 1 {
		t.Errorf("pruned %v, %d complete; want %s pruned at the last depth, the record complete", e.sum.Pruned, e.sum.Complete, about)
	}
	if n := int64(len(st.requests)); e.sum.Requests != n || e.sum.RequestsPerComplete != float64(n) {
		t.Errorf("requests %d, %.1f per complete record; want %d", e.sum.Requests, e.sum.RequestsPerComplete, n)
	}
	pruned := logLines(t, &logs, "link pruned")
	if len(pruned) != 1 || pruned[0]["url"] != about || pruned[0]["reason"] != PruneLastDepth || pruned[0]["record"] != "r1" ||
		!strings.Contains(pruned[0]["cue"].(string), "no-match") {
		t.Errorf("link pruned lines %v, want one for %s, reason %s, with its cue", pruned, about, PruneLastDepth)
	}
	taken := map[string]map[string]any{}
	for _, l := range logLines(t, &logs, "link taken") {
		taken[l["url"].(string)] = l
	}
	if l := taken[ann]; l == nil || !strings.Contains(l["cue"].(string), "naming=full") || l["value"].(float64) <= 0 {
		t.Errorf("link taken for %s: %v; want its cue naming the record by its anchor, and its value", ann, l)
	}
	if l := taken[other]; l != nil && strings.Contains(l["cue"].(string), "naming=full") {
		t.Errorf("link taken for %s: %v names the record", other, l)
	}
}

// TestWindowOrderByLevel: a host's queue gives its tasks by priority,
// then score level, then depth, then seq; the ready heap puts the host
// with the best task first.
func TestWindowOrderByLevel(t *testing.T) {
	w := newWindow()
	mk := func(key int64, host string, level, depth int) *task {
		return &task{key: key, url: "http://" + host + "/", host: host, domain: host, level: level, depth: depth, seq: key}
	}
	for _, tk := range []*task{mk(1, "a.test", 0, 0), mk(2, "a.test", 3, 2), mk(3, "a.test", 3, 1), mk(4, "a.test", 1, 0),
		mk(5, "b.test", 2, 0), {key: 6, url: "http://a.test/p", host: "a.test", domain: "a.test", priority: 1, seq: 6}} {
		if !w.add(tk, false) {
			t.Fatalf("task %d not added", tk.key)
		}
	}
	if q := w.ready[0]; q.host != "a.test" {
		t.Errorf("first host %s, want a.test (a task of priority 1)", q.host)
	}
	q := w.hosts["a.test"]
	var order []int64
	for q.tasks.Len() > 0 {
		order = append(order, heap.Pop(&q.tasks).(*task).key)
	}
	if got, want := order, []int64{6, 3, 2, 4, 1}; !equalKeys(got, want) {
		t.Errorf("a.test's tasks in order %v, want %v", got, want)
	}
}

func equalKeys(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTrailLearning: what the pages give goes back into the model. A
// record's own link leads to a page whose links are followed: one fails,
// one gives a value, so the own link counts as having led to one; a
// page whose links all gave nothing counts as having led nowhere once the
// last of them is done with, and closes its own source in turn.
func TestTrailLearning(t *testing.T) {
	d := &Dispatcher{score: newScoring(), cfg: Config{Depth: 2}}
	s := d.score
	r := &recState{seq: 1, targets: []string{"email"}, filled: map[string]store.Value{}}
	own := linkscore.Cue{Match: true, Source: linkscore.SourceOwn}
	named := linkscore.Cue{Match: true, Naming: linkscore.NameFull, Source: linkscore.SourceNeutral, Fanout: linkscore.FanoutFew}
	other := linkscore.Cue{Match: true, Naming: linkscore.NameNone, Source: linkscore.SourceNeutral, Fanout: linkscore.FanoutFew}
	res := &cachedResult{Source: "http://h.test/"}

	// Own link 10 → page with links 11 (fails) and 12 (gives).
	s.remember(trailKey{10, 1}, own, 0)
	d.learn(applyItem{key: 10, depth: 0, res: res}, r, false)
	d.tried(applyItem{key: 10}, r)
	s.remember(trailKey{11, 1}, other, 10)
	s.remember(trailKey{12, 1}, named, 10)
	d.applied(applyItem{key: 10}, r)
	if e := s.trail[trailKey{10, 1}]; e.open != 2 || e.done {
		t.Fatalf("own link after its page's links were followed: %+v, want 2 open, not done", e)
	}
	s.failedFor(11, []int64{1})
	d.learn(applyItem{key: 12, depth: 1, res: res}, r, true)
	d.applied(applyItem{key: 12}, r)
	if e := s.trail[trailKey{10, 1}]; !e.led || !e.done || e.open != 0 {
		t.Errorf("own link after its page's links: %+v, want led and done", e)
	}

	// Own link 20 → page with link 21 → page with link 22, pruned.
	s.remember(trailKey{20, 1}, own, 0)
	d.learn(applyItem{key: 20, depth: 0, res: res}, r, false)
	d.tried(applyItem{key: 20}, r)
	s.remember(trailKey{21, 1}, other, 20)
	d.applied(applyItem{key: 20}, r)
	d.learn(applyItem{key: 21, depth: 1, res: res}, r, false)
	d.tried(applyItem{key: 21}, r)
	s.remember(trailKey{22, 1}, other, 21)
	d.applied(applyItem{key: 21}, r)
	s.finish(trailKey{22, 1})
	for _, k := range []int64{20, 21} {
		if e := s.trail[trailKey{k, 1}]; e.led || !e.done {
			t.Errorf("link %d: %+v, want done, not led", k, e)
		}
	}
	// Those failures wait for the record's next value: then they count.
	if n := len(s.pending[1]); n != 4 {
		t.Errorf("%d failures pending, want 4 (20 and 21 gave nothing, led nowhere)", n)
	}
	s.remember(trailKey{30, 1}, named, 0)
	d.learn(applyItem{key: 30, depth: 1, res: res}, r, true)
	if len(s.pending[1]) != 0 || s.npending != 0 {
		t.Errorf("failures still pending after a value: %v", s.pending)
	}

	rates := map[string]linkscore.Rate{}
	for _, rt := range s.model.Rates() {
		rates[rt.Feature+"="+rt.Value] = rt
	}
	// Direct: own 10, 20 nothing; 11 failed; 12 and 30 gave; 21
	// nothing. Onward: own 10 led, own 20 did not; 21 did not.
	if rt := rates["source=own"]; rt.DirectN != 2 || rt.DirectS != 0 || rt.OnwardN != 2 || rt.OnwardS != 1 {
		t.Errorf("own links: %+v, want 2 direct (none gave), 2 onward (one led)", rt)
	}
	if rt := rates["naming=full"]; rt.DirectN != 2 || rt.DirectS != 2 {
		t.Errorf("named links: %+v, want 2 direct that gave", rt)
	}
	if rt := rates["naming=none"]; rt.DirectN != 2 || rt.DirectS != 0 || rt.OnwardN != 1 || rt.OnwardS != 0 {
		t.Errorf("other links: %+v, want 2 direct, 1 onward, none succeeded", rt)
	}
}

// TestFailuresWaitForAValue: records whose one good link, among several
// alike, comes last for each of them do not teach the model that such
// links never pay: their failures count only once the record has got a
// value, and then the good link with them.
func TestFailuresWaitForAValue(t *testing.T) {
	d := &Dispatcher{score: newScoring(), cfg: Config{Depth: 1}}
	s := d.score
	alike := linkscore.Cue{Match: true, Naming: linkscore.NameNone, Source: linkscore.SourceNeutral, Fanout: linkscore.FanoutFew, Last: true}
	res := &cachedResult{Source: "http://h.test/"}
	const records, links = 40, 5
	for rec := int64(1); rec <= records; rec++ {
		r := &recState{seq: rec, targets: []string{"email"}, filled: map[string]store.Value{}}
		for k := int64(1); k < links; k++ {
			s.remember(trailKey{k, rec}, alike, 0)
			d.learn(applyItem{key: k, depth: 1, res: res}, r, false)
		}
	}
	if e := s.model.Score(alike); s.model.Unlikely(e) || e.Evidence != 0 {
		t.Fatalf("after %d failures of records that got nothing yet: %+v, unlikely %v; want no evidence", records*(links-1), e, s.model.Unlikely(e))
	}
	for rec := int64(1); rec <= records; rec++ {
		r := &recState{seq: rec, targets: []string{"email"}, filled: map[string]store.Value{}}
		s.remember(trailKey{links, rec}, alike, 0)
		d.learn(applyItem{key: links, depth: 1, res: res}, r, true)
	}
	e := s.model.Score(alike)
	if s.model.Unlikely(e) || e.Evidence != records*links || e.Direct < 0.15 || e.Direct > 0.25 {
		t.Errorf("after every record got its value: %+v, unlikely %v; want all %d links counted, direct near 1/%d", e, s.model.Unlikely(e), records*links, links)
	}
}

// TestRescorePrunes: a queued task whose every record now finds it
// unlikely to pay, on enough evidence, leaves the frontier at the next
// rescore, counted; a record's own link never does.
func TestRescorePrunes(t *testing.T) {
	ctx := context.Background()
	st, err := openState(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	d := &Dispatcher{st: st, w: newWindow(), score: newScoring(), run: newRunCounts(), pagesLeft: newHostLeft(), log: slog.New(slog.DiscardHandler), cfg: Config{Depth: 2}}
	bad := linkscore.Cue{Match: true, Naming: linkscore.NameNone, Source: linkscore.SourceNeutral, Fanout: linkscore.FanoutSome}
	own := linkscore.Cue{Match: true, Source: linkscore.SourceOwn}
	put := func(key int64, c linkscore.Cue, depth int) *task {
		tk := &task{key: key, url: "http://h.test/" + string(rune('a'+key)), host: "h.test", domain: "h.test", depth: depth, seq: key,
			cues: []taskCue{{rec: 1, cue: c, value: 0.75}}, value: 0.75, level: levelOf(0.75)}
		if _, err := st.conn.ExecContext(ctx, `INSERT INTO urls(key, url, depth, matched, priority, render, seq, state, first_seen, score)
			VALUES (?, ?, ?, 1, 0, 0, ?, 0, 0, ?)`, tk.key, tk.url, tk.depth, tk.seq, tk.level); err != nil {
			t.Fatal(err)
		}
		d.w.add(tk, false)
		d.queuedN++
		return tk
	}
	put(1, bad, 1)
	put(2, own, 0)
	if err := d.rescore(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if len(d.w.queued) != 2 {
		t.Fatalf("%d queued after a rescore with no evidence, want both", len(d.w.queued))
	}
	for range 200 {
		d.score.model.Direct(bad, false)
		d.score.model.Onward(bad, false)
		d.score.model.Direct(own, false)
		d.score.model.Onward(own, false)
	}
	if err := d.rescore(ctx, time.Now().Add(2*rescoreEvery)); err != nil {
		t.Fatal(err)
	}
	if d.w.queued[1] != nil || d.w.queued[2] == nil || d.run.pruned[PruneUnlikely] != 1 || d.queuedN != 1 {
		t.Errorf("after the evidence: queued %v, pruned %v; want the unlikely task gone, the record's own link kept", d.w.queued, d.run.pruned)
	}
	var state, level int
	if err := st.conn.QueryRowContext(ctx, `SELECT state FROM urls WHERE key = 1`).Scan(&state); err != nil || state != stateDropped {
		t.Errorf("pruned task's state %d (%v), want dropped", state, err)
	}
	if err := st.conn.QueryRowContext(ctx, `SELECT score FROM urls WHERE key = 2`).Scan(&level); err != nil || level != d.w.queued[2].level || level != 0 {
		t.Errorf("own link's level in the state %d (%v), in the window %d; want them equal, and 0 now it is worth nothing", level, err, d.w.queued[2].level)
	}
}

// TestBarrenHost: a host whose first barrenPages pages gave no record a
// value makes its links barren: one that does not name its record is
// pruned, one that does is not; a host that gave once is never barren.
func TestBarrenHost(t *testing.T) {
	d := &Dispatcher{score: newScoring(), cfg: Config{Depth: 2}}
	for range barrenPages - 1 {
		d.score.notePage("dry.test")
		d.score.notePage("wet.test")
	}
	d.score.noteGave("wet.test")
	if d.score.barren("dry.test") {
		t.Fatalf("barren after %d pages", barrenPages-1)
	}
	d.score.notePage("dry.test")
	d.score.notePage("wet.test")
	if !d.score.barren("dry.test") || d.score.barren("wet.test") || d.score.barren("new.test") {
		t.Fatalf("barren: dry %v wet %v new %v; want dry only", d.score.barren("dry.test"), d.score.barren("wet.test"), d.score.barren("new.test"))
	}
	r := &recState{seq: 1, targets: []string{"email"}, filled: map[string]store.Value{}}
	info := func(u string) linkInfo {
		host, _ := splitURL(u)
		return linkInfo{address: linkscore.Address(u), fields: []string{"email"}, host: host}
	}
	words := linkscore.Words("Ann Lee")
	for _, c := range []struct {
		url, want string
	}{
		{"http://dry.test/p/1", PruneBarrenHost},
		{"http://dry.test/people/ann-lee", ""},
		{"http://wet.test/p/1", ""},
	} {
		cue := d.cueOf(r, words, nil, info(c.url), linkscore.SourceNeutral, 5, 1)
		if got := d.pruneWhy(cue, d.score.model.Score(cue)); got != c.want {
			t.Errorf("%s (%s): pruned %q, want %q", c.url, cue, got, c.want)
		}
	}
}
