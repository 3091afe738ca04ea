package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"backfill/fetch"
	"backfill/store"
)

// The per-host tables of the supervisor hold at most their bound however
// many hosts go through them: each is fed ten times its bound here.

func TestLRU(t *testing.T) {
	var evicted []string
	c := newLRU(3, func(k string, v int) { evicted = append(evicted, fmt.Sprint(k, "=", v)) })
	for i, k := range []string{"a", "b", "c"} {
		c.put(k, i)
	}
	if v, ok := c.get("a"); !ok || v != 0 { // a is now the most recent
		t.Fatalf("get(a) = %v, %v", v, ok)
	}
	c.put("d", 3) // b is the least recent
	c.put("c", 20)
	c.put("e", 4) // a is the least recent now
	if want := []string{"b=1", "a=0"}; !slices.Equal(evicted, want) {
		t.Errorf("evicted %v, want %v", evicted, want)
	}
	var order []string
	c.each(func(k string, v int) bool { order = append(order, fmt.Sprint(k, "=", v)); return true })
	if want := []string{"e=4", "c=20", "d=3"}; !slices.Equal(order, want) {
		t.Errorf("entries %v, want %v (most recent first)", order, want)
	}
	c.remove("c")
	if _, ok := c.get("c"); ok || c.len() != 2 || len(evicted) != 2 {
		t.Errorf("after remove: len %d, evicted %v", c.len(), evicted)
	}
	for i := range 30 {
		c.put(fmt.Sprint("k", i), i)
		if c.len() > 3 {
			t.Fatalf("%d entries after %d puts, bound 3", c.len(), i+1)
		}
	}
}

// TestHealthBounded: hosts and addresses in trouble are kept up to the
// bound; a blacklisted host still being asked about stays blacklisted, one
// nobody asks about is forgotten; a host forgotten while held back hands
// its wait to spill.
func TestHealthBounded(t *testing.T) {
	const bound = 8
	hs := newHealth(nil, time.Hour, time.Second, fetch.Blacklist{}, bound)
	spilled := map[string]time.Time{}
	hs.spill = func(host string, until time.Time) { spilled[host] = until }
	now := time.Now()
	refused := func(host, addr string) error {
		return &fetch.Error{Class: fetch.ClassConnect, URL: "http://" + host + "/", Err: errors.New("connection refused"), RemoteAddr: addr}
	}
	for range autoNetFails {
		hs.observe("hot.test", nil, refused("hot.test", "127.0.0.1:9"), time.Second, now)
		hs.observe("cold.test", nil, refused("cold.test", "127.0.0.2:9"), time.Second, now)
	}
	if hs.refused("hot.test") == "" || hs.refused("cold.test") == "" {
		t.Fatal("hosts failing autoNetFails times in a row are not blacklisted")
	}
	busy := &fetch.Response{Status: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"3600"}}}
	until, _ := hs.observe("wait.test", busy, nil, time.Second, now)
	for i := range 10 * bound {
		host := fmt.Sprintf("h%d.test", i)
		hs.observe(host, nil, refused(host, fmt.Sprintf("127.0.1.%d:9", i)), time.Second, now)
		hs.refused("hot.test") // its tasks keep coming
		hs.mu.Lock()
		nh, na := hs.hosts.len(), hs.addrs.len()
		hs.mu.Unlock()
		if nh > bound || na > bound {
			t.Fatalf("after %d hosts: %d hosts and %d addresses kept, bound %d", i+1, nh, na, bound)
		}
	}
	if hs.refused("hot.test") == "" {
		t.Error("a blacklisted host still asked about was forgotten")
	}
	if hs.refused("cold.test") != "" {
		t.Error("a blacklisted host nobody asks about is kept past the bound")
	}
	if got := spilled["wait.test"]; !got.Equal(until) {
		t.Errorf("forgotten host in Retry-After: spilled %v, want its wait until %v", got, until)
	}
	for h, at := range spilled {
		if !at.After(now) {
			t.Errorf("%s spilled with a wait %v that had ended", h, at)
		}
	}
}

