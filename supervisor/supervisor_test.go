package supervisor

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"backfill/etl"
	"backfill/store"
	"backfill/wire"
)

const annPage = `<html><body>
<h1 class="name">  Ann Example </h1>
<span class="email">ann@a.test</span>
<ul class="colleagues"><li><a href="/people/bob">Bob</a></li></ul>
<p><a href="http://b.test/elsewhere">elsewhere</a></p>
</body></html>`

func TestRegistration(t *testing.T) {
	t.Parallel()
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d)
	cfg.Capacity = 77
	r := start(t, cfg)

	first := d.hello()
	want := wire.Hello{
		Supervisor: "sup-test",
		Endpoint:   r.sup.Endpoint(),
		Capacity:   77,
		Mappings:   cfg.Mappings.Digest(),
	}
	if first.Supervisor != want.Supervisor || first.Endpoint != want.Endpoint ||
		first.Capacity != want.Capacity || first.Mappings != want.Mappings {
		t.Errorf("hello = %+v, want %+v", *first, want)
	}
	if first.Mappings == "" {
		t.Error("hello carries an empty mapping digest")
	}
	if first.Started.IsZero() {
		t.Error("hello has no start time")
	}
	if !strings.HasPrefix(first.Endpoint, "tcp://127.0.0.1:") || strings.HasSuffix(first.Endpoint, ":*") {
		t.Errorf("endpoint %q is not a resolved loopback endpoint", first.Endpoint)
	}

	// Without a Welcome the supervisor keeps saying Hello.
	again := d.hello()
	if !again.Started.Equal(first.Started) {
		t.Errorf("retried hello changed Started: %v then %v", first.Started, again.Started)
	}
	if r.sup.Stats().Registered {
		t.Error("registered before any Welcome")
	}

	d.welcome(again)
	select {
	case hb := <-d.beats:
		if hb.Supervisor != "sup-test" || hb.Endpoint != r.sup.Endpoint() || hb.Capacity != 77 || hb.Mappings != first.Mappings {
			t.Errorf("heartbeat does not repeat the hello: %+v", hb.Hello)
		}
		if hb.At.IsZero() {
			t.Error("heartbeat has no time")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no heartbeat within 5s of the Welcome")
	}
	if !r.sup.Stats().Registered {
		t.Error("not registered after Welcome and a heartbeat")
	}
}

