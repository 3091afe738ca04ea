package dispatcher

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"backfill/wire"
)

// The Recheck tests run a secured dispatcher and three members over CURVE:
// two honest, and one that follows the protocol but lies about the pages
// it fetches (a compromised droplet). Every record has one page of its
// own, whose honest answer fills its email.

// liar says which answers a member lies in, and how.
type liar struct {
	lies func(task wire.Task) bool
	// fakePrint: its lies say the page's content is another than it is
	// (the page's fingerprint is made up too), else they keep the true
	// fingerprint and lie about the values alone.
	fakePrint bool
}

// recheckCluster is a secured dispatcher with two honest members and a
// third that lies as l says (nil: a third honest one).
type recheckCluster struct {
	e                 *env
	web               map[string]page
	members           []*testSup
	keys              []wire.Keys // the members'
	liarKey           string
	logs              *syncBuffer
	liarAnswers       int // value-giving answers the third member gave
	answersWhenCaught int // … when it was quarantined (0: never)
	requests          int // tasks answered, every member's
}

func newRecheckCluster(t *testing.T, records int, tweak func(*Config)) *recheckCluster {
	t.Helper()
	mk := keyMaker(t)
	disp, keys := mk(), []wire.Keys{mk(), mk(), mk()}
	names := []string{"honest-1", "honest-2", "third"}
	rc := &recheckCluster{logs: &syncBuffer{}, liarKey: keys[2].Public, keys: keys}
	rc.e = newEnv(t, t.TempDir(), func(c *Config) {
		c.Keys = disp
		c.Names = map[string]string{}
		for i, k := range keys {
			c.Authorized = append(c.Authorized, k.Public)
			c.Names[k.Public] = names[i]
		}
		c.Fields, c.Depth, c.Expect = []string{"email"}, 0, 3
		c.HostInFlight = 4
		c.Logger = slog.New(slog.NewJSONHandler(rc.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		if tweak != nil {
			tweak(c)
		}
	})
	var csv string
	csv, rc.web = forgeWeb(records)
	rc.e.load("people.csv", csv)
	rc.e.run(runCtx(t))
	for i, k := range keys {
		s := newSecSup(t, names[i], rc.e.d.Endpoint(), k, disp.Public, 32, rc.e.set.Digest())
		if !s.join(5 * time.Second) {
			t.Fatalf("%s: no welcome", names[i])
		}
		rc.members = append(rc.members, s)
	}
	return rc
}

// fingerprint is a page's made-up content fingerprint: its text hash and
// simhash, from its URL.
func fingerprint(url string) ([]byte, uint64) {
	sum := sha256.Sum256([]byte("content of " + url))
	return sum[:16], binary.BigEndian.Uint64(sum[16:24]) | 1
}

// answer answers task from s: the page's values, or a lie when l says so.
// It reports whether the answer gave values.
func (rc *recheckCluster) answer(s *testSup, task wire.Task, l *liar) bool {
	p, ok := rc.web[task.URL]
	res := wire.Result{TaskID: task.ID, Lease: task.Lease, Supervisor: s.Hello.Supervisor, URL: task.URL, FetchedAt: time.Now()}
	if !ok {
		res.Class, res.Status = "status", 404
		s.Send(wire.KindResult, res)
		return false
	}
	res.Status, res.Fields = 200, p.fields
	res.TextHash, res.Simhash = fingerprint(task.URL)
	res.Words = 40
	if l != nil && l.lies(task) {
		res.Fields = []wire.Field{p.fields[0], fld("email", "lie-"+task.ID[:6]+"@evil.example")} // the record's own name, a false email
		if l.fakePrint {
			res.TextHash, res.Simhash = fingerprint("made up " + task.ID)
		}
	}
	s.Send(wire.KindResult, res)
	return true
}

// crawl answers every task until the run ends, the third member as l
// says, noting how many value-giving answers it had given when it was
// quarantined.
func (rc *recheckCluster) crawl(t *testing.T, l *liar, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !rc.e.finished() {
		if time.Now().After(deadline) {
			t.Fatalf("dispatcher still running after %v: %+v", timeout, rc.e.d.Status().Queued)
		}
		for _, s := range rc.members {
			s.poll(5 * time.Millisecond)
		}
		for i, s := range rc.members {
			var li *liar
			if i == 2 {
				li = l
			}
			for _, task := range s.held {
				rc.requests++
				if rc.answer(s, task, li) && i == 2 {
					rc.liarAnswers++
				}
			}
			s.held = nil
		}
		if rc.answersWhenCaught == 0 && rc.quarantined() {
			rc.answersWhenCaught = rc.liarAnswers
		}
	}
	if rc.e.err != nil {
		t.Fatalf("Run: %v", rc.e.err)
	}
}

func (rc *recheckCluster) quarantined() bool {
	for _, q := range rc.e.d.Status().Quarantined {
		if q.Key == rc.liarKey {
			return true
		}
	}
	return false
}

// checkHonest checks that every record holds its honest email, and, when
// the third member lied, that no value comes from it.
func (rc *recheckCluster) checkHonest(t *testing.T, lied bool) {
	t.Helper()
	recs := rc.e.records()
	if len(recs) != len(rc.web) {
		t.Fatalf("%d records, want %d", len(recs), len(rc.web))
	}
	wrong := 0
	for id, r := range recs {
		n := strings.TrimPrefix(id, "r")
		v := r.Found["email"]
		if want := "p" + n + "@h" + n + ".example"; v.Value != want || (lied && (v.MemberKey == rc.liarKey || v.Member == "third")) {
			if wrong++; wrong <= 5 {
				t.Errorf("record %s: email %q from %s, want the honest %q (%+v)", id, v.Value, v.Member, want, v)
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d of %d records do not hold their honest value", wrong, len(recs))
	}
}

// TestRecheckCatchesALiar: a member that lies on every value-giving page
// (keeping the pages' fingerprints) is quarantined within its first 100
// such answers at the default share, and every value it gave is fetched
// again by the others: the export is the clean run's.
func TestRecheckCatchesALiar(t *testing.T) {
	rc := newRecheckCluster(t, 300, nil)
	rc.crawl(t, &liar{lies: func(wire.Task) bool { return true }}, time.Minute)
	s := rc.e.sum
	t.Logf("liar quarantined after %d of its value-giving answers (%d in all); re-checks %+v; %d requests for %d pages",
		rc.answersWhenCaught, rc.liarAnswers, s.Rechecks, rc.requests, len(rc.web))
	if rc.answersWhenCaught == 0 || rc.answersWhenCaught > 100 {
		t.Errorf("the liar was quarantined after %d value-giving answers, want within its first 100", rc.answersWhenCaught)
	}
	if len(s.Quarantined) != 1 || s.Quarantined[0].Key != rc.liarKey || s.Quarantined[0].Member != "third" {
		t.Errorf("quarantined %+v, want the liar alone", s.Quarantined)
	}
	if s.Rechecks.Liars != 1 || s.Rechecks.Contradicted < DefaultRecheckStrikes || s.Rechecks.Purged == 0 {
		t.Errorf("re-checks %+v: want one liar, %d contradictions at least, its pages purged", s.Rechecks, DefaultRecheckStrikes)
	}
	rc.checkHonest(t, true)
	if !strings.Contains(rc.logs.String(), `"msg":"member quarantined: its answers were contradicted`) {
		t.Errorf("the liar's quarantine is not logged with why:\n%.3000s", rc.logs.String())
	}
}

// TestRecheckCatchesAnOccasionalLiar: a member that lies on 5 % of its
// value-giving pages, making up their fingerprints too (each contradiction
// is then half a strike), is caught before the run ends and everything it
// gave is fetched again. Catching it takes about 1/(share·0.05) of its
// answers for the first contradiction: at the default 2 %, a thousand;
// the test checks half its pages so that 1,800 records make it certain
// (each of its ~600 answers is caught with probability 2.5 %, then every
// one is checked).
func TestRecheckCatchesAnOccasionalLiar(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	rc := newRecheckCluster(t, 1800, func(c *Config) { c.RecheckShare = 0.5 })
	rc.crawl(t, &liar{lies: func(wire.Task) bool { return rng.Float64() < 0.05 }, fakePrint: true}, 3*time.Minute)
	s := rc.e.sum
	t.Logf("liar quarantined after %d of its value-giving answers (%d in all); re-checks %+v; %d requests for %d pages",
		rc.answersWhenCaught, rc.liarAnswers, s.Rechecks, rc.requests, len(rc.web))
	if rc.answersWhenCaught == 0 {
		t.Fatalf("the liar was not caught in %d answers", rc.liarAnswers)
	}
	if len(s.Quarantined) != 1 || s.Quarantined[0].Key != rc.liarKey {
		t.Errorf("quarantined %+v, want the liar alone", s.Quarantined)
	}
	rc.checkHonest(t, true)
}

// TestRecheckCost: an honest cluster pays for re-checks at the default
// share with at most 3 % more requests, and strikes nobody. The checks
// are drawn at random: 3,000 pages make about 63 of them (2 % and one of
// each member's first ten answers), 90 being 3.5 standard deviations off.
func TestRecheckCost(t *testing.T) {
	const pages = 3000
	rc := newRecheckCluster(t, pages, nil)
	rc.crawl(t, nil, time.Minute)
	s := rc.e.sum
	extra := float64(rc.requests-pages) / pages
	t.Logf("%d requests for %d pages: %.1f %% more; re-checks %+v", rc.requests, pages, 100*extra, s.Rechecks)
	if extra > 0.03 {
		t.Errorf("re-checks cost %.1f %% more requests, want at most 3 %%", 100*extra)
	}
	if s.Rechecks.Agreed == 0 || s.Rechecks.Disputed != 0 || s.Rechecks.Contradicted != 0 || len(s.Quarantined) != 0 {
		t.Errorf("re-checks %+v, quarantined %+v: want agreeing checks and nothing else", s.Rechecks, s.Quarantined)
	}
	if int64(rc.requests-pages) != s.Rechecks.Fetched {
		t.Errorf("%d requests beyond the pages, re-checks fetched %d", rc.requests-pages, s.Rechecks.Fetched)
	}
	rc.checkHonest(t, false)
	off := newRecheckCluster(t, 100, func(c *Config) { c.RecheckShare = -1 })
	off.crawl(t, nil, time.Minute)
	if off.requests != 100 || off.e.sum.Rechecks.Fetched != 0 {
		t.Errorf("re-checks off: %d requests for 100 pages, %d re-checks", off.requests, off.e.sum.Rechecks.Fetched)
	}
}

// TestPurgeAMember: re-checks off, a member lies on every page and the
// crawl takes its values. An operator purges it (Dispatcher.Purge, what
// `backfill purge` runs): its pages are queued again and its values leave
// the records and the store; the next run, without it, fills them from
// the honest members.
func TestPurgeAMember(t *testing.T) {
	rc := newRecheckCluster(t, 60, func(c *Config) { c.RecheckShare = -1 })
	rc.crawl(t, &liar{lies: func(wire.Task) bool { return true }}, time.Minute)
	lied := 0
	for _, r := range rc.e.records() {
		if r.Found["email"].Member == "third" {
			lied++
		}
	}
	if lied == 0 {
		t.Fatal("the liar gave no value: nothing to purge")
	}
	rep, err := rc.e.d.Purge(t.Context(), "third")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("purge: %+v", rep)
	if rep.Pages != lied || rep.Values != lied || rep.Records != lied || rep.Member != "third" || rep.Key != rc.liarKey {
		t.Errorf("purge %+v, want the liar's %d pages and values", rep, lied)
	}
	for id, r := range rc.e.records() {
		if v, ok := r.Found["email"]; ok && v.Member == "third" {
			t.Errorf("record %s still holds the purged member's %q in the store", id, v.Value)
		}
	}
	if _, err := rc.e.d.Purge(t.Context(), "nobody"); !errors.Is(err, ErrNoSuchMember) {
		t.Errorf("purging an unknown member: %v, want ErrNoSuchMember", err)
	}

	// The next run, with the honest members alone, fetches them again.
	rc.e.d.Close()
	rc.e.done = nil
	rc.e.cfg.Expect = 2
	if rc.e.d, err = New(rc.e.cfg); err != nil {
		t.Fatal(err)
	}
	rc.e.run(runCtx(t))
	var honest []*testSup
	for i, s := range rc.members[:2] {
		back := newSecSup(t, s.Hello.Supervisor, rc.e.d.Endpoint(), rc.keys[i], rc.e.cfg.Keys.Public, 32, rc.e.set.Digest())
		if !back.join(5 * time.Second) {
			t.Fatalf("%s: no welcome", s.Hello.Supervisor)
		}
		honest = append(honest, back)
	}
	rc.members, rc.requests = honest, 0
	rc.crawl(t, nil, time.Minute)
	if rc.requests != lied {
		t.Errorf("the run after the purge fetched %d pages, want the %d purged", rc.requests, lied)
	}
	rc.checkHonest(t, true)
}