func TestSoft404sBounded(t *testing.T) {
	const bound = 8
	s := newSoft404s(bound)
	p := &soft404Print{exact: 1}
	for i := range 10 * bound {
		s.set(fmt.Sprintf("h%d.test", i), p, time.Now().Add(time.Hour))
		if _, ok := s.known("h0.test"); i > 0 && !ok {
			t.Fatalf("a verdict in use was forgotten after %d hosts", i+1)
		}
	}
	s.mu.Lock()
	n := s.hosts.len()
	s.mu.Unlock()
	if n > bound {
		t.Errorf("%d verdicts kept, bound %d", n, bound)
	}
	if got, ok := s.known(fmt.Sprintf("h%d.test", 10*bound-1)); !ok || got != p {
		t.Errorf("latest verdict = %v, %v", got, ok)
	}
}

// TestMemCacheBounded: without a shared cache, robots entries and soft-404
// verdicts are kept for at most the bound's hosts, and last-crawl times
// while they may still matter.
func TestMemCacheBounded(t *testing.T) {
	const bound, horizon = 8, time.Minute
	c := newMemCache(bound, horizon)
	ctx := context.Background()
	old, recent := time.Now().Add(-2*horizon), time.Now()
	n := 10 * max(bound, memCacheSweep)
	for i := range n {
		h := fmt.Sprintf("h%d.test", i)
		c.PutRobots(ctx, h, store.Robots{Status: 404})
		c.PutSoft404(ctx, h, store.Soft404{})
		at := old
		if i%10 == 1 {
			at = recent
		}
		c.PutLastCrawl(ctx, h, at)
	}
	c.mu.Lock()
	nr, ns, nl := c.robots.len(), c.soft404.len(), len(c.last)
	c.mu.Unlock()
	if nr > bound || ns > bound {
		t.Errorf("%d robots entries and %d soft-404 verdicts kept, bound %d", nr, ns, bound)
	}
	if live := n / 10; nl > 2*live+memCacheSweep {
		t.Errorf("%d last-crawl times kept of %d, %d of them within the horizon", nl, n, live)
	}
	for _, i := range []int{1, n - 9} {
		h := fmt.Sprintf("h%d.test", i)
		if at, err := c.LastCrawl(ctx, h); err != nil || !at.Equal(recent) {
			t.Errorf("%s: last crawl within the horizon %v, %v; want %v", h, at, err, recent)
		}
	}
}

