package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"backfill/cluster"
	"backfill/cluster/clustertest"
	"backfill/wire"
)

// The Forged tests play a cluster member whose key is authorized and
// which answers what it was not given, over real CURVE sockets against a
// running dispatcher. In each, no record takes a forged value, the forger
// is quarantined, and the honest member's answers still land.

// forgedValue is what the forger writes into the results it forges.
const forgedValue = "forged@evil.example"

// forgeWeb is n records, each with one page on a domain of its own, whose
// honest answer fills its email.
func forgeWeb(n int) (records string, web map[string]page) {
	lines := []string{"id,name,email,site"}
	web = make(map[string]page)
	for i := range n {
		u := fmt.Sprintf("https://h%d.example/p", i)
		lines = append(lines, fmt.Sprintf("r%d,P%d,,%s", i, i, u))
		web[u] = page{fields: []wire.Field{fld("name", fmt.Sprintf("P%d", i)), fld("email", fmt.Sprintf("p%d@h%d.example", i, i))}}
	}
	return csvOf(lines...), web
}

// forgeKeys are the key pairs of a secured test cluster.
type forgeKeys struct{ disp, honest, forger wire.Keys }

func newForgeKeys(t *testing.T) forgeKeys {
	mk := keyMaker(t)
	return forgeKeys{mk(), mk(), mk()}
}

// newForgeEnv is a secured dispatcher authorizing the honest member and
// the forger, with its log in logs.
func newForgeEnv(t *testing.T, dir string, k forgeKeys, logs *syncBuffer) *env {
	return newEnv(t, dir, func(c *Config) {
		c.Keys, c.Authorized = k.disp, []string{k.honest.Public, k.forger.Public}
		c.Names = map[string]string{k.honest.Public: "honest", k.forger.Public: "forger"}
		c.Fields = []string{"email"}
		c.Depth = 0
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
}

// newSecSup is newSup over CURVE: its task socket hears only the
// dispatcher's key, and it talks to the dispatcher with keys.
func newSecSup(t *testing.T, name, dispatcher string, keys wire.Keys, dispKey string, capacity int, digest string) *testSup {
	t.Helper()
	s := asSup(t, clustertest.New(t, name, dispatcher, capacity, keys, dispKey))
	s.Hello.Mappings = digest
	return s
}

// forge sends a Result for task under token, naming itself name, with the
// forged value.
func (s *testSup) forge(task wire.Task, token int64, name string) {
	s.t.Helper()
	res := wire.Result{TaskID: task.ID, Lease: token, Supervisor: name, URL: task.URL, Status: 200, FetchedAt: time.Now(),
		Fields: []wire.Field{fld("name", "Anyone"), fld("email", forgedValue)}}
	_, dom := hostDomain(task.URL)
	if i := strings.TrimSuffix(strings.TrimPrefix(dom, "h"), ".example"); i != "" {
		res.Fields[0] = fld("name", "P"+i) // the record's own name, so the values would be taken
	}
	if err := s.Out.Send(wire.KindResult, res, time.Second); err != nil {
		s.t.Fatal(err)
	}
}

// holdAtLeast polls sups until s holds n tasks.
func holdAtLeast(t *testing.T, s *testSup, n int, sups ...*testSup) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(s.held) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d tasks, want %d", s.Hello.Supervisor, len(s.held), n)
		}
		for _, o := range append(sups, s) {
			o.poll(10 * time.Millisecond)
		}
	}
}

// quarantined waits until the dispatcher has key in quarantine, polling
// the others meanwhile (they heartbeat).
func quarantined(t *testing.T, d *Dispatcher, key string, sups ...*testSup) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, q := range d.Status().Quarantined {
			if q.Key == key {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %s not quarantined within 10s: %+v", key, d.Status().Quarantined)
		}
		for _, s := range sups {
			s.poll(10 * time.Millisecond)
		}
	}
}

