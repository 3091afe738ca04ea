package supervisor

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"backfill/fetch"
	"backfill/resolver"
	"backfill/resolver/resolvertest"
	"backfill/wire"
)

// TestNamesOffFetchPath: with a resolver, a host's name is looked up
// before its tasks reach a worker. One worker, and the first task's host
// has a silent name server: the other host's pages are all fetched while
// that name times out (the worker never waits on DNS), its many tasks cost
// one query, a name that does not exist fails with "dns" and the silent
// one with "dns-timeout". A supervisor started again on the same cache
// asks the server nothing it had an answer for.
func TestNamesOffFetchPath(t *testing.T) {
	t.Parallel()
	dns, err := resolvertest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	dns.Add("fast.test", netip.MustParseAddr("127.0.0.1"))
	dns.Silent("slow.test")
	const pages = 30
	body := map[string]string{}
	for i := range pages {
		body[fmt.Sprintf("/p%d", i)] = "<html><body><h1>Ada</h1></body></html>"
	}
	web := newSite(t, "fast.test", "", body)
	_, port, _ := net.SplitHostPort(web.srv.Listener.Addr().String())
	dir := t.TempDir()

	run := func(round int, slow bool) (results []*wire.Result, st resolver.Stats) {
		d := newDispatcher(t, "tcp://127.0.0.1:*")
		cfg := testConfig(t, d)
		cfg.Workers = 1
		cfg.Capacity = 64 // every task of the round at once
		cfg.DefaultDelay = NoDelay
		cfg.Fetch = fetch.Config{UserAgent: testUA, AllowLoopback: true, Timeout: 5 * time.Second}
		r, err := resolver.New(resolver.Config{Servers: []string{dns.Addr}, Timeout: 300 * time.Millisecond, Attempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		store, err := resolver.OpenStore(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		names := resolver.NewCache(r, resolver.CacheConfig{Store: store})
		cfg.Names = names
		sup := start(t, cfg)
		defer sup.stop()
		register(t, d)
		n := 0
		if slow {
			d.task(fmt.Sprintf("r%d-slow", round), 1, "http://slow.test:"+port+"/p0")
			n++
		}
		d.task(fmt.Sprintf("r%d-dead", round), 1, "http://dead.test:"+port+"/p0")
		n++
		for i := range pages {
			d.task(fmt.Sprintf("r%d-fast%d", round, i), 1, fmt.Sprintf("http://fast.test:%s/p%d", port, i))
			n++
		}
		deadline := time.After(20 * time.Second)
		for len(results) < n {
			select {
			case res := <-d.results:
				results = append(results, res)
			case <-deadline:
				t.Fatalf("round %d: %d of %d results", round, len(results), n)
			}
		}
		return results, names.Stats()
	}

	results, st := run(1, true)
	fast := 0
	for _, res := range results {
		switch {
		case strings.HasSuffix(res.TaskID, "-slow"):
			if res.Class != string(fetch.ClassDNSTimeout) {
				t.Errorf("slow.test: class %q (%s), want dns-timeout", res.Class, res.Error)
			}
			if fast != pages {
				t.Errorf("slow.test's result came after %d of the %d fast pages: a worker waited on DNS", fast, pages)
			}
		case strings.HasSuffix(res.TaskID, "-dead"):
			if res.Class != string(fetch.ClassDNS) {
				t.Errorf("dead.test: class %q (%s), want dns", res.Class, res.Error)
			}
		default:
			if res.Class != "" {
				t.Errorf("%s: class %q (%s)", res.URL, res.Class, res.Error)
			}
			fast++
		}
	}
	asked := dns.Asked()
	if asked["fast.test./A"] != 1 {
		t.Errorf("fast.test asked %d times for %d tasks, want once: %v", asked["fast.test./A"], pages, asked)
	}
	if st.Misses != 3 {
		t.Errorf("stats %+v: want 3 names asked", st)
	}

	before := dns.Queries()
	_, st = run(2, false)
	if q := dns.Queries() - before; q != 0 {
		t.Errorf("restarted supervisor sent %d queries for names it had cached (stats %+v)", q, st)
	}
	if st.Stored != 2 {
		t.Errorf("restarted supervisor: stats %+v, want the 2 names from the store", st)
	}
}
