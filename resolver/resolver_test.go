package resolver_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/resolver"
	"backfill/resolver/resolvertest"
)

func startServer(t *testing.T) *resolvertest.Server {
	t.Helper()
	s, err := resolvertest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func newResolver(t *testing.T, s *resolvertest.Server, cfg resolver.Config) *resolver.Resolver {
	t.Helper()
	cfg.Servers = []string{s.Addr}
	if cfg.Timeout == 0 {
		cfg.Timeout = 100 * time.Millisecond
	}
	r, err := resolver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var (
	pub1 = netip.MustParseAddr("192.0.2.10")
	pub2 = netip.MustParseAddr("198.51.100.7")
	pub6 = netip.MustParseAddr("2001:db8::5")
)

// TestLookupOutcomes: every way a look-up ends, with its class, the
// queries it cost and a bounded result.
func TestLookupOutcomes(t *testing.T) {
	many := make([]netip.Addr, 400)
	for i := range many {
		many[i] = netip.AddrFrom4([4]byte{192, 0, 2, byte(i % 250)})
	}
	tests := []struct {
		name      string
		setup     func(s *resolvertest.Server)
		host      string
		class     string
		ips       int   // addresses in the answer
		queries   int64 // queries the server received; -1: not checked
		truncated bool
	}{
		{"address", func(s *resolvertest.Server) { s.Add("www.a.test", pub1, pub2) }, "www.a.test", "", 2, 1, false},
		{"cname", func(s *resolvertest.Server) { s.Add("real.a.test", pub1); s.CNAME("www.a.test", "real.a.test") }, "WWW.A.test.", "", 1, 1, false},
		{"ipv6 only", func(s *resolvertest.Server) { s.Add("v6.a.test", pub6) }, "v6.a.test", "", 1, 2, false},
		{"nxdomain", func(s *resolvertest.Server) {}, "nope.a.test", resolver.ClassNXDomain, 0, 1, false},
		{"servfail", func(s *resolvertest.Server) { s.ServFail("broken.a.test") }, "broken.a.test", resolver.ClassServFail, 0, 1, false},
		{"timeout", func(s *resolvertest.Server) { s.Silent("slow.a.test") }, "slow.a.test", resolver.ClassTimeout, 0, 3, false},
		{"drops every other", func(s *resolvertest.Server) { s.Add("www.a.test", pub1); s.DropEveryOther() }, "www.a.test", "", 1, -1, false},
		{"truncated", func(s *resolvertest.Server) { s.Add("www.a.test", pub1); s.Truncate() }, "www.a.test", "", 1, 2, true},
		{"cname loop", func(s *resolvertest.Server) {
			s.CNAME("a.loop.test", "b.loop.test")
			s.CNAME("b.loop.test", "a.loop.test")
		}, "a.loop.test", resolver.ClassError, 0, 1, false},
		{"huge answer", func(s *resolvertest.Server) { s.Add("big.a.test", many...) }, "big.a.test", "", resolver.DefaultMaxAddrs, 2, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t)
			tc.setup(s)
			r := newResolver(t, s, resolver.Config{})
			a := r.Lookup(context.Background(), tc.host)
			if a.Class != tc.class || len(a.IPs) != tc.ips {
				t.Fatalf("answer %+v: want class %q and %d addresses", a, tc.class, tc.ips)
			}
			if tc.queries >= 0 && s.Queries() != tc.queries {
				t.Errorf("server got %d queries, want %d", s.Queries(), tc.queries)
			}
			st := r.Stats()
			if (st.Truncated > 0) != tc.truncated {
				t.Errorf("truncated answers %d, want some: %v", st.Truncated, tc.truncated)
			}
			if tc.class == resolver.ClassTimeout {
				var e *resolver.Error
				if err := a.Err(tc.host); !errors.As(err, &e) || !e.Timeout() {
					t.Errorf("error %v is no time-out", err)
				}
				if st.Timeouts != 3 || st.Cuts < 1 {
					t.Errorf("timeouts %d cuts %d, want 3 and a cut window", st.Timeouts, st.Cuts)
				}
			}
			if st.InFlight != 0 {
				t.Errorf("%d queries still in flight", st.InFlight)
			}
		})
	}
}

// TestNegativeTTL: NXDOMAIN is kept for the SOA's negative TTL.
func TestNegativeTTL(t *testing.T) {
	s := startServer(t)
	s.SetTTL(300, 42)
	r := newResolver(t, s, resolver.Config{})
	if a := r.Lookup(context.Background(), "gone.test"); a.Class != resolver.ClassNXDomain || a.TTL != 42 {
		t.Fatalf("answer %+v: want nxdomain with TTL 42", a)
	}
}

