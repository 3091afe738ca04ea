package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"backfill/proctest"
)

// TestDenyList: Config.Deny and Config.DenyAddr refuse addresses at dial
// time — a URL's own address, a DNS answer or a redirect target alike —
// with ClassBlocked and the refused address in Error.RemoteAddr; what they
// do not name is fetched and its Response says where it came from.
func TestDenyList(t *testing.T) {
	ok := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>fine</p>")
	}))
	// A second server on another loopback address, reached by a redirect.
	ln, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		proctest.Missing(t, "a listener on 127.0.0.3", err.Error())
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>denied land</p>")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	denied := ln.Addr().String()
	redirector := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://denied.test/", http.StatusFound)
	}))

	cases := []struct {
		name     string
		deny     []netip.Prefix
		denyAddr func(netip.AddrPort) string
		url      string
		class    Class
		errHas   string
		remote   string
	}{
		{name: "not listed", deny: []netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")},
			url: "http://ok.test/", remote: ok},
		{name: "IP listed", deny: []netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")},
			url: "http://denied.test/", class: ClassBlocked, errHas: "deny list (127.0.0.3/32)", remote: denied},
		{name: "CIDR listed, reached by redirect", deny: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/31")},
			url: "http://redirector.test/", class: ClassBlocked, errHas: "deny list (127.0.0.2/31)", remote: denied},
		{name: "DenyAddr", denyAddr: func(ap netip.AddrPort) string {
			if ap.String() == denied {
				return "blacklisted: keeps failing"
			}
			return ""
		}, url: "http://denied.test/", class: ClassBlocked, errHas: "keeps failing", remote: denied},
		{name: "DenyAddr passes others", denyAddr: func(netip.AddrPort) string { return "" },
			url: "http://denied.test/", remote: denied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := New(Config{
				UserAgent: testUA, AllowLoopback: true, Timeout: 5 * time.Second,
				Resolve: map[string]string{"ok.test:80": ok, "denied.test:80": denied, "redirector.test:80": redirector},
				Deny:    tc.deny, DenyAddr: tc.denyAddr,
			})
			defer f.Close()
			resp, err := f.Get(context.Background(), tc.url)
			if got := ClassOf(err); got != tc.class {
				t.Fatalf("class %q (%v), want %q", got, err, tc.class)
			}
			if tc.class == "" {
				if resp.RemoteAddr != tc.remote {
					t.Errorf("response from %q, want %q", resp.RemoteAddr, tc.remote)
				}
				return
			}
			var fe *Error
			if !errors.As(err, &fe) || !strings.Contains(fe.Error(), tc.errHas) || fe.RemoteAddr != tc.remote {
				t.Errorf("error %v (remote %q), want one saying %q with remote %q", err, fe.RemoteAddr, tc.errHas, tc.remote)
			}
		})
	}
}

// TestRemoteAddrOfFailure: a failed connection names the address tried.
func TestRemoteAddrOfFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens there any more: connection refused
	f := New(Config{UserAgent: testUA, AllowLoopback: true, Timeout: 5 * time.Second,
		Resolve: map[string]string{"gone.test:80": closed}})
	defer f.Close()
	_, err = f.Get(context.Background(), "http://gone.test/")
	var fe *Error
	if !errors.As(err, &fe) || fe.Class != ClassConnect || fe.RemoteAddr != closed {
		t.Fatalf("error %v, want a connect failure naming %s", err, closed)
	}
}

// namesAsked is a Names that records every name it is asked for.
type namesAsked struct {
	mu    sync.Mutex
	asked []string
}

func (n *namesAsked) Addrs(_ context.Context, host string) ([]netip.Addr, error) {
	n.mu.Lock()
	n.asked = append(n.asked, host)
	n.mu.Unlock()
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// TestDenyNames: a blacklisted name, or a subdomain of one, is refused
// before anything else (a pin, a look-up, a dial), whether asked for or
// reached by a redirect; other names are fetched.
func TestDenyNames(t *testing.T) {
	var hits atomic.Int32
	page := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Host == "hop.example" {
			http.Redirect(w, r, "http://www.blocked.test/", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>fine</p>")
	}))
	cases := []struct {
		url   string
		class Class
		hits  int32 // requests the server sees
	}{
		{"http://blocked.test/", ClassBlacklisted, 0},
		{"http://deep.www.Blocked.Test./x", ClassBlacklisted, 0},
		{"http://pinned.blocked.test/", ClassBlacklisted, 0},
		{"http://hop.example/", ClassBlacklisted, 1},
		{"http://notblocked.test/", "", 1},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			hits.Store(0)
			names := &namesAsked{}
			cfg := baseConfig()
			cfg.Names = names
			cfg.Resolve = map[string]string{"pinned.blocked.test:80": page, "hop.example:80": page, "notblocked.test:80": page}
			bl, err := ParseBlacklist(strings.NewReader("blocked.test\n"), "list.txt")
			if err != nil {
				t.Fatal(err)
			}
			cfg.DenyNames = bl.Names()
			f := New(cfg)
			t.Cleanup(f.Close)
			_, err = f.Get(context.Background(), tc.url)
			if ClassOf(err) != tc.class {
				t.Fatalf("class %q (%v), want %q", ClassOf(err), err, tc.class)
			}
			if tc.class != "" && !strings.Contains(err.Error(), "list.txt:1") {
				t.Errorf("error %q does not say where the name is listed", err)
			}
			if n := hits.Load(); n != tc.hits {
				t.Errorf("server saw %d requests, want %d", n, tc.hits)
			}
			for _, n := range names.asked {
				if strings.Contains(strings.ToLower(n), "blocked.test") {
					t.Errorf("the blacklisted %s was looked up", n)
				}
			}
			if f.NeedsLookup("blocked.test:80") {
				t.Errorf("NeedsLookup says a blacklisted name needs a look-up")
			}
		})
	}
}
