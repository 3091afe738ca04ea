package fetch

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
)

// connCounter is a loopback web server that counts the connections it
// accepted and the requests that asked for theirs to be closed.
type connCounter struct {
	srv *httptest.Server

	mu           sync.Mutex
	conns, close int
}

func newConnCounter(t *testing.T) *connCounter {
	t.Helper()
	c := &connCounter{}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		if r.Close {
			c.close++
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><body>ok</body></html>"))
	}))
	c.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			c.mu.Lock()
			c.conns++
			c.mu.Unlock()
		}
	}
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	return c
}

func (c *connCounter) counts() (conns, close int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conns, c.close
}

// TestKeptHosts goes round more hosts than the Fetcher keeps connections
// for: the first KeptHosts keep theirs for the whole crawl (one connection
// each), the others ask for theirs to be closed after each answer and dial
// one a request, and a slot freed when a kept connection closes goes to
// the next host that asks.
func TestKeptHosts(t *testing.T) {
	noLeak(t)
	cases := []struct {
		name        string
		kept, hosts int
		rounds      int
	}{
		{"all kept", 3, 3, 4},
		{"more hosts than slots", 2, 5, 4},
		{"one slot", 1, 3, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.KeptHosts = tc.kept
			f := New(cfg)
			defer f.Close()
			webs := make([]*connCounter, tc.hosts)
			for i := range webs {
				webs[i] = newConnCounter(t)
			}
			for range tc.rounds {
				for _, w := range webs {
					if _, err := f.Get(context.Background(), w.srv.URL+"/"); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i, w := range webs {
				conns, closes := w.counts()
				wantConns, wantCloses := 1, 0 // a kept host: one connection throughout
				if i >= tc.kept {
					wantConns, wantCloses = tc.rounds, tc.rounds
				}
				if conns != wantConns || closes != wantCloses {
					t.Errorf("host %d: %d connections and %d requests asking to close, want %d and %d", i, conns, closes, wantConns, wantCloses)
				}
			}
			if n := f.keep.kept(); n != min(tc.kept, tc.hosts) {
				t.Errorf("%d hosts hold a slot, want %d", n, min(tc.kept, tc.hosts))
			}

			// The kept connections close: every slot is free, and the
			// host that had none keeps its connection now.
			f.Close()
			if n := f.keep.kept(); n != 0 {
				t.Fatalf("%d hosts hold a slot after their connections closed, want 0", n)
			}
			last := webs[len(webs)-1]
			before, _ := last.counts()
			for range 2 {
				if _, err := f.Get(context.Background(), last.srv.URL+"/"); err != nil {
					t.Fatal(err)
				}
			}
			if after, _ := last.counts(); after != before+1 {
				t.Errorf("the last host dialled %d connections for two requests after the slots were freed, want 1", after-before)
			}
		})
	}
}

// TestKeptSlotFreedOnFailedDial: a slot taken by a request whose dial
// failed is free again once the request is over.
func TestKeptSlotFreedOnFailedDial(t *testing.T) {
	noLeak(t)
	cfg := baseConfig()
	cfg.KeptHosts = 1
	f := New(cfg)
	defer f.Close()
	port := closedPort(t)
	if _, err := f.Get(context.Background(), fmt.Sprintf("http://127.0.0.1:%d/", port)); ClassOf(err) != ClassConnect {
		t.Fatalf("class %q (%v), want connect", ClassOf(err), err)
	}
	if n := f.keep.kept(); n != 0 {
		t.Fatalf("%d hosts hold a slot after a failed dial, want 0", n)
	}
	w := newConnCounter(t)
	for range 2 {
		if _, err := f.Get(context.Background(), w.srv.URL+"/"); err != nil {
			t.Fatal(err)
		}
	}
	if conns, closes := w.counts(); conns != 1 || closes != 0 {
		t.Errorf("%d connections and %d requests asking to close, want 1 and 0", conns, closes)
	}
}

// TestNotKeptOverTLS: a host beyond the kept ones is fetched over TLS,
// with HTTP/2 offered or not, one connection a request, each closed
// after its answer; each connection after the first resumes the TLS
// session of the one before (sessions.go): one full handshake per host.
func TestNotKeptOverTLS(t *testing.T) {
	noLeak(t)
	for _, h2 := range []bool{true, false} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			cfg := baseConfig()
			cfg.KeptHosts = 1
			var mu sync.Mutex
			var resumed []bool
			site, s := newTLSSite(t, &cfg, h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				resumed = append(resumed, r.TLS.DidResume)
				mu.Unlock()
				w.Header().Set("Content-Type", "text/html")
				w.Write([]byte("<html><body>ok</body></html>"))
			}))
			f := New(cfg)
			defer f.Close()
			other := newConnCounter(t)
			if _, err := f.Get(context.Background(), other.srv.URL+"/"); err != nil {
				t.Fatal(err) // takes the one slot
			}
			const n = 3
			for range n {
				if _, err := f.Get(context.Background(), site+"/"); err != nil {
					t.Fatal(err)
				}
			}
			if got := s.conns.Load(); got != n {
				t.Errorf("%d connections for %d requests to a host not kept, want %d", got, n, n)
			}
			if got := len(s.seen()); got != n {
				t.Errorf("%d requests served, want %d", got, n)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []bool{false, true, true}; !slices.Equal(resumed, want) {
				t.Errorf("handshakes resumed: %v, want %v", resumed, want)
			}
		})
	}
}