// TestCoalesce: a hundred tasks waiting on one name cost one query.
func TestCoalesce(t *testing.T) {
	s := startServer(t)
	s.Add("www.a.test", pub1)
	c := resolver.NewCache(newResolver(t, s, resolver.Config{}), resolver.CacheConfig{})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 100 {
		wg.Go(func() {
			addrs, err := c.Addrs(context.Background(), "www.a.test")
			if err == nil && (len(addrs) != 1 || addrs[0] != pub1) {
				err = fmt.Errorf("addresses %v", addrs)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if q := s.Queries(); q != 1 {
		t.Fatalf("server got %d queries for one name, want 1", q)
	}
	if st := c.Stats(); st.Lookups != 100 || st.Misses != 1 {
		t.Fatalf("stats %+v: want 100 look-ups, 1 miss", st)
	}
}

// TestExpiry: an answer is kept for its TTL within the floor and ceiling,
// then asked again; a failure only briefly.
func TestExpiry(t *testing.T) {
	s := startServer(t)
	s.SetTTL(60, 60)
	s.Add("www.a.test", pub1)
	s.ServFail("broken.a.test")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	c := resolver.NewCache(newResolver(t, s, resolver.Config{}), resolver.CacheConfig{
		Min: 2 * time.Minute, Max: time.Hour, Failure: 10 * time.Second, Now: clock})
	ctx := context.Background()
	steps := []struct {
		after   time.Duration
		name    string
		queries int64 // total the server has seen after the look-up
		cached  bool
	}{
		{0, "www.a.test", 1, false},
		{90 * time.Second, "www.a.test", 1, true}, // TTL 60 s, floor 2 min
		{0, "broken.a.test", 2, false},
		{5 * time.Second, "broken.a.test", 2, true},
		{10 * time.Second, "broken.a.test", 3, false}, // failure kept 10 s
		{30 * time.Second, "www.a.test", 4, false},    // 2 min 5 s after the first: expired
	}
	for i, st := range steps {
		now = now.Add(st.after)
		a := c.Lookup(ctx, st.name)
		if q := s.Queries(); q != st.queries || a.Cached != st.cached {
			t.Fatalf("step %d (%s): %d queries, cached %v; want %d, %v", i, st.name, q, a.Cached, st.queries, st.cached)
		}
	}
	if !c.Fresh("www.a.test") || c.Fresh("other.a.test") {
		t.Error("Fresh is wrong")
	}
}

// TestRestart: a new process with the same store asks nothing it knew,
// and asks again what only failed.
func TestRestart(t *testing.T) {
	s := startServer(t)
	s.Add("www.a.test", pub1)
	s.Silent("slow.a.test")
	dir := t.TempDir()
	ctx := context.Background()
	names := []string{"www.a.test", "gone.a.test", "slow.a.test"}
	run := func() resolver.Stats {
		st, err := resolver.OpenStore(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		c := resolver.NewCache(newResolver(t, s, resolver.Config{Attempts: 1}), resolver.CacheConfig{Store: st})
		want := []string{"", resolver.ClassNXDomain, resolver.ClassTimeout}
		for i, n := range names {
			if a := c.Lookup(ctx, n); a.Class != want[i] {
				t.Fatalf("%s: class %q, want %q", n, a.Class, want[i])
			}
		}
		return c.Stats()
	}
	first := run()
	second := run()
	if first.Queries != 3 || first.Misses != 3 {
		t.Fatalf("first run: %+v", first)
	}
	if second.Stored != 2 || second.Queries != 1 {
		t.Fatalf("after restart: %+v; want the 2 answers from the store and 1 query (the time-out asked again)", second)
	}
}

// TestBusyServer: a server that answers at most 200 queries a second and
// drops the rest gets its questions answered with few repeats: the
// limiter paces itself to what the server answers.
func TestBusyServer(t *testing.T) {
	proctest.Short(t, "paced: takes a few seconds")
	s := startServer(t)
	s.Limit(200)
	const n = 200
	for i := range n {
		s.Add(fmt.Sprintf("h%d.a.test", i), pub1)
	}
	c := resolver.NewCache(newResolver(t, s, resolver.Config{Timeout: 200 * time.Millisecond, Attempts: 5}), resolver.CacheConfig{})
	var wg sync.WaitGroup
	var failed sync.Map
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("h%d.a.test", i)
			if _, err := c.Addrs(context.Background(), name); err != nil {
				failed.Store(name, err)
			}
		})
	}
	wg.Wait()
	failed.Range(func(k, v any) bool { t.Errorf("%s: %v", k, v); return true })
	t.Logf("stats %+v server queries %d dropped %d", c.Stats(), s.Queries(), s.Dropped())
	if q := s.Queries(); float64(q) > 1.5*n {
		t.Errorf("%d queries for %d questions: more than 1.5 each", q, n)
	}
	if st := c.Stats(); st.Undone != 0 || st.Loss != 0 {
		t.Errorf("undone %d, loss %.2f: a busy server taken for a lossy path", st.Undone, st.Loss)
	}
}

// TestLossyServer: a server whose path loses half the queries at random,
// whatever the rate, is not a busy one. Every name is resolved, at about
// two queries each (the fewest such a path allows), the cut its first
// losses caused is undone, and the loss is seen for what it is.
func TestLossyServer(t *testing.T) {
	if testing.Short() {
		t.Skip("retries lost queries: takes a few seconds")
	}
	s := startServer(t)
	s.Lose(0.5, 7)
	const n = 300
	for i := range n {
		s.Add(fmt.Sprintf("h%d.a.test", i), pub1)
	}
	c := resolver.NewCache(newResolver(t, s, resolver.Config{Timeout: 300 * time.Millisecond}), resolver.CacheConfig{})
	var wg sync.WaitGroup
	var failed sync.Map
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("h%d.a.test", i)
			if _, err := c.Addrs(context.Background(), name); err != nil {
				failed.Store(name, err)
			}
		})
	}
	wg.Wait()
	failed.Range(func(k, v any) bool { t.Errorf("%s: %v", k, v); return true })
	st := c.Stats()
	t.Logf("stats %+v server queries %d dropped %d", st, s.Queries(), s.Dropped())
	if q := s.Queries(); float64(q) > 2.5*n {
		t.Errorf("%d queries for %d questions: more than 2.5 each", q, n)
	}
	if st.Undone < 1 || st.Loss < 0.3 || st.Loss > 0.7 {
		t.Errorf("cuts %d, undone %d, loss %.2f: want a cut undone and a loss near 0.5", st.Cuts, st.Undone, st.Loss)
	}
	if st.InFlight != 0 {
		t.Errorf("%d queries still in flight", st.InFlight)
	}
}