// checkForgeOutcome checks that every record has its honest value, that
// the forger's key is quarantined in the summary, logged with its address,
// and that forged frames were counted.
func checkForgeOutcome(t *testing.T, e *env, web map[string]page, forger string, logs *syncBuffer) {
	t.Helper()
	if e.err != nil {
		t.Fatalf("Run: %v", e.err)
	}
	recs := e.records()
	if len(recs) != len(web) {
		t.Fatalf("%d records, want %d", len(recs), len(web))
	}
	for id, r := range recs {
		want := "p" + strings.TrimPrefix(id, "r") + "@h" + strings.TrimPrefix(id, "r") + ".example"
		if got := r.Found["email"].Value; got != want {
			t.Errorf("record %s: email %q, want the honest %q", id, got, want)
		}
	}
	if e.sum == nil || e.sum.Forged == 0 {
		t.Fatalf("summary %+v: no forged frame counted", e.sum)
	}
	var q *cluster.Quarantined
	for i := range e.sum.Quarantined {
		if e.sum.Quarantined[i].Key == forger {
			q = &e.sum.Quarantined[i]
		}
	}
	if q == nil || len(e.sum.Quarantined) != 1 {
		t.Fatalf("summary quarantined %+v, want the forger %s alone", e.sum.Quarantined, forger)
	}
	if q.Address != "127.0.0.1" {
		t.Errorf("quarantined from %q, want the forger's address", q.Address)
	}
	line := `"msg":"member quarantined`
	if n := strings.Count(logs.String(), line); n != 1 {
		t.Errorf("quarantine logged %d times, want once (rate-limited):\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `"key":"`+forger+`","address":"127.0.0.1"`) {
		t.Errorf("quarantine logged without the forger's key and address:\n%s", logs.String())
	}
}

// TestForgedAnswerToAnotherMembersTask: the forger answers the tasks
// leased to the honest member, even under their own tokens.
func TestForgedAnswerToAnotherMembersTask(t *testing.T) {
	k := newForgeKeys(t)
	var logs syncBuffer
	e := newForgeEnv(t, t.TempDir(), k, &logs)
	records, web := forgeWeb(12)
	e.load("people.csv", records)
	digest := e.set.Digest()
	honest := newSecSup(t, "honest", e.d.Endpoint(), k.honest, k.disp.Public, 16, digest)
	forger := newSecSup(t, "forger", e.d.Endpoint(), k.forger, k.disp.Public, 16, digest)
	e.run(runCtx(t))
	for _, s := range []*testSup{honest, forger} {
		if !s.join(5 * time.Second) {
			t.Fatalf("%s: no welcome", s.Hello.Supervisor)
		}
	}
	holdAtLeast(t, honest, 1, forger)
	for _, task := range honest.held {
		forger.forge(task, task.Lease, "forger")
	}
	quarantined(t, e.d, k.forger.Public, honest)
	crawl(t, e, []*testSup{honest}, web, 20*time.Second)
	checkForgeOutcome(t, e, web, k.forger.Public, &logs)
}

// TestForgedAnswerAfterRestart: the dispatcher restarts while the honest
// member holds every task; before the member is back, the forger answers
// the tasks (still queued) under the honest member's tokens. The honest
// member's answers to its old leases are adopted.
func TestForgedAnswerAfterRestart(t *testing.T) {
	k := newForgeKeys(t)
	var logs syncBuffer
	dir := t.TempDir()
	e := newForgeEnv(t, dir, k, &logs)
	records, web := forgeWeb(6)
	e.load("people.csv", records)
	digest := e.set.Digest()
	honest := newSecSup(t, "honest", e.d.Endpoint(), k.honest, k.disp.Public, 16, digest)
	ctx, cancel := context.WithCancel(runCtx(t))
	e.run(ctx)
	if !honest.join(5 * time.Second) {
		t.Fatal("honest: no welcome")
	}
	holdAtLeast(t, honest, len(web))
	held := honest.held
	cancel()
	<-e.done
	e.d.Close()
	e.done = nil

	var err error
	if e.d, err = New(e.cfg); err != nil {
		t.Fatal(err)
	}
	forger := newSecSup(t, "forger", e.d.Endpoint(), k.forger, k.disp.Public, 16, digest)
	e.run(runCtx(t))
	for _, task := range held {
		forger.forge(task, task.Lease, "honest")
	}
	quarantined(t, e.d, k.forger.Public)
	back := newSecSup(t, "honest", e.d.Endpoint(), k.honest, k.disp.Public, 16, digest)
	for _, task := range held {
		back.answer(task, web)
	}
	// Its answers may complete every record, and end the run, first.
	if !back.join(5*time.Second) && !e.finished() {
		t.Fatalf("honest, back: no welcome; run error %v; log:\n%s", e.err, logs.String())
	}
	crawl(t, e, []*testSup{back}, web, 20*time.Second)
	checkForgeOutcome(t, e, web, k.forger.Public, &logs)
	if e.sum.Adopted == 0 {
		t.Errorf("summary %+v: the honest member's answers to its old leases were not adopted", e.sum)
	}
}

// TestForgedReplay: the forger, a member, answers its own task, then
// sends that answer again with forged values (a late answer to its own
// lease: counted, nothing changes), and replays an answer the honest
// member sent (forged: quarantined).
func TestForgedReplay(t *testing.T) {
	k := newForgeKeys(t)
	var logs syncBuffer
	e := newForgeEnv(t, t.TempDir(), k, &logs)
	records, web := forgeWeb(12)
	e.load("people.csv", records)
	digest := e.set.Digest()
	honest := newSecSup(t, "honest", e.d.Endpoint(), k.honest, k.disp.Public, 16, digest)
	forger := newSecSup(t, "forger", e.d.Endpoint(), k.forger, k.disp.Public, 16, digest)
	e.run(runCtx(t))
	for _, s := range []*testSup{honest, forger} {
		if !s.join(5 * time.Second) {
			t.Fatalf("%s: no welcome", s.Hello.Supervisor)
		}
	}
	holdAtLeast(t, honest, 2, forger)
	holdAtLeast(t, forger, 1, honest)
	own := forger.held[0]
	forger.answer(own, web)
	theirs := honest.held[0]
	honest.answer(theirs, web)
	honest.held = honest.held[1:]
	// Its own answer taken, the forger sends it again, forged.
	deadline := time.Now().Add(10 * time.Second)
	for e.d.Status().Pages < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the two honest answers not taken: %d pages", e.d.Status().Pages)
		}
		honest.poll(10 * time.Millisecond)
		forger.poll(10 * time.Millisecond)
	}
	forger.forge(own, own.Lease, "forger")
	forger.forge(theirs, theirs.Lease, "forger")
	quarantined(t, e.d, k.forger.Public, honest)
	crawl(t, e, []*testSup{honest}, web, 20*time.Second)
	checkForgeOutcome(t, e, web, k.forger.Public, &logs)
	if e.sum.Late < 1 {
		t.Errorf("late %d, want its own answer sent again counted", e.sum.Late)
	}
}

