package supervisor

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"backfill/wire"
)

// TestRedirects: every hop is a request under its host's rules. A hop on
// the task's host is made by the host's next turn, after the delay and
// only when robots.txt allows it; a hop to another host is not made here
// but answered for the dispatcher to queue there.
func TestRedirects(t *testing.T) {
	t.Parallel()
	const delay = 300 * time.Millisecond
	cases := []struct {
		name      string
		path      string
		class     string
		finalURL  string // path on a.test, or an absolute URL
		chain     string // paths requested before the final one
		redirect  string // Result.Redirect
		asked     string // requests to a.test after robots.txt, probes left out
		counted   string // the redirect reason counted
		otherHits bool   // b.test must see nothing in any case
	}{
		{name: "same host hop waits its delay", path: "/r/ok", finalURL: "/people/ann", chain: "/r/ok",
			asked: "/r/ok /people/ann", counted: wire.RedirectFollowed},
		{name: "hop to a disallowed page is not requested", path: "/r/private", class: ClassRobots, finalURL: "/private/x", chain: "/r/private",
			asked: "/r/private", counted: wire.RedirectRobots},
		{name: "hop to another host is answered, not requested", path: "/r/away", redirect: "http://b.test/people/bob", finalURL: "/r/away",
			asked: "/r/away", counted: wire.RedirectOtherHost},
		{name: "loop", path: "/r/loop1", class: "redirect", finalURL: "/r/loop2", chain: "/r/loop1",
			asked: "/r/loop1 /r/loop2", counted: wire.RedirectLoop},
		{name: "meta refresh is a hop too", path: "/r/refresh", finalURL: "/people/ann", chain: "/r/refresh",
			asked: "/r/refresh /people/ann", counted: wire.RedirectFollowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newFuncSite(t, "a.test", false, func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/robots.txt":
					fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
				case "/r/ok":
					http.Redirect(w, r, "/people/ann", http.StatusMovedPermanently)
				case "/r/private":
					http.Redirect(w, r, "/private/x", http.StatusFound)
				case "/r/away":
					http.Redirect(w, r, "http://b.test/people/bob", http.StatusFound)
				case "/r/loop1":
					http.Redirect(w, r, "/r/loop2", http.StatusFound)
				case "/r/loop2":
					http.Redirect(w, r, "/r/loop1", http.StatusFound)
				case "/r/refresh":
					w.Header().Set("Content-Type", "text/html")
					fmt.Fprint(w, `<meta http-equiv="refresh" content="0; url=/people/ann">`)
				default:
					servePeople(w, r)
				}
			})
			other := newFuncSite(t, "b.test", false, servePeople)
			d := newDispatcher(t, "tcp://127.0.0.1:*")
			cfg := testConfig(t, d, s, other)
			cfg.DefaultDelay = delay
			cfg.NoSoft404 = true
			r := start(t, cfg)
			register(t, d)
			d.task("t", 1, "http://a.test"+tc.path)
			res := d.collect(1, 10*time.Second)["t"]
			if res.Class != tc.class {
				t.Errorf("class %q (%s), want %q", res.Class, res.Error, tc.class)
			}
			if res.Redirect != tc.redirect {
				t.Errorf("redirect %q, want %q", res.Redirect, tc.redirect)
			}
			if want := "http://a.test" + tc.finalURL; res.FinalURL != want {
				t.Errorf("final URL %q, want %q", res.FinalURL, want)
			}
			var chain []string
			for _, u := range res.Chain {
				chain = append(chain, strings.TrimPrefix(u, "http://a.test"))
			}
			if got := strings.Join(chain, " "); got != tc.chain {
				t.Errorf("chain %q, want %q", got, tc.chain)
			}
			hits := s.log()
			if len(hits) == 0 || hits[0].path != "/robots.txt" {
				t.Fatalf("requests %q: robots.txt must come first", paths(hits))
			}
			if got := paths(hits[1:]); got != tc.asked {
				t.Errorf("requests after robots.txt %q, want %q", got, tc.asked)
			}
			for i, g := range gaps(hits) {
				if g < delay {
					t.Errorf("requests %d and %d came %v apart, under the %v delay", i, i+1, g, delay)
				}
			}
			if len(other.log()) != 0 {
				t.Errorf("the other host was asked %q", paths(other.log()))
			}
			if refused := tc.counted == wire.RedirectRobots || tc.counted == wire.RedirectLoop; refused != (res.HopRefused == tc.counted) {
				t.Errorf("hop refused %q, counted %q", res.HopRefused, tc.counted)
			}
			if n := r.sup.redirects.snapshot()[tc.counted]; n == 0 {
				t.Errorf("redirects %v: none counted as %q", r.sup.redirects.snapshot(), tc.counted)
			}
			if m := r.sup.inFlight.max(); m != 1 {
				t.Errorf("at most %d requests in flight to one host, want 1", m)
			}
		})
	}
}

// TestUnansweredRetried: a request a kept-alive connection loses before
// any answer (the server closes the connection as the request arrives)
// is made again as a request of its own, after the host's delay, on a
// new connection, and counted; nothing below the supervisor resent it.
func TestUnansweredRetried(t *testing.T) {
	t.Parallel()
	const delay = 200 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []time.Time // the page's requests, as the server read them
	conns := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns++
			first := conns == 1
			mu.Unlock()
			go func(c net.Conn) {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if req.URL.Path == "/robots.txt" {
						fmt.Fprint(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
						continue
					}
					mu.Lock()
					asked = append(asked, time.Now())
					mu.Unlock()
					if first {
						return // the kept-alive connection dies with the page's request
					}
					body := "<html><body><h1>Ada</h1></body></html>"
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				}
			}(c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d)
	cfg.Fetch.Resolve = map[string]string{"a.test:80": ln.Addr().String()}
	cfg.DefaultDelay = delay
	cfg.NoSoft404 = true
	r := start(t, cfg)
	register(t, d)
	d.task("t", 1, "http://a.test/p")
	if res := d.collect(1, 10*time.Second)["t"]; res.Class != "" {
		t.Fatalf("class %q (%s), want the page", res.Class, res.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || conns != 2 {
		t.Fatalf("the page was read %d times over %d connections, want twice over 2", len(asked), conns)
	}
	if gap := asked[1].Sub(asked[0]); gap < delay {
		t.Errorf("the page was asked again %v after the lost request, under the %v delay", gap, delay)
	}
	if st := r.sup.Stats(); st.Retried != 1 || st.HostInFlight != 1 {
		t.Errorf("retried %d, most in flight to one host %d; want 1 and 1", st.Retried, st.HostInFlight)
	}
}
