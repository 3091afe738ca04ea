package supervisor

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"backfill/fetch"
	"backfill/robots"
)

// resetConn ends the request's connection with a TCP reset.
func resetConn(w http.ResponseWriter) {
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close sends RST, not FIN
	}
	c.Close()
}

// TestParseRobots checks how a robots.txt answer's status is read; what a
// body says is the robots package's (its case table).
func TestParseRobots(t *testing.T) {
	groups, err := os.ReadFile(filepath.Join("testdata", "robots", "groups.txt"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		status    int
		body      string
		allowed   []string
		forbidden []string
		delay     time.Duration
		reason    string
	}{
		{name: "2xx: our group, its delay", status: 200, body: string(groups),
			allowed: []string{"/people/ann", "/"}, forbidden: []string{"/private/a"}, delay: 2500 * time.Millisecond},
		{name: "2xx: html instead of robots.txt", status: 200, body: "<html><body><p>Not found</p></body></html>",
			allowed: []string{"/", "/x"}},
		{name: "2xx: empty", status: 200, body: "", allowed: []string{"/"}},
		{name: "404 allows all", status: 404, body: "User-agent: *\nDisallow: /\n", allowed: []string{"/", "/x"}},
		{name: "401 allows all", status: 401, allowed: []string{"/"}},
		{name: "429 disallows all", status: 429, forbidden: []string{"/"}, reason: "status 429"},
		{name: "503 disallows all", status: 503, forbidden: []string{"/", "/x"}, reason: "status 503"},
		{name: "unreadable disallows all", status: 0, forbidden: []string{"/"}, reason: "could not be read"},
		{name: "nonsense status disallows all", status: 999, forbidden: []string{"/"}, reason: "status 999"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := parseRobots(tc.status, []byte(tc.body), "backfill")
			for _, p := range tc.allowed {
				if !r.allowed(mustURL(t, p)) {
					t.Errorf("%s disallowed, want allowed", p)
				}
			}
			for _, p := range tc.forbidden {
				if r.allowed(mustURL(t, p)) {
					t.Errorf("%s allowed, want disallowed", p)
				}
			}
			if r.delay != tc.delay {
				t.Errorf("crawl-delay %v, want %v", r.delay, tc.delay)
			}
			if !strings.Contains(r.reason, tc.reason) || (tc.reason == "") != (r.reason == "") {
				t.Errorf("reason %q, want one containing %q", r.reason, tc.reason)
			}
		})
	}
}

func mustURL(t *testing.T, path string) *url.URL {
	t.Helper()
	u, err := url.Parse("http://a.test" + path)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// FuzzParseRobots feeds arbitrary statuses and bodies: the verdict is
// exactly one of allow-all, disallow-all or the file's rules, the delay is
// never negative, and a disallow-all always says why.
func FuzzParseRobots(f *testing.F) {
	f.Add(200, []byte("User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n"))
	f.Add(200, []byte("Disallow: /x\nUser-agent: backfill\nAllow: /\nCrawl-delay: -3\n"))
	f.Add(200, []byte("User-agent: *\nDisallow: /*?q=$\nCrawl-delay: 1e400\n"))
	f.Add(200, []byte("<html>\x00\xff</html>"))
	f.Add(503, []byte(""))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		r := parseRobots(status, body, "backfill")
		n := 0
		for _, b := range []bool{r.allowAll, r.disallowAll, r.rules != nil} {
			if b {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("verdict is not exactly one of allow-all, disallow-all, rules: %+v", r)
		}
		if r.delay < 0 {
			t.Fatalf("negative crawl-delay %v", r.delay)
		}
		if r.disallowAll && r.reason == "" {
			t.Fatal("disallowed all without a reason")
		}
		for _, p := range []string{"/", "/private/x", "/a?q=1"} {
			r.allowed(mustURL(t, p))
		}
	})
}

// newFuncSite is a site whose answers come from fn; it logs every request
// like newSite's sites do.
func newFuncSite(t *testing.T, name string, tlsServer bool, fn http.HandlerFunc) *site {
	t.Helper()
	s := &site{name: name, hold: map[string]func(){}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits = append(s.hits, hit{path: r.URL.RequestURI(), ua: r.UserAgent(), at: time.Now()})
		s.mu.Unlock()
		fn(w, r)
	})
	s.srv = httptest.NewUnstartedServer(h)
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	if tlsServer {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	t.Cleanup(s.srv.Close)
	return s
}

