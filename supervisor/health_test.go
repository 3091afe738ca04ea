package supervisor

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"backfill/fetch"
	"backfill/proctest"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{" 7 ", 7 * time.Second, true},
		{"-3", 0, false},
		{"soon", 0, false},
		{"1.5", 0, false},
		{"99999999999999999", maxRetryAfter, true},
		{"Sun, 22 Nov 2026 12:01:30 GMT", 90 * time.Second, true},
		{"Sunday, 22-Nov-26 12:00:10 GMT", 10 * time.Second, true},
		{"Sun, 22 Nov 2026 11:00:00 GMT", 0, true}, // in the past: no wait
		{"Mon, 22 Nov 2027 12:00:00 GMT", maxRetryAfter, true},
	}
	for _, tc := range cases {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestBackoff(t *testing.T) {
	cases := []struct {
		base    time.Duration
		n       int
		ceiling time.Duration
		want    time.Duration
	}{
		{time.Second, 0, time.Minute, 0},
		{time.Second, 1, time.Minute, 2 * time.Second},
		{time.Second, 3, time.Minute, 8 * time.Second},
		{time.Second, 6, time.Minute, time.Minute},
		{15 * time.Second, 2, 10 * time.Minute, time.Minute},
		{15 * time.Second, 10, 10 * time.Minute, 10 * time.Minute},
		{time.Second, 1000, 10 * time.Minute, 10 * time.Minute}, // no overflow
	}
	for _, tc := range cases {
		if got := hostPause(tc.base, tc.n, tc.ceiling); got != tc.want {
			t.Errorf("hostPause(%v, %d, %v) = %v, want %v", tc.base, tc.n, tc.ceiling, got, tc.want)
		}
	}
}

// TestRetryAfterHonoured: a 429 or 503 page is asked again on its host no
// sooner than its Retry-After, up to maxAttempts requests, then answered
// with its class.
func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		status   int
		after    string // Retry-After of the refusals
		refusals int    // refusals before the page is served
		wait     time.Duration
		class    string
		requests int
	}{
		{name: "503 then served", status: 503, after: "1", refusals: 1, wait: time.Second, requests: 2},
		{name: "429 as a date then served", status: 429, after: "date+1", refusals: 1, wait: 500 * time.Millisecond, requests: 2},
		{name: "429 forever", status: 429, after: "0", refusals: 100, class: string(fetch.ClassStatus), requests: maxAttempts},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var asked atomic.Int32
			s := newFuncSite(t, "a.test", false, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/people/ann" && int(asked.Add(1)) <= tc.refusals {
					after := tc.after
					if after == "date+1" {
						// HTTP dates have whole seconds: one to two seconds away.
						after = time.Now().Add(2 * time.Second).UTC().Truncate(time.Second).Format(http.TimeFormat)
					}
					w.Header().Set("Retry-After", after)
					http.Error(w, "not now", tc.status)
					return
				}
				servePeople(w, r)
			})
			d := newDispatcher(t, "tcp://127.0.0.1:*")
			cfg := testConfig(t, d, s)
			cfg.DefaultDelay = 20 * time.Millisecond
			start(t, cfg)
			register(t, d)
			d.task("ann", 1, "http://a.test/people/ann")
			res := d.collect(1, 15*time.Second)["ann"]
			if res.Class != tc.class {
				t.Errorf("class %q (%s), want %q", res.Class, res.Error, tc.class)
			}
			var hits []hit
			for _, h := range s.log() {
				if h.path == "/people/ann" {
					hits = append(hits, h)
				}
			}
			if len(hits) != tc.requests {
				t.Fatalf("page asked %d times, want %d: %s", len(hits), tc.requests, paths(s.log()))
			}
			for i, g := range gaps(hits) {
				if g < tc.wait {
					t.Errorf("retry %d came %v after the refusal, want at least %v", i+1, g, tc.wait)
				}
			}
			// No other task of the host in the meantime: the dispatcher
			// got exactly one result.
			select {
			case extra := <-d.results:
				t.Errorf("a second result: %+v", extra)
			default:
			}
		})
	}
}