func TestHelloRetriedUntilDispatcherUp(t *testing.T) {
	t.Parallel()
	endpoint := freeEndpoint(t)
	var logs logBuffer
	cfg := Config{
		Name:       "sup-late",
		Dispatcher: endpoint,
		Mappings:   mappings(t),
		Cache:      openCache(t),
		Heartbeat:  100 * time.Millisecond,
		HelloMax:   300 * time.Millisecond,
		Logger:     newLogger(&logs),
	}
	r := start(t, cfg)

	// The dispatcher is not up: the supervisor says so, at Warn, naming
	// it, then after a few attempts what to check, and then keeps
	// retrying without a warning each time.
	wantLog := "level=WARN msg=\"dispatcher not answering at " + endpoint + "; retrying in "
	wantHint := "level=WARN msg=\"no answer from " + endpoint + ": check that the dispatcher runs there"
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), wantHint) || !strings.Contains(logs.String(), "attempts=5") {
		if time.Now().After(deadline) {
			t.Fatalf("no %q warning within 10s; log:\n%s", wantHint, logs.String())
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	if n := strings.Count(logs.String(), wantLog); n != 1 {
		t.Errorf("%d warnings %q in the first attempts, want one:\n%s", n, wantLog, logs.String())
	}

	// It comes up late; the next Hello gets through and is answered.
	d := newDispatcher(t, endpoint)
	h := d.hello()
	if h.Endpoint != r.sup.Endpoint() {
		t.Errorf("hello endpoint %q, want %q", h.Endpoint, r.sup.Endpoint())
	}
	d.welcome(h)
	deadline = time.Now().Add(5 * time.Second)
	for !r.sup.Stats().Registered {
		if time.Now().After(deadline) {
			t.Fatal("not registered within 5s of the Welcome")
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

func TestCrawl(t *testing.T) {
	t.Parallel()
	// a.test's robots.txt shuts out everyone but backfill, which may not go
	// under /private/: passing requires product-token matching.
	a := newSite(t, "a.test", "User-agent: *\nDisallow: /\n\nUser-agent: backfill\nDisallow: /private/\n",
		map[string]string{"/people/ann": annPage, "/private/secret": annPage})
	c := newSite(t, "c.test", "User-agent: *\nCrawl-delay: 120\n", map[string]string{"/people/x": annPage})
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d, a, c)
	cfg.DefaultDelay = 50 * time.Millisecond
	cfg.ContentSeen = true
	r := start(t, cfg)
	register(t, d)

	tasks := []struct {
		id, url string
		class   string
		status  int
	}{
		{"ann", "http://a.test/people/ann", "", 200},
		{"secret", "http://a.test/private/secret", "robots", 0},
		{"missing", "http://a.test/people/nobody", "bad-status", 404},
		{"slow-host", "http://c.test/people/x", "crawl-delay", 0},
		{"not-http", "ftp://a.test/file", "bad-url", 0},
	}
	for i, tc := range tasks {
		d.task(tc.id, int64(100+i), tc.url)
	}
	got := d.collect(len(tasks), 15*time.Second)
	for i, tc := range tasks {
		res := got[tc.id]
		if res.Class != tc.class || res.Status != tc.status {
			t.Errorf("%s: class %q status %d (error %q), want class %q status %d", tc.id, res.Class, res.Status, res.Error, tc.class, tc.status)
		}
		if res.Lease != int64(100+i) || res.URL != tc.url || res.Supervisor != "sup-test" {
			t.Errorf("%s: result does not echo the task: lease %d url %q supervisor %q", tc.id, res.Lease, res.URL, res.Supervisor)
		}
		if tc.class != "" && res.Error == "" {
			t.Errorf("%s: failure without an error message", tc.id)
		}
	}

	ann := got["ann"]
	if ann.FinalURL != "http://a.test/people/ann" || ann.Bytes != int64(len(annPage)) {
		t.Errorf("ann: final url %q bytes %d", ann.FinalURL, ann.Bytes)
	}
	if len(ann.Mappings) != 1 || ann.Mappings[0] != "people" {
		t.Errorf("ann: mappings %v, want [people]", ann.Mappings)
	}
	// The content fingerprint is the page's, for the dispatcher's
	// content-seen test; failures carry none.
	fp := etl.PageFingerprint(ann.FinalURL, []byte(annPage), "text/html")
	if !bytes.Equal(ann.TextHash, fp.Exact[:]) || ann.Simhash != fp.Sim || ann.Words != fp.Words || fp.Words == 0 {
		t.Errorf("ann: fingerprint %x/%x/%d, want %x/%x/%d", ann.TextHash, ann.Simhash, ann.Words, fp.Exact, fp.Sim, fp.Words)
	}
	for id, res := range got {
		if res.Class != "" && (res.TextHash != nil || res.Simhash != 0 || res.Words != 0) {
			t.Errorf("%s: failed task carries a fingerprint", id)
		}
	}
	fields := map[string]wire.Field{}
	for _, f := range ann.Fields {
		fields[f.Name] = f
	}
	if f := fields["name"]; len(f.Values) != 1 || f.Values[0] != "Ann Example" || !f.Match || f.Mapping != "people" {
		t.Errorf("ann: name field %+v, want [Ann Example] as a match key of people", f)
	}
	if f := fields["email"]; len(f.Values) != 1 || f.Values[0] != "ann@a.test" || f.Match {
		t.Errorf("ann: email field %+v", f)
	}
	links := map[string]wire.Link{}
	for _, l := range ann.Links {
		if _, dup := links[l.URL]; dup {
			t.Errorf("ann: link %s listed twice", l.URL)
		}
		links[l.URL] = l
	}
	if l, ok := links["http://a.test/people/bob"]; !ok || !l.Parsed {
		t.Errorf("ann: colleague link missing or not marked parsed: %+v", ann.Links)
	}
	if l, ok := links["http://b.test/elsewhere"]; !ok || l.Parsed {
		t.Errorf("ann: outbound link missing or marked parsed: %+v", ann.Links)
	}

	// Nothing disallowed or over the ceiling was requested; every request
	// carried the User-Agent.
	if a.requested("/private/secret") {
		t.Error("robots-disallowed /private/secret was requested")
	}
	if got := paths(c.log()); got != "/robots.txt" {
		t.Errorf("c.test got %q, want only its robots.txt", got)
	}
	for _, h := range append(a.log(), c.log()...) {
		if h.ua != testUA {
			t.Errorf("request %s with User-Agent %q", h.path, h.ua)
		}
	}
	if n := strings.Count(paths(a.log()), "/robots.txt"); n != 1 {
		t.Errorf("a.test robots.txt fetched %d times, want 1", n)
	}

	st := r.sup.Stats()
	wantFailed := map[string]int64{"robots": 1, "bad-status": 1, "crawl-delay": 1, "bad-url": 1}
	if st.Fetched != 1 || st.RobotsFetched != 2 || len(st.Failed) != len(wantFailed) {
		t.Errorf("stats %+v", st)
	}
	for k, v := range wantFailed {
		if st.Failed[k] != v {
			t.Errorf("stats failed[%s] = %d, want %d", k, st.Failed[k], v)
		}
	}
	// A task's capacity is given back just after its result is sent.
	deadline := time.Now().Add(5 * time.Second)
	for r.sup.Stats().InFlight != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("stats in flight %d 5s after every result", r.sup.Stats().InFlight)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

func TestPoliteGaps(t *testing.T) {
	// Gaps are measured between request arrivals at the server. The delay
	// runs from the end of one request to the start of the next, so
	// arrivals can never be closer than it.
	cases := []struct {
		name         string
		robots       string
		defaultDelay time.Duration
		want         time.Duration
	}{
		{"crawl-delay", "User-agent: *\nCrawl-delay: 0.4\n", 5 * time.Second, 400 * time.Millisecond},
		{"default delay", "", 300 * time.Millisecond, 300 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pages := map[string]string{"/people/1": annPage, "/people/2": annPage, "/people/3": annPage}
			s := newSite(t, "a.test", tc.robots, pages)
			d := newDispatcher(t, "tcp://127.0.0.1:*")
			cfg := testConfig(t, d, s)
			cfg.DefaultDelay = tc.defaultDelay
			start(t, cfg)
			register(t, d)
			for _, p := range []string{"1", "2", "3"} {
				d.task("p"+p, 1, "http://a.test/people/"+p)
			}
			for id, res := range d.collect(3, 15*time.Second) {
				if res.Class != "" {
					t.Errorf("%s: class %q: %s", id, res.Class, res.Error)
				}
			}
			hits := s.log()
			if len(hits) != 5 || hits[0].path != "/robots.txt" || hits[1].path != "/people/1" || !strings.HasPrefix(hits[2].path, soft404Prefix) {
				t.Fatalf("requests %q, want robots.txt, the first page, the soft-404 probe, then 2 pages", paths(hits))
			}
			for i, g := range gaps(hits) {
				if g < tc.want {
					t.Errorf("gap %d between request arrivals %v, want at least %v (%s)", i, g, tc.want, paths(hits))
				}
			}
		})
	}
}

func TestHostsInParallel(t *testing.T) {
	t.Parallel()
	// Each host's page is answered only once the other host's page has been
	// requested: both fetches must be in progress at the same time.
	a := newSite(t, "a.test", "", map[string]string{"/people/ann": annPage})
	b := newSite(t, "b.test", "", map[string]string{"/people/ann": annPage})
	var stalled atomic.Bool
	meet := func(mine, theirs chan struct{}) func() {
		var once sync.Once
		return func() {
			once.Do(func() { close(mine) })
			select {
			case <-theirs:
			case <-time.After(5 * time.Second):
				stalled.Store(true)
			}
		}
	}
	aIn, bIn := make(chan struct{}), make(chan struct{})
	a.hold["/people/ann"] = meet(aIn, bIn)
	b.hold["/people/ann"] = meet(bIn, aIn)

	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d, a, b)
	cfg.Workers = 2
	start(t, cfg)
	register(t, d)
	d.task("a", 1, "http://a.test/people/ann")
	d.task("b", 1, "http://b.test/people/ann")
	for id, res := range d.collect(2, 15*time.Second) {
		if res.Class != "" {
			t.Errorf("%s: class %q: %s", id, res.Class, res.Error)
		}
	}
	if stalled.Load() {
		t.Error("one host's fetch waited for the other's: hosts were not fetched in parallel")
	}
}

func TestHostCacheCarriesPoliteness(t *testing.T) {
	t.Parallel()
	// Another supervisor crawled a.test a moment ago and cached its
	// robots.txt: this one must not fetch robots.txt again and must wait
	// out the Crawl-delay from that last request.
	s := newSite(t, "a.test", "User-agent: *\nDisallow: /\n", map[string]string{"/people/ann": annPage})
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d, s)
	cfg.NoSoft404 = true // only the page may be requested
	cache := cfg.Cache
	ctx := context.Background()
	now := time.Now()
	if err := cache.PutRobots(ctx, "a.test", store.Robots{
		Status: 200, Body: []byte("User-agent: *\nCrawl-delay: 0.5\n"), FetchedAt: now, Expires: now.Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	last := time.Now()
	if err := cache.PutLastCrawl(ctx, "a.test", last); err != nil {
		t.Fatal(err)
	}
	start(t, cfg)
	register(t, d)
	d.task("ann", 1, "http://a.test/people/ann")
	res := d.collect(1, 10*time.Second)["ann"]
	if res.Class != "" {
		t.Fatalf("class %q: %s (the cached robots.txt allows everything)", res.Class, res.Error)
	}
	hits := s.log()
	if len(hits) != 1 || hits[0].path != "/people/ann" {
		t.Fatalf("requests %q, want only /people/ann (robots.txt was cached)", paths(hits))
	}
	if gap := hits[0].at.Sub(last); gap < 500*time.Millisecond {
		t.Errorf("requested %v after the cached last crawl, want at least the 500ms Crawl-delay", gap)
	}
	// The time is written behind the request, within a flush interval.
	deadline := time.Now().Add(5 * time.Second)
	for {
		after, err := cache.LastCrawl(ctx, "a.test")
		if err == nil && after.After(last) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("last crawl 5s after the request = %v, %v; want later than %v", after, err, last)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// TestHandoverCarriesPoliteness: a host that moved here from a supervisor
// that shares no cache with this one comes with the time of its last
// request there (Task.HostLast), and the Crawl-delay runs from it.
func TestHandoverCarriesPoliteness(t *testing.T) {
	t.Parallel()
	s := newSite(t, "a.test", "User-agent: *\nCrawl-delay: 0.5\n", map[string]string{"/people/ann": annPage})
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d, s)
	cfg.NoSoft404 = true
	start(t, cfg)
	register(t, d)
	last := time.Now()
	d.handover("ann", 1, "http://a.test/people/ann", last)
	res := d.collect(1, 10*time.Second)["ann"]
	if res.Class != "" {
		t.Fatalf("class %q: %s", res.Class, res.Error)
	}
	hits := s.log()
	if len(hits) != 2 || hits[0].path != "/robots.txt" || hits[1].path != "/people/ann" {
		t.Fatalf("requests %q, want robots.txt then /people/ann", paths(hits))
	}
	// robots.txt is a request too: it waits the default delay (the
	// host's own is unknown until then) from the handed-over time, and the
	// page waits the Crawl-delay after it.
	if gap := hits[0].at.Sub(last); gap < cfg.DefaultDelay {
		t.Errorf("robots.txt requested %v after the handed-over last request, want at least the %v default delay", gap, cfg.DefaultDelay)
	}
	if gap := hits[1].at.Sub(hits[0].at); gap < 500*time.Millisecond {
		t.Errorf("page requested %v after robots.txt, want at least the 500ms Crawl-delay", gap)
	}
}

// countingCache counts the last-crawl writes that reach a real SQLite
// cache, batched and single.
type countingCache struct {
	store.Store
	batches, hosts, singles atomic.Int32
}

func (c *countingCache) PutLastCrawls(ctx context.Context, times map[string]time.Time) error {
	c.batches.Add(1)
	c.hosts.Add(int32(len(times)))
	return c.Store.(lastCrawlBatcher).PutLastCrawls(ctx, times)
}

func (c *countingCache) PutLastCrawl(ctx context.Context, host string, at time.Time) error {
	c.singles.Add(1)
	return c.Store.PutLastCrawl(ctx, host, at)
}

func TestLastCrawlWrittenBehind(t *testing.T) {
	t.Parallel()
	// Many requests, few writes: the times go to the cache in batches,
	// and once the supervisor stops the cache holds, for every host, a
	// time no earlier than its last request's arrival.
	pages := map[string]string{}
	for i := range 8 {
		pages[fmt.Sprintf("/people/%d", i)] = annPage
	}
	a := newSite(t, "a.test", "", pages)
	b := newSite(t, "b.test", "", pages)
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d, a, b)
	cfg.DefaultDelay = NoDelay
	cache := &countingCache{Store: openCache(t)}
	cfg.Cache = cache
	r := start(t, cfg)
	register(t, d)
	for _, s := range []*site{a, b} {
		for p := range pages {
			d.task(s.name+p, 1, "http://"+s.name+p)
		}
	}
	for id, res := range d.collect(2*len(pages), 15*time.Second) {
		if res.Class != "" {
			t.Errorf("%s: class %q: %s", id, res.Class, res.Error)
		}
	}
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	requests := len(a.log()) + len(b.log())
	if n := cache.singles.Load(); n != 0 {
		t.Errorf("%d single last-crawl writes; want every write batched", n)
	}
	if n := cache.batches.Load(); n == 0 || int(n) >= requests {
		t.Errorf("%d batched writes for %d requests; want at least one and fewer than the requests", n, requests)
	}
	for _, s := range []*site{a, b} {
		hits := s.log()
		lastHit := hits[len(hits)-1].at
		got, err := cache.LastCrawl(context.Background(), s.name)
		if err != nil || got.Before(lastHit) {
			t.Errorf("%s: cached last crawl %v, %v; want no earlier than the last request's arrival %v", s.name, got, err, lastHit)
		}
	}
}

// TestShutdownLeavesNothing is not parallel: it counts goroutines, and
// parallel tests only start once the sequential ones are done.
func TestShutdownLeavesNothing(t *testing.T) {
	s := newSite(t, "a.test", "", map[string]string{"/people/1": annPage, "/people/2": annPage, "/people/3": annPage})
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d, s)
	cfg.DefaultDelay = time.Hour // the later tasks stay queued
	baseline := runtime.NumGoroutine()

	sup, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- sup.Run(ctx) }()
	register(t, d)
	for _, p := range []string{"1", "2", "3"} {
		d.task("p"+p, 1, "http://a.test/people/"+p)
	}
	// Wait until all three are held: one or more in progress or answered,
	// the rest waiting out the hour.
	deadline := time.Now().Add(10 * time.Second)
	for sup.Stats().Hosts == 0 || len(s.log()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("tasks never reached the host")
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of cancel")
	}
	waitGoroutines(t, baseline, 5*time.Second)

	// The task socket is closed: its endpoint can be bound again (ZeroMQ
	// unbinds in its I/O thread, so allow it a moment).
	deadline = time.Now().Add(5 * time.Second)
	for {
		again, err := wire.Listen(sup.Endpoint())
		if err == nil {
			again.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task endpoint still bound 5s after Run returned: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	if err := sup.Run(context.Background()); err == nil {
		t.Error("second Run succeeded")
	}
}

func TestOverCapacityDropped(t *testing.T) {
	t.Parallel()
	s := newSite(t, "a.test", "", map[string]string{"/people/1": annPage})
	// robots.txt is not answered until the test ends: nothing finishes,
	// nor is handed back (deferred.go), so nothing frees capacity.
	s.hold["/robots.txt"] = holdUntilCleanup(t)
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d, s)
	cfg.Capacity = 2
	r := start(t, cfg)
	register(t, d)
	for _, id := range []string{"1", "2", "3", "4"} {
		d.task("p"+id, 1, "http://a.test/people/"+id)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := r.sup.Stats()
		if st.Dropped == 2 && st.InFlight == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, want 2 held and 2 dropped", st)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	// robots.txt may or may not have been fetched yet; a page may not.
	for _, h := range s.log() {
		if h.path != "/robots.txt" {
			t.Errorf("requests %q, want nothing but robots.txt within the delay", paths(s.log()))
			break
		}
	}
}

// TestCapacityFreedBeforeResult: the dispatcher counts a task done when its
// result arrives and may send the next one at once; with Capacity 1 that
// next task must find room, every time, and never be dropped.
func TestCapacityFreedBeforeResult(t *testing.T) {
	t.Parallel()
	pages := map[string]string{}
	for i := range 30 {
		pages[fmt.Sprintf("/people/%d", i)] = annPage
	}
	s := newSite(t, "a.test", "", pages)
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d, s)
	cfg.Capacity = 1
	cfg.DefaultDelay = NoDelay
	r := start(t, cfg)
	register(t, d)
	for i := range 30 {
		id := fmt.Sprintf("p%d", i)
		d.task(id, 1, fmt.Sprintf("http://a.test/people/%d", i))
		res := d.collect(1, 10*time.Second)
		if res[id] == nil || res[id].Class != "" {
			t.Fatalf("task %d: results %v, stats %+v", i, res, r.sup.Stats())
		}
	}
	if st := r.sup.Stats(); st.Dropped != 0 {
		t.Fatalf("%d tasks dropped at capacity 1 although each was sent after the previous result", st.Dropped)
	}
}
