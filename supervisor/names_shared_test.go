package supervisor

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"backfill/fetch"
	"backfill/resolver"
	"backfill/resolver/resolvertest"
	"backfill/store"
	"backfill/store/mongotest"
	"backfill/wire"
)

// TestNamesSharedStore: two supervisors whose DNS caches are kept in one
// store, each through a connection of its own as on two machines (a SQLite
// file; an embedded MongoDB-protocol server). The second is handed the
// hosts the first crawled, and one more: it asks the DNS server only of
// the new name and of the one the first could not get an answer for (a
// time-out is remembered in memory only); the answers and the name that
// does not exist come from the store.
func TestNamesSharedStore(t *testing.T) {
	t.Parallel()
	backends := []struct {
		name string
		uri  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "shared.db") }},
		{"mongodb", func(t *testing.T) string {
			dir, err := os.MkdirTemp("", "backfill-names-mongo-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			srv, err := mongotest.Start(dir, mongotest.Options{})
			if err != nil {
				t.Fatalf("embedded mongodb: %v", err)
			}
			t.Cleanup(func() { srv.Stop() })
			return srv.DatabaseURI(mongotest.DatabaseName(t))
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testNamesShared(t, b.uri(t))
		})
	}
}

func testNamesShared(t *testing.T, uri string) {
	dns, err := resolvertest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	lo := netip.MustParseAddr("127.0.0.1")
	for _, name := range []string{"a.test", "b.test", "c.test"} {
		dns.Add(name, lo)
	}
	dns.Silent("slow.test")
	web := newSite(t, "a.test", "", map[string]string{"/p": "<html><body><h1>Ada</h1></body></html>"})
	_, port, _ := net.SplitHostPort(web.srv.Listener.Addr().String())

	// crawl starts a supervisor on a store connection of its own, hands
	// it a task per host and waits for every result.
	crawl := func(name string, hosts []string) (map[string]*wire.Result, resolver.Stats) {
		ctx := context.Background()
		st, err := store.OpenWith(ctx, uri, store.Options{Timeout: 20 * time.Second, RetryFor: 40 * time.Second})
		if err != nil {
			t.Fatalf("%s: open store: %v", name, err)
		}
		defer st.Close()
		r, err := resolver.New(resolver.Config{Servers: []string{dns.Addr}, Timeout: 300 * time.Millisecond, Attempts: 2})
		if err != nil {
			t.Fatal(err)
		}
		names := resolver.NewCache(r, resolver.CacheConfig{Store: st.Names()})
		d := newDispatcher(t, "tcp://127.0.0.1:*")
		cfg := testConfig(t, d)
		cfg.Name = name
		cfg.Cache = st
		cfg.DefaultDelay = NoDelay
		cfg.Fetch = fetch.Config{UserAgent: testUA, AllowLoopback: true, Timeout: 5 * time.Second}
		cfg.Names = names
		sup := start(t, cfg)
		defer sup.stop()
		register(t, d)
		for _, h := range hosts {
			d.task(name+"-"+h, 1, fmt.Sprintf("http://%s:%s/p", h, port))
		}
		return d.collect(len(hosts), 20*time.Second), names.Stats()
	}
	want := map[string]fetch.Class{"a.test": "", "b.test": "", "gone.test": fetch.ClassDNS, "slow.test": fetch.ClassDNSTimeout, "c.test": ""}
	check := func(name string, results map[string]*wire.Result) {
		t.Helper()
		for id, res := range results {
			host := id[len(name)+1:]
			if c := want[host]; res.Class != string(c) {
				t.Errorf("%s: %s: class %q (%s), want %q", name, res.URL, res.Class, res.Error, c)
			}
		}
	}

	first := []string{"a.test", "b.test", "gone.test", "slow.test"}
	results, st1 := crawl("sup-1", first)
	check("sup-1", results)
	if st1.Misses != 4 || st1.Stored != 0 {
		t.Errorf("sup-1 stats %+v: want 4 names asked, none from the store", st1)
	}
	asked1 := dns.Asked()

	results, st2 := crawl("sup-2", append(first, "c.test"))
	check("sup-2", results)
	asked2 := dns.Asked()
	again := map[string]int{}
	for q, n := range asked2 {
		if d := n - asked1[q]; d > 0 {
			again[q] = d
		}
	}
	for q, n := range again {
		switch q {
		case "c.test./A", "slow.test./A", "slow.test./AAAA":
		default:
			t.Errorf("sup-2 asked %s %d times: sup-1 had its answer in the shared store", q, n)
		}
	}
	if again["c.test./A"] != 1 {
		t.Errorf("sup-2 asked c.test %d times, want once (new questions: %v)", again["c.test./A"], again)
	}
	if again["slow.test./A"] == 0 {
		t.Errorf("sup-2 did not ask slow.test again: a time-out must not be shared (new questions: %v)", again)
	}
	if st2.Stored != 3 {
		t.Errorf("sup-2 stats %+v: want a.test, b.test and gone.test from the store", st2)
	}
}