// TestBackoffGrows: consecutive server errors space a host's requests
// out exponentially from its delay.
func TestBackoffGrows(t *testing.T) {
	t.Parallel()
	s := newFuncSite(t, "a.test", false, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		http.Error(w, "broken", http.StatusInternalServerError)
	})
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d, s)
	base := 40 * time.Millisecond
	cfg.DefaultDelay = base
	cfg.BackoffMin = base
	cfg.NoSoft404 = true
	start(t, cfg)
	register(t, d)
	const n = 4
	for i := range n {
		d.task(fmt.Sprint(i), 1, fmt.Sprintf("http://a.test/people/%d", i))
	}
	for id, res := range d.collect(n, 15*time.Second) {
		if res.Class != string(fetch.ClassStatus) || res.Status != 500 {
			t.Errorf("%s: class %q status %d", id, res.Class, res.Status)
		}
	}
	var pages []hit
	for _, h := range s.log() {
		if strings.HasPrefix(h.path, "/people/") {
			pages = append(pages, h)
		}
	}
	for i, g := range gaps(pages) {
		// After the (i+1)th failure in a row: base × 2^(i+1).
		if want := base << (i + 1); g < want {
			t.Errorf("gap %d is %v, want at least %v", i, g, want)
		}
	}
}

// closingListener accepts connections and closes them at once: every
// request to it fails at the protocol level. It counts the connections.
func closingListener(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().String(), &n
}

// askUntil sends tasks for rawURL one at a time until one is answered
// with class want, and returns the classes seen.
func askUntil(t *testing.T, d *dispatcher, prefix, rawURL, want string, max int) []string {
	t.Helper()
	var classes []string
	for i := range max {
		id := fmt.Sprintf("%s%d", prefix, i)
		d.task(id, 1, rawURL)
		res := d.collect(1, 10*time.Second)[id]
		classes = append(classes, res.Class)
		if res.Class == want {
			return classes
		}
		time.Sleep(5 * time.Millisecond) // pacing the asks, not synchronisation
	}
	t.Fatalf("no %q answer in %d tasks: %v", want, max, classes)
	return nil
}

func TestAutoBlacklist(t *testing.T) {
	t.Parallel()
	t.Run("network failures, host and address", func(t *testing.T) {
		t.Parallel()
		addr, accepted := closingListener(t)
		d := newDispatcher(t, "tcp://127.0.0.1:*")
		cfg := testConfig(t, d)
		cfg.Fetch.Resolve = map[string]string{"a.test:80": addr, "b.test:80": addr}
		cfg.DefaultDelay = NoDelay
		cfg.BackoffMin = 2 * time.Millisecond
		cfg.MaxBackoff = 20 * time.Millisecond
		cfg.RobotsRetry = 5 * time.Millisecond
		var logs logBuffer
		cfg.Logger = newLogger(&logs)
		r := start(t, cfg)
		register(t, d)
		classes := askUntil(t, d, "a", "http://a.test/people/ann", ClassBlacklisted, 500)
		// The host is there but never answers robots.txt: its pages are
		// robots-unavailable, and the failures still count towards
		// blacklisting it.
		for _, c := range classes[:len(classes)-1] {
			if c != ClassRobotsUnavailable {
				t.Fatalf("answers before blacklisting %v, want robots-unavailable only", classes)
			}
		}
		if n := accepted.Load(); n != autoNetFails {
			t.Errorf("%d connections before blacklisting, want %d", n, autoNetFails)
		}
		// Another name for the same address is refused at dial time.
		askUntil(t, d, "b", "http://b.test/people/ann", ClassBlacklisted, 5)
		askUntil(t, d, "again", "http://a.test/people/bob", ClassBlacklisted, 1)
		if n := accepted.Load(); n != autoNetFails {
			t.Errorf("%d connections in all, want %d: blacklisted hosts were still contacted", n, autoNetFails)
		}
		if st := r.sup.Stats(); st.Blacklisted != 3 {
			t.Errorf("stats blacklisted %d, want 3 (a.test, its address, b.test)", st.Blacklisted)
		}
		log := logs.String()
		for _, want := range []string{"host blacklisted for the rest of the run", "address blacklisted for the rest of the run"} {
			if n := strings.Count(log, want); n != 1 && !(strings.HasPrefix(want, "host") && n == 2) {
				t.Errorf("%q logged %d times", want, n)
			}
		}
		if !strings.Contains(log, "level=WARN msg=\"address blacklisted") || !strings.Contains(log, addr) {
			t.Errorf("address blacklisting not logged at Warn with the address:\n%s", log)
		}
	})
	t.Run("server errors", func(t *testing.T) {
		t.Parallel()
		s := newFuncSite(t, "a.test", false, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			http.Error(w, "broken", http.StatusBadGateway)
		})
		d := newDispatcher(t, "tcp://127.0.0.1:*")
		cfg := testConfig(t, d, s)
		cfg.DefaultDelay = NoDelay
		cfg.BackoffMin = 2 * time.Millisecond
		cfg.MaxBackoff = 10 * time.Millisecond
		cfg.NoSoft404 = true
		r := start(t, cfg)
		register(t, d)
		classes := askUntil(t, d, "p", "http://a.test/people/ann", ClassBlacklisted, 50)
		if len(classes) != autoServerFails+1 {
			t.Errorf("answers %v, want %d bad-status then blacklisted", classes, autoServerFails)
		}
		pages := 0
		for _, h := range s.log() {
			if h.path == "/people/ann" {
				pages++
			}
		}
		if pages != autoServerFails {
			t.Errorf("page asked %d times, want %d", pages, autoServerFails)
		}
		if st := r.sup.Stats(); st.Blacklisted < 1 || st.Failed[ClassBlacklisted] != 1 {
			t.Errorf("stats %+v", st)
		}
	})
}