// TestForgedTokenGuesses: the forger answers the honest member's tasks
// again and again under guessed tokens: tokens near its own, and random.
func TestForgedTokenGuesses(t *testing.T) {
	k := newForgeKeys(t)
	var logs syncBuffer
	e := newForgeEnv(t, t.TempDir(), k, &logs)
	records, web := forgeWeb(12)
	e.load("people.csv", records)
	digest := e.set.Digest()
	honest := newSecSup(t, "honest", e.d.Endpoint(), k.honest, k.disp.Public, 16, digest)
	forger := newSecSup(t, "forger", e.d.Endpoint(), k.forger, k.disp.Public, 16, digest)
	e.run(runCtx(t))
	for _, s := range []*testSup{honest, forger} {
		if !s.join(5 * time.Second) {
			t.Fatalf("%s: no welcome", s.Hello.Supervisor)
		}
	}
	holdAtLeast(t, honest, 1, forger)
	holdAtLeast(t, forger, 1, honest)
	mine := forger.held[0].Lease
	const guesses = 2000
	for i := range guesses {
		task := honest.held[i%len(honest.held)]
		token := mine + int64(i/2+1)*(1-2*int64(i%2)) // around its own
		if i%3 == 0 {
			token = rand.Int64()
		}
		forger.forge(task, token, "forger")
	}
	// Each guess is refused: as forged, then as a quarantined key's frame.
	deadline := time.Now().Add(10 * time.Second)
	for refused := int64(0); refused < guesses; {
		st := e.d.Status()
		refused = 0
		for _, q := range st.Quarantined {
			refused += q.Count
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d guesses refused within 10s, want all %d", refused, guesses)
		}
		honest.poll(10 * time.Millisecond)
	}
	crawl(t, e, []*testSup{honest}, web, 20*time.Second)
	checkForgeOutcome(t, e, web, k.forger.Public, &logs)
}