func TestRenderCacheEntriesBounded(t *testing.T) {
	c := newRenderCache(1 << 20)
	empty := func(_ context.Context, u string) (*fetch.Response, error) {
		return &fetch.Response{URL: u, Status: http.StatusNoContent, Header: http.Header{}}, nil
	}
	for i := range 10 * renderCacheEntries {
		if _, err, _ := c.get(context.Background(), fmt.Sprintf("http://a.test/%d.js", i), empty); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	n, kept := len(c.entries), len(c.order)
	c.mu.Unlock()
	if n > renderCacheEntries || kept > renderCacheEntries {
		t.Errorf("%d entries (%d kept) of empty answers, bound %d", n, kept, renderCacheEntries)
	}
}

// TestForgottenHostKeepsDelay: a host the scheduler forgot within its
// delay, because many other hosts went through it, keeps its delay when it
// comes back: the time of its last request is read again from the cache
// (the shared store, or the in-memory one without it).
func TestForgottenHostKeepsDelay(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			t.Parallel()
			const bound = 4
			delay := 1500 * time.Millisecond
			a := newSite(t, "a.test", "", map[string]string{"/people/1": annPage, "/people/2": annPage})
			d := newDispatcher(t, "tcp://127.0.0.1:*")
			cfg := testConfig(t, d, a)
			if !shared {
				cfg.Cache = nil
			}
			cfg.NoSoft404 = true
			cfg.DefaultDelay = delay
			cfg.Workers, cfg.Capacity, cfg.MaxHosts = 2, bound, bound
			r := start(t, cfg)
			register(t, d)
			d.task("a1", 1, "http://a.test/people/1")
			if res := d.collect(1, 10*time.Second)["a1"]; res.Class != "" {
				t.Fatalf("a1: class %q: %s", res.Class, res.Error)
			}
			// Ten times the bound of other hosts, each answered from its
			// cached robots.txt without a request (put in the cache a
			// batch at a time: the in-memory one is bounded too).
			ctx := context.Background()
			for i := range 10 * bound {
				h := fmt.Sprintf("other%d.test", i)
				if err := r.sup.cache.PutRobots(ctx, h, store.Robots{Status: 200, Body: []byte("User-agent: *\nDisallow: /\n"), FetchedAt: time.Now(), Expires: time.Now().Add(time.Hour)}); err != nil {
					t.Fatal(err)
				}
				d.task(h, 1, "http://"+h+"/")
				if i%bound == bound-1 {
					for id, res := range d.collect(bound, 10*time.Second) {
						if res.Class != ClassRobots {
							t.Fatalf("%s: class %q, want %q", id, res.Class, ClassRobots)
						}
					}
				}
			}
			if _, hosts := r.sup.sched.counts(); hosts > bound {
				t.Errorf("scheduler holds %d hosts, bound %d", hosts, bound)
			}
			r.sup.sched.mu.Lock()
			_, kept := r.sup.sched.hosts["a.test"]
			r.sup.sched.mu.Unlock()
			if kept {
				t.Fatal("a.test was not forgotten: the test does not reach the case it is for")
			}
			sent := time.Now()
			d.task("a2", 1, "http://a.test/people/2")
			if res := d.collect(1, 10*time.Second)["a2"]; res.Class != "" {
				t.Fatalf("a2: class %q: %s", res.Class, res.Error)
			}
			// Without a shared cache a.test's robots.txt was forgotten
			// too, and is fetched again: a request like any other.
			hits := a.log()
			if n := len(hits); n < 3 || n > 4 || hits[0].path != "/robots.txt" || hits[n-1].path != "/people/2" {
				t.Fatalf("requests %q, want robots.txt and the two pages (and robots.txt again without a shared cache)", paths(hits))
			}
			if sent.After(hits[1].at.Add(delay)) {
				t.Logf("a2 was sent %v after a1's request: its delay had passed already", sent.Sub(hits[1].at))
			}
			for i, g := range gaps(hits) {
				if g < delay {
					t.Errorf("gap %d between request arrivals %v, want at least the %v delay (%s)", i, g, delay, paths(hits))
				}
			}
		})
	}
}

// peekingCache is a real SQLite host cache that looks at the supervisor's
// buffered times while a batch of them is being written.
type peekingCache struct {
	store.Store
	during func()
}

func (c *peekingCache) PutLastCrawls(ctx context.Context, times map[string]time.Time) error {
	c.during()
	return c.Store.(lastCrawlBatcher).PutLastCrawls(ctx, times)
}