// robotsChain answers /robots.txt with hops redirects (/r1, /r2, …) ending
// in rules.
func robotsChain(hops int, rules string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := range hops {
			from := "/robots.txt"
			if i > 0 {
				from = fmt.Sprintf("/r%d", i)
			}
			if r.URL.Path == from {
				http.Redirect(w, r, fmt.Sprintf("/r%d", i+1), http.StatusMovedPermanently)
				return
			}
		}
		if r.URL.Path == "/robots.txt" || r.URL.Path == fmt.Sprintf("/r%d", hops) {
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, rules)
			return
		}
		servePeople(w, r)
	}
}

// servePeople answers /people/… with a profile and anything else 404.
func servePeople(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/people/") {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, annPage)
}

// TestRobotsFetch crawls one page of a host per robots.txt behaviour and
// checks the page's class and what the host was asked.
func TestRobotsFetch(t *testing.T) {
	t.Parallel()
	disallowPeople := "User-agent: *\nDisallow: /people/\n"
	big := "User-agent: *\n#" + strings.Repeat("x", robots.MaxSize) + "\nDisallow: /people/\n"
	bigEarly := "User-agent: *\nDisallow: /people/\n#" + strings.Repeat("x", robots.MaxSize) + "\n"
	cases := []struct {
		name    string
		tls     bool
		resolve string // overrides the site's address
		serve   http.HandlerFunc
		class   string
		errHas  string
		asked   string // requests in order, probe left out ("" to skip the check)
		// robotsAsked: robots.txt requests, each hop one (default 1)
		robotsAsked int64
	}{
		{name: "2xx rules apply", serve: robotsChain(0, disallowPeople), class: ClassRobots, asked: "/robots.txt"},
		{name: "2xx allows", serve: robotsChain(0, "User-agent: *\nDisallow: /private/\n"), asked: "/robots.txt /people/ann"},
		{name: "our group with no rules: no fallback to *", serve: robotsChain(0, "User-agent: *\nDisallow: /\n\nUser-agent: BackFill\n"),
			asked: "/robots.txt /people/ann"},
		{name: "allow wins a tie, whatever the order", serve: robotsChain(0, "User-agent: backfill/2\nDisallow: /people/\nAllow: /people/\nDisallow: /\n"),
			asked: "/robots.txt /people/ann"},
		{name: "an unreserved character encoded in a rule matches only that spelling",
			serve: robotsChain(0, "User-agent: *\nDisallow: /%70eople/%61nn\n"), asked: "/robots.txt /people/ann"},
		{name: "1 redirect followed", serve: robotsChain(1, disallowPeople), class: ClassRobots, asked: "/robots.txt /r1", robotsAsked: 2},
		{name: "5 redirects followed", serve: robotsChain(5, disallowPeople), class: ClassRobots,
			asked: "/robots.txt /r1 /r2 /r3 /r4 /r5", robotsAsked: 6},
		{name: "6 redirects: unavailable, allows all", serve: robotsChain(6, disallowPeople),
			asked: "/robots.txt /r1 /r2 /r3 /r4 /r5 /people/ann", robotsAsked: 6},
		{name: "redirect to another host: not followed, unavailable, allows all", serve: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.Redirect(w, r, "http://b.test/robots.txt", http.StatusMovedPermanently)
				return
			}
			servePeople(w, r)
		}, asked: "/robots.txt /people/ann"},
		{name: "404 allows all", serve: servePeople, asked: "/robots.txt /people/ann"},
		{name: "500 disallows all", serve: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.Error(w, "oops", http.StatusInternalServerError)
				return
			}
			servePeople(w, r)
		}, class: ClassRobotsUnavailable, errHas: "robots.txt answered status 500", asked: "/robots.txt"},
		{name: "429 disallows all", serve: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.Error(w, "slow down", http.StatusTooManyRequests)
				return
			}
			servePeople(w, r)
		}, class: ClassRobotsUnavailable, errHas: "robots.txt answered status 429", asked: "/robots.txt"},
		{name: "reset once connected: unavailable, not protocol", serve: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				resetConn(w)
				return
			}
			servePeople(w, r)
		}, class: ClassRobotsUnavailable, errHas: "robots.txt could not be read (protocol)", asked: "/robots.txt"},
		{name: "unreachable: bad certificate", tls: true, serve: robotsChain(0, "User-agent: *\nAllow: /\n"),
			class: string(fetch.ClassTLS), errHas: "robots.txt unreachable"},
		{name: "unreachable: blocked address", resolve: "10.0.0.1:80", serve: servePeople,
			class: string(fetch.ClassBlocked), errHas: "robots.txt unreachable", asked: " "},
		{name: "html body: no rules", serve: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				w.Header().Set("Content-Type", "text/html")
				fmt.Fprint(w, "<!DOCTYPE html><html><head><title>Not here</title></head><body><h1>Disallowed? No: page not found</h1></body></html>")
				return
			}
			servePeople(w, r)
		}, asked: "/robots.txt /people/ann"},
		{name: "garbage body: no rules", serve: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Write([]byte("\x00\x01\xff\xfeDisallow\x00: /\n\x89PNG\r\n\x1a\n"))
				return
			}
			servePeople(w, r)
		}, asked: "/robots.txt /people/ann"},
		{name: "over 500 KiB: later rules ignored", serve: robotsChain(0, big), asked: "/robots.txt /people/ann"},
		{name: "over 500 KiB: early rules kept", serve: robotsChain(0, bigEarly), class: ClassRobots, asked: "/robots.txt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newFuncSite(t, "a.test", tc.tls, tc.serve)
			d := newDispatcher(t, "tcp://127.0.0.1:*")
			cfg := testConfig(t, d, s)
			cfg.DefaultDelay = NoDelay
			pageURL := "http://a.test/people/ann"
			if tc.tls {
				cfg.Fetch.Resolve = map[string]string{"a.test:443": s.srv.Listener.Addr().String()}
				pageURL = "https://a.test/people/ann"
			}
			if tc.resolve != "" {
				cfg.Fetch.Resolve = map[string]string{"a.test:80": tc.resolve}
			}
			r := start(t, cfg)
			register(t, d)
			d.task("ann", 1, pageURL)
			res := d.collect(1, 10*time.Second)["ann"]
			if res.Class != tc.class || !strings.Contains(res.Error, tc.errHas) {
				t.Errorf("class %q error %q; want class %q, error containing %q", res.Class, res.Error, tc.class, tc.errHas)
			}
			var asked []string
			for _, h := range s.log() {
				if !strings.HasPrefix(h.path, soft404Prefix) {
					asked = append(asked, h.path)
				}
			}
			switch {
			case tc.asked == " ":
				if len(asked) != 0 {
					t.Errorf("requests %q, want none", asked)
				}
			case tc.asked != "" && strings.Join(asked, " ") != tc.asked:
				t.Errorf("requests %q, want %q", strings.Join(asked, " "), tc.asked)
			}
			want := max(tc.robotsAsked, 1)
			if st := r.sup.Stats(); st.RobotsFetched != want {
				t.Errorf("robots.txt fetched %d times, want %d", st.RobotsFetched, want)
			}
		})
	}
}

