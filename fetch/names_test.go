package fetch

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"backfill/resolver"
	"backfill/resolver/resolvertest"
)

// TestNames: a fetch through Config.Names (the crawl's resolver) dials
// what the name resolves to, through the address guard: a name whose
// answer is loopback or private is refused unless the flags allow it, and
// a name that does not exist or whose server is silent fails with its
// class.
func TestNames(t *testing.T) {
	web := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>fine</p>")
	}))
	_, port, _ := net.SplitHostPort(web)
	dns, err := resolvertest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	dns.Add("loop.test", netip.MustParseAddr("127.0.0.1"))
	dns.Add("private.test", netip.MustParseAddr("10.1.2.3"))
	dns.Add("mapped.test", netip.MustParseAddr("::ffff:127.0.0.1"))
	dns.Silent("slow.test")
	r, err := resolver.New(resolver.Config{Servers: []string{dns.Addr}, Timeout: 50 * time.Millisecond, Attempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	names := resolver.NewCache(r, resolver.CacheConfig{})
	tests := []struct {
		name          string
		host          string
		allowLoopback bool
		allowPrivate  bool
		class         Class // "" for a page
	}{
		{"loopback refused", "loop.test", false, false, ClassBlocked},
		{"loopback allowed", "loop.test", true, false, ""},
		{"mapped loopback refused", "mapped.test", false, false, ClassBlocked},
		{"private refused", "private.test", true, false, ClassBlocked},
		{"nxdomain", "gone.test", true, false, ClassDNS},
		{"silent server", "slow.test", true, false, ClassDNSTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New(Config{UserAgent: "backfill-test/1 (+http://example.invalid/)", Names: names,
				AllowLoopback: tc.allowLoopback, AllowPrivate: tc.allowPrivate, ConnectTimeout: 200 * time.Millisecond})
			defer f.Close()
			u := "http://" + net.JoinHostPort(tc.host, port) + "/"
			if !f.NeedsLookup(net.JoinHostPort(tc.host, port)) {
				t.Fatalf("%s needs no look-up?", tc.host)
			}
			resp, err := f.Get(context.Background(), u)
			if c := ClassOf(err); c != tc.class {
				t.Fatalf("class %q (%v), want %q", c, err, tc.class)
			}
			if tc.class == "" && !strings.Contains(string(resp.Body), "fine") {
				t.Fatalf("body %q", resp.Body)
			}
		})
	}
	f := New(Config{UserAgent: "x", Resolve: map[string]string{"pinned.test:80": "127.0.0.1:1"}})
	for hp, want := range map[string]bool{"pinned.test:80": false, "127.0.0.1:80": false, "localhost:80": false, "www.test:80": true, "intranet:80": false} {
		if got := f.NeedsLookup(hp); got != want {
			t.Errorf("NeedsLookup(%s) = %v, want %v", hp, got, want)
		}
	}
}