// TestLastCrawlBuffer: a buffered time is found while it is on its way to
// the cache (a host the scheduler forgot meanwhile comes back to it), and
// a cache that keeps failing keeps in the buffer only the times that may
// still space out a request.
func TestLastCrawlBuffer(t *testing.T) {
	now := time.Now()
	cfg := Config{DefaultDelay: time.Second, MaxCrawlDelay: time.Second}
	cache := &peekingCache{Store: openCache(t)}
	s := &Supervisor{cfg: cfg, log: slog.New(slog.DiscardHandler), cache: cache, lastPending: map[string]time.Time{}}
	var during time.Time
	cache.during = func() { during, _ = s.pendingLastCrawl("a.test") }
	s.recordLastCrawl("a.test", now)
	s.flushLastCrawls(context.Background())
	if !during.Equal(now) {
		t.Errorf("while being written: pending time %v, want %v", during, now)
	}
	if _, ok := s.pendingLastCrawl("a.test"); ok {
		t.Error("a written time is still pending")
	}
	if at, err := cache.LastCrawl(context.Background(), "a.test"); err != nil || !at.Equal(now) {
		t.Errorf("cached %v, %v; want %v", at, err, now)
	}

	// Workers look at the buffer while flushes write it.
	cache.during = func() {}
	stop, looked := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(looked)
		for {
			select {
			case <-stop:
				return
			default:
				s.pendingLastCrawl("b.test")
			}
		}
	}()
	for range 20 {
		s.recordLastCrawl("b.test", time.Now())
		s.flushLastCrawls(context.Background())
	}
	close(stop)
	<-looked

	cache.Store.Close() // the cache is down from now on
	times := map[string]time.Time{
		"old.test":   now.Add(-time.Hour), // matters to no one any more
		"new.test":   now,                 // within its delay
		"spill.test": now.Add(time.Hour),  // a wait handed over by the health registry
	}
	for h, at := range times {
		s.recordLastCrawl(h, at)
	}
	s.flushLastCrawls(context.Background())
	for h, at := range times {
		got, ok := s.pendingLastCrawl(h)
		if want := h != "old.test"; ok != want || (ok && !got.Equal(at)) {
			t.Errorf("%s after a failed write: pending %v (%v), want kept %v", h, got, ok, want)
		}
	}
}

// TestLastCrawlFlushCutByStop: a flush whose context is cancelled (the
// supervisor stopping) reports no cache failure and keeps its times for
// Run's last flush, which writes them.
func TestLastCrawlFlushCutByStop(t *testing.T) {
	var logged bytes.Buffer
	cache := &peekingCache{Store: openCache(t), during: func() {}}
	s := &Supervisor{cfg: Config{DefaultDelay: time.Second}, log: slog.New(slog.NewTextHandler(&logged, nil)), cache: cache,
		lastPending: map[string]time.Time{}}
	now := time.Now().UTC()
	s.recordLastCrawl("a.test", now)
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	s.flushLastCrawls(stopped)
	if logged.Len() > 0 {
		t.Errorf("a flush cut short by the stop logged:\n%s", logged.String())
	}
	if at, ok := s.pendingLastCrawl("a.test"); !ok || !at.Equal(now) {
		t.Fatalf("after the cut flush: pending %v (%v), want %v", at, ok, now)
	}
	s.flushLastCrawls(context.Background())
	if at, err := cache.LastCrawl(context.Background(), "a.test"); err != nil || !at.Equal(now) {
		t.Errorf("after the last flush the cache holds %v, %v; want %v", at, err, now)
	}
}

// TestAttemptsForgottenWhateverTheAnswer: a page answered 503 is queued
// again with its count of attempts; when it is then answered another way
// (here robots.txt, fetched again meanwhile, disallows it) the count goes
// too, so health keeps counts of held tasks only.
func TestAttemptsForgottenWhateverTheAnswer(t *testing.T) {
	t.Parallel()
	s := newFuncSite(t, "a.test", false, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			w.Write([]byte("User-agent: *\nDisallow: /\n"))
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "not now", http.StatusServiceUnavailable)
		}
	})
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d, s)
	cfg.NoSoft404 = true
	// The cached robots.txt allows everything until just after the 503.
	now := time.Now()
	if err := cfg.Cache.PutRobots(context.Background(), "a.test", store.Robots{Status: 404, FetchedAt: now, Expires: now.Add(500 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	r := start(t, cfg)
	register(t, d)
	d.task("ann", 1, "http://a.test/people/ann")
	if res := d.collect(1, 15*time.Second)["ann"]; res.Class != ClassRobots {
		t.Fatalf("class %q (%s), want %q: requests %s", res.Class, res.Error, ClassRobots, paths(s.log()))
	}
	if p := paths(s.log()); p != "/people/ann /robots.txt" {
		t.Fatalf("requests %q, want the page (503) then robots.txt", p)
	}
	r.sup.health.mu.Lock()
	n := len(r.sup.health.attempts)
	r.sup.health.mu.Unlock()
	if n != 0 {
		t.Errorf("%d tasks' attempts kept after every task was answered", n)
	}
}