// TestForgedName: the forger registers under the honest member's name (its
// own task socket and key), then answers the honest member's tasks under
// that name. A member is its key: the forger joins as itself ("forger",
// its key's name), labelled with the name it says, and the honest member
// stays, with its tasks, while the forger's key alone is quarantined.
func TestForgedName(t *testing.T) {
	k := newForgeKeys(t)
	var logs syncBuffer
	e := newForgeEnv(t, t.TempDir(), k, &logs)
	records, web := forgeWeb(12)
	e.load("people.csv", records)
	digest := e.set.Digest()
	honest := newSecSup(t, "honest", e.d.Endpoint(), k.honest, k.disp.Public, 16, digest)
	e.run(runCtx(t))
	if !honest.join(5 * time.Second) {
		t.Fatal("honest: no welcome")
	}
	holdAtLeast(t, honest, 1)
	forger := newSecSup(t, "honest", e.d.Endpoint(), k.forger, k.disp.Public, 16, digest)
	forger.Hello.Started = time.Now().UTC().Add(time.Second) // "restarted"
	if !forger.join(5 * time.Second) {
		t.Fatal("the forger, under the honest member's name: no welcome as itself")
	}
	if forger.Welcome.Member != "forger" || honest.Welcome.Member != "honest" {
		t.Errorf("welcomed as %q and %q, want each as its key's name (forger, honest)", forger.Welcome.Member, honest.Welcome.Member)
	}
	for _, task := range honest.held {
		forger.forge(task, task.Lease, "honest")
	}
	quarantined(t, e.d, k.forger.Public, honest)
	for _, m := range e.d.Status().Left {
		if m.Name == "honest" {
			t.Errorf("the honest member was dropped: %+v", m)
		}
	}
	crawl(t, e, []*testSup{honest}, web, 20*time.Second)
	checkForgeOutcome(t, e, web, k.forger.Public, &logs)
	if q := e.sum.Quarantined[0]; q.Member != "forger" {
		t.Errorf("quarantined as %q, want the forger's own name", q.Member)
	}
}

// runCtx is a context cancelled when the test ends, before its env is
// closed: a test that fails while the dispatcher runs stops it.
func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// TestSquatterFirst: a member whose key is authorized says Hello first
// under the honest member's name, before the honest member speaks (as at
// a cluster's start, or just after the dispatcher restarted). A member
// is its key: the squatter joins as itself, labelled "honest"; the honest
// member joins as honest, works and is told the run is over; the
// squatter's forgeries quarantine its key alone.
func TestSquatterFirst(t *testing.T) {
	k := newForgeKeys(t)
	var logs syncBuffer
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Keys, c.Authorized = k.disp, []string{k.honest.Public, k.forger.Public}
		c.Names = map[string]string{k.honest.Public: "honest", k.forger.Public: "squatter"}
		c.Fields, c.Depth, c.Expect = []string{"email"}, 0, 2
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	records, web := forgeWeb(12)
	e.load("people.csv", records)
	digest := e.set.Digest()
	e.run(runCtx(t))
	squatter := newSecSup(t, "honest", e.d.Endpoint(), k.forger, k.disp.Public, 16, digest)
	if !squatter.join(5 * time.Second) {
		t.Fatal("the squatter, saying it is honest: no welcome as itself")
	}
	honest := newSecSup(t, "honest", e.d.Endpoint(), k.honest, k.disp.Public, 16, digest)
	if !honest.join(5 * time.Second) {
		t.Fatalf("the honest member, after a squatter took its name: no welcome\n%s", logs.String())
	}
	if squatter.Welcome.Member != "squatter" || honest.Welcome.Member != "honest" {
		t.Errorf("welcomed as %q and %q, want squatter and honest", squatter.Welcome.Member, honest.Welcome.Member)
	}
	holdAtLeast(t, honest, 1, squatter)
	for _, task := range honest.held {
		squatter.forge(task, task.Lease, "honest")
	}
	quarantined(t, e.d, k.forger.Public, honest)
	crawl(t, e, []*testSup{honest}, web, 20*time.Second)
	checkForgeOutcome(t, e, web, k.forger.Public, &logs)
	if q := e.sum.Quarantined[0]; q.Member != "squatter" {
		t.Errorf("quarantined as %q, want the squatter's own name", q.Member)
	}
	// The run is over for the honest member: it is told so (a
	// supervisor started with --exit-when-done exits on it).
	deadline := time.Now().Add(5 * time.Second)
	for honest.Byes == 0 && time.Now().Before(deadline) {
		honest.Receive(50 * time.Millisecond)
	}
	if honest.Byes == 0 {
		t.Error("the honest member was not told the run is over")
	}
	if !strings.Contains(logs.String(), `"msg":"supervisor joined","supervisor":"squatter"`) ||
		!strings.Contains(logs.String(), `"says":"honest"`) {
		t.Errorf("the squatter's join is not logged under its own name with what it says:\n%s", logs.String())
	}
}