// TestRobotsRetried: a robots.txt that failed disallows everything only
// until a retry succeeds; the retry waits RobotsRetry, and a Retry-After
// on a 429 or 503, whichever is later.
func TestRobotsRetried(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		status  int
		after   string
		minWait time.Duration
	}{
		{name: "500 then success", status: http.StatusInternalServerError, minWait: 150 * time.Millisecond},
		{name: "429 with Retry-After", status: http.StatusTooManyRequests, after: "1", minWait: time.Second},
		{name: "503 with Retry-After", status: http.StatusServiceUnavailable, after: "1", minWait: time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var robotsAsked atomic.Int32
			s := newFuncSite(t, "a.test", false, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/robots.txt" && robotsAsked.Add(1) == 1 {
					if tc.after != "" {
						w.Header().Set("Retry-After", tc.after)
					}
					http.Error(w, "not now", tc.status)
					return
				}
				if r.URL.Path == "/robots.txt" {
					fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
					return
				}
				servePeople(w, r)
			})
			d := newDispatcher(t, "tcp://127.0.0.1:*")
			cfg := testConfig(t, d, s)
			cfg.DefaultDelay = NoDelay
			cfg.RobotsRetry = 150 * time.Millisecond
			cfg.NoSoft404 = true
			start(t, cfg)
			register(t, d)
			// Ask for the page until it is fetched: the first answers are
			// "robots-unavailable", without requests, until robots.txt is
			// retried.
			deadline := time.Now().Add(10 * time.Second)
			var classes []string
			for i := 0; ; i++ {
				id := fmt.Sprintf("ann%d", i)
				d.task(id, 1, "http://a.test/people/ann")
				res := d.collect(1, 10*time.Second)[id]
				classes = append(classes, res.Class)
				if res.Class == "" {
					break
				}
				if res.Class != ClassRobotsUnavailable || !strings.Contains(res.Error, "until a retry succeeds") {
					t.Fatalf("answer %d: class %q error %q, want robots-unavailable until a retry", i, res.Class, res.Error)
				}
				if time.Now().After(deadline) {
					t.Fatalf("page never fetched: %v", classes)
				}
				time.Sleep(20 * time.Millisecond) // pacing the asks, not synchronisation
			}
			if classes[0] != ClassRobotsUnavailable {
				t.Errorf("first answer %q, want robots-unavailable", classes[0])
			}
			var robots []hit
			for _, h := range s.log() {
				if h.path == "/robots.txt" {
					robots = append(robots, h)
				}
			}
			if len(robots) != 2 {
				t.Fatalf("robots.txt asked %d times (%s), want 2", len(robots), paths(s.log()))
			}
			if gap := robots[1].at.Sub(robots[0].at); gap < tc.minWait {
				t.Errorf("robots.txt retried after %v, want at least %v", gap, tc.minWait)
			}
		})
	}
}