// listenOn starts a site on a given loopback address.
func listenOn(t *testing.T, name, ip string) *site {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		proctest.Missing(t, "a listener on "+ip, err.Error())
	}
	s := &site{name: name, pages: map[string]string{"/people/ann": annPage}, hold: map[string]func(){}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

// TestUserBlacklist: hosts (with their subdomains) are answered
// "blacklisted" without requests; IPs and CIDRs are refused at dial time
// (blocked-address), however the name leads there; the rest is crawled.
func TestUserBlacklist(t *testing.T) {
	t.Parallel()
	ok := newSite(t, "a.test", "", map[string]string{"/people/ann": annPage})
	sub := newSite(t, "www.bad.test", "", map[string]string{"/people/ann": annPage})
	ipSite := listenOn(t, "ip.test", "127.0.0.2")
	cidrSite := listenOn(t, "cidr.test", "127.0.0.9")
	path := filepath.Join(t.TempDir(), "blacklist.txt")
	list := "# test blacklist\nbad.test\n127.0.0.2\n127.0.0.8/29\n"
	if err := os.WriteFile(path, []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	bl, err := fetch.LoadBlacklist(path)
	if err != nil {
		t.Fatal(err)
	}
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d, ok, sub, ipSite, cidrSite)
	cfg.Blacklist = bl
	cfg.DefaultDelay = NoDelay
	r := start(t, cfg)
	register(t, d)
	cases := []struct {
		id, url, class, errHas string
		site                   *site
	}{
		{"ok", "http://a.test/people/ann", "", "", ok},
		{"host", "http://www.bad.test/people/ann", ClassBlacklisted, path + ":2", sub},
		{"ip", "http://ip.test/people/ann", string(fetch.ClassBlocked), "deny list (127.0.0.2/32)", ipSite},
		{"cidr", "http://cidr.test/people/ann", string(fetch.ClassBlocked), "deny list (127.0.0.8/29)", cidrSite},
	}
	for _, tc := range cases {
		d.task(tc.id, 1, tc.url)
	}
	got := d.collect(len(cases), 10*time.Second)
	for _, tc := range cases {
		res := got[tc.id]
		if res.Class != tc.class || !strings.Contains(res.Error, tc.errHas) {
			t.Errorf("%s: class %q error %q; want %q with %q", tc.id, res.Class, res.Error, tc.class, tc.errHas)
		}
		if n := len(tc.site.log()); (tc.class == "") != (n > 0) {
			t.Errorf("%s: %d requests reached the site", tc.id, n)
		}
	}
	if st := r.sup.Stats(); st.Blacklisted != 0 {
		t.Errorf("stats blacklisted %d: user entries are not automatic blacklistings", st.Blacklisted)
	}
}

func TestHealthRefusedSubdomains(t *testing.T) {
	hs := newHealth(nil, time.Minute, time.Second, fetch.Blacklist{Hosts: []fetch.BlacklistHost{{Host: "bad.test", Where: "f:1"}}}, DefaultMaxHosts)
	for host, refused := range map[string]bool{
		"bad.test": true, "www.bad.test": true, "a.b.bad.test:8080": true, "bad.test.": true,
		"notbad.test": false, "bad.test.example": false, "good.test": false, "[::1]:80": false,
	} {
		if got := hs.refused(host) != ""; got != refused {
			t.Errorf("refused(%q) = %v, want %v", host, got, refused)
		}
	}
	if why := hs.addrRefused(netip.MustParseAddrPort("127.0.0.1:80")); why != "" {
		t.Errorf("healthy address refused: %s", why)
	}
}