// TestFailureKeptLonger: a name that keeps timing out is remembered as
// failing for twice as long each time, up to MaxFailure, and asked again
// by a new process (failures never reach the Store).
func TestFailureKeptLonger(t *testing.T) {
	s := startServer(t)
	s.Silent("slow.a.test")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st, err := resolver.OpenStore(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cache := func() *resolver.Cache {
		return resolver.NewCache(newResolver(t, s, resolver.Config{Attempts: 1}), resolver.CacheConfig{
			Failure: 10 * time.Second, MaxFailure: 40 * time.Second, Store: st, Now: clock})
	}
	c := cache()
	steps := []struct {
		after   time.Duration
		queries int64 // total the server has seen after the look-up
		cached  bool
	}{
		{0, 1, false},
		{9 * time.Second, 1, true},
		{1 * time.Second, 2, false}, // kept 10 s
		{19 * time.Second, 2, true}, // now kept 20 s
		{1 * time.Second, 3, false}, // 20 s after
		{39 * time.Second, 3, true}, // now 40 s
		{1 * time.Second, 4, false}, // 40 s after
		{39 * time.Second, 4, true}, // 40 s: the ceiling
		{1 * time.Second, 5, false}, // 40 s after
	}
	for i, step := range steps {
		now = now.Add(step.after)
		a := c.Lookup(context.Background(), "slow.a.test")
		if q := s.Queries(); a.Class != resolver.ClassTimeout || q != step.queries || a.Cached != step.cached {
			t.Fatalf("step %d: class %q, %d queries, cached %v; want %q, %d, %v", i, a.Class, q, a.Cached, resolver.ClassTimeout, step.queries, step.cached)
		}
	}
	if a := cache().Lookup(context.Background(), "slow.a.test"); a.Cached || s.Queries() != 6 {
		t.Fatalf("a new process: cached %v, %d queries; want the name asked again", a.Cached, s.Queries())
	}
}