func TestRobotsFromFetch(t *testing.T) {
	cases := []struct {
		name        string
		resp        *fetch.Response
		err         error
		allowAll    bool
		disallowAll bool
		unreachable fetch.Class
	}{
		{name: "200", resp: &fetch.Response{Status: 200, Body: []byte("User-agent: *\nDisallow: /x\n")}},
		{name: "200 binary", resp: &fetch.Response{Status: 200, Body: []byte("\x00\xff")}, err: &fetch.Error{Class: fetch.ClassNotHTML, Err: errors.New("binary")}},
		{name: "404", resp: &fetch.Response{Status: 404}, err: &fetch.Error{Class: fetch.ClassStatus, Err: errors.New("status 404")}, allowAll: true},
		{name: "410", resp: &fetch.Response{Status: 410}, err: &fetch.Error{Class: fetch.ClassStatus, Err: errors.New("status 410")}, allowAll: true},
		{name: "429", resp: &fetch.Response{Status: 429}, err: &fetch.Error{Class: fetch.ClassStatus, Err: errors.New("status 429")}, disallowAll: true},
		{name: "503", resp: &fetch.Response{Status: 503}, err: &fetch.Error{Class: fetch.ClassStatus, Err: errors.New("status 503")}, disallowAll: true},
		{name: "too many redirects", err: &fetch.Error{Class: fetch.ClassRedirect, Err: errors.New("more than 5 redirects")}, allowAll: true},
		{name: "dns", err: &fetch.Error{Class: fetch.ClassDNS, Err: errors.New("no such host")}, disallowAll: true, unreachable: fetch.ClassDNS},
		{name: "timeout", err: &fetch.Error{Class: fetch.ClassTimeout, Err: errors.New("slow")}, disallowAll: true, unreachable: fetch.ClassTimeout},
		{name: "connect", err: &fetch.Error{Class: fetch.ClassConnect, Err: errors.New("refused")}, disallowAll: true, unreachable: fetch.ClassConnect},
		{name: "reset once connected", err: &fetch.Error{Class: fetch.ClassProtocol, Err: errors.New("connection reset by peer")}, disallowAll: true},
		{name: "too large", err: &fetch.Error{Class: fetch.ClassTooLarge, Err: errors.New("bomb")}, disallowAll: true},
	}
	for _, tc := range cases {
		r := robotsFromFetch(tc.resp, tc.err, "backfill")
		if got, want := r.allowed(mustURL(t, "/people/x")), !tc.disallowAll; got != want {
			t.Errorf("%s: /people/x allowed %v, want %v", tc.name, got, want)
		}
		if r.allowAll != tc.allowAll || r.disallowAll != tc.disallowAll || r.unreachable != tc.unreachable {
			t.Errorf("%s: allowAll %v disallowAll %v unreachable %q; want %v %v %q", tc.name,
				r.allowAll, r.disallowAll, r.unreachable, tc.allowAll, tc.disallowAll, tc.unreachable)
		}
		if r.disallowAll && r.reason == "" {
			t.Errorf("%s: disallowed without a reason", tc.name)
		}
	}
}
