package testweb

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// newClient returns an HTTP client that reaches the web's hosts the way the
// fetcher does: by looking "host:port" up in Resolve. Any other address is
// refused, so a test can never leave loopback.
func newClient(t *testing.T, w *Web) *http.Client {
	t.Helper()
	resolve := w.Resolve()
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			to, ok := resolve[addr]
			if !ok {
				return nil, fmt.Errorf("test client: %s is not a fixture host", addr)
			}
			return d.DialContext(ctx, network, to)
		},
		MaxIdleConnsPerHost: 4,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport:     tr,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type got struct {
	status   int
	ctype    string
	location string
	body     string
}

// get requests rawURL, sending host as the Host header when it is not "".
func get(t *testing.T, c *http.Client, method, rawURL, host, ua string) got {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if ua != "" {
		req.Header.Set("User-Agent", ua)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", rawURL, err)
	}
	return got{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Location"), string(b)}
}

func startSmall(t *testing.T, opts Options) *Web {
	t.Helper()
	w, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return w
}

func TestHostsAnswerByHostHeader(t *testing.T) {
	w := startSmall(t, Options{CrawlDelay: DefaultCrawlDelay})
	c := newClient(t, w)
	cases := []struct {
		name   string
		method string
		url    string
		host   string // Host header override
		status int
		ctype  string
		want   []string // substrings of the body
		absent []string
	}{
		{"people profile", "GET", "http://people.example/p/alice", "", 200, htmlType,
			[]string{`<h1 class="fn">`, "Alice Moreau", `<p class="location">Lyon, France</p>`, `href="mailto:alice.moreau@mail.example"`}, nil},
		{"staff profile", "GET", "http://staff.example.org/staff/erin.html", "", 200, htmlType,
			[]string{`<dl class="profile">`, "<dt>Name</dt><dd>Erin Walsh</dd>", "erin.walsh@staff.example.org"}, nil},
		{"staff profile without email", "GET", "http://staff.example.org/staff/dana.html", "", 200, htmlType,
			[]string{"Warsaw, Poland"}, []string{"<dt>Email</dt>"}},
		{"homepage links across hosts", "GET", "http://blog.example.net/~alice/", "", 200, htmlType,
			[]string{`href="http://people.example/p/alice"`}, []string{`class="fn"`}},
		{"team page links colleagues", "GET", "http://team.example/", "", 200, htmlType,
			[]string{"http://people.example/p/hana", "http://people.example/p/bob",
				"http://staff.example.org/staff/gus.html", "http://staff.example.org/staff/erin.html"}, nil},
		{"quiet page has no data", "GET", "http://quiet.example/", "", 200, htmlType,
			[]string{"Under construction"}, []string{`class="fn"`, `class="profile"`}},
		{"directory without slash", "GET", "http://blog.example.net/~zoe", "", 301, htmlType, []string{`href="/~zoe/"`}, nil},
		{"missing page", "GET", "http://quiet.example/gone", "", 404, htmlType, []string{"Not found"}, nil},
		{"private page exists", "GET", "http://staff.example.org/private/kim.html", "", 200, htmlType, []string{"Kim Lee"}, nil},
		{"same path, other host", "GET", "http://people.example/", "quiet.example", 200, htmlType,
			[]string{"Under construction"}, []string{"Alice Moreau"}},
		{"host header with port and case", "GET", "http://people.example/p/bob", "People.Example:80", 200, htmlType,
			[]string{"Bob Okafor"}, nil},
		{"unknown host", "GET", "http://people.example/p/alice", "nobody.example", 404, htmlType,
			[]string{"unknown host nobody.example"}, []string{"Alice"}},
		{"address as host", "GET", "http://people.example/", w.Addr(), 404, htmlType, nil, nil},
		{"head", "HEAD", "http://people.example/p/alice", "", 200, htmlType, nil, []string{"Alice"}},
		{"post refused", "POST", "http://people.example/p/alice", "", 405, textType, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := get(t, c, tc.method, tc.url, tc.host, "")
			if g.status != tc.status {
				t.Errorf("status %d, want %d", g.status, tc.status)
			}
			if wantLoc := map[int]string{301: "/~zoe/"}[tc.status]; g.location != wantLoc {
				t.Errorf("Location %q, want %q", g.location, wantLoc)
			}
			if g.ctype != tc.ctype {
				t.Errorf("Content-Type %q, want %q", g.ctype, tc.ctype)
			}
			for _, s := range tc.want {
				if !strings.Contains(g.body, s) {
					t.Errorf("body lacks %q:\n%s", s, g.body)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(g.body, s) {
					t.Errorf("body has %q:\n%s", s, g.body)
				}
			}
		})
	}
}

func TestRobotsTxt(t *testing.T) {
	cases := []struct {
		name   string
		delay  int
		host   string
		want   []string
		absent []string
	}{
		{"delay 1", 1, hostStaff, []string{"User-agent: *\nCrawl-delay: 1\nDisallow: /private/\n"}, nil},
		{"delay 3", 3, hostTeam, []string{"Crawl-delay: 3\n", "Disallow: /private/\n"}, nil},
		{"no delay", 0, hostQuiet, []string{"User-agent: *\nDisallow: /private/\n"}, []string{"Crawl-delay"}},
		{"other agent's group first", 1, hostPeople,
			[]string{"User-agent: archiver\nDisallow: /\n\nUser-agent: *\nCrawl-delay: 1\nDisallow: /private/\n"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := startSmall(t, Options{CrawlDelay: tc.delay})
			g := get(t, newClient(t, w), "GET", "http://"+tc.host+"/robots.txt", "", "")
			if g.status != 200 || g.ctype != textType {
				t.Fatalf("status %d, type %q", g.status, g.ctype)
			}
			for _, s := range tc.want {
				if !strings.Contains(g.body, s) {
					t.Errorf("robots.txt lacks %q:\n%s", s, g.body)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(g.body, s) {
					t.Errorf("robots.txt has %q:\n%s", s, g.body)
				}
			}
		})
	}
	// Every host has one.
	w := startSmall(t, Options{CrawlDelay: 2})
	c := newClient(t, w)
	for _, h := range w.Hosts() {
		if g := get(t, c, "GET", "http://"+h+"/robots.txt", "", ""); g.status != 200 || !strings.Contains(g.body, "Crawl-delay: 2\n") {
			t.Errorf("%s/robots.txt: status %d\n%s", h, g.status, g.body)
		}
	}
}

func TestStartRefusesBadOptions(t *testing.T) {
	for _, o := range []Options{{CrawlDelay: -1}, {Latency: -time.Second}} {
		if w, err := Start(o); err == nil {
			w.Close()
			t.Errorf("Start(%+v) succeeded, want an error", o)
		}
	}
	for _, o := range []LargeOptions{{Hosts: -1}, {Pages: 10000}, {Latency: -time.Second}} {
		if w, err := StartLarge(o); err == nil {
			w.Close()
			t.Errorf("StartLarge(%+v) succeeded, want an error", o)
		}
	}
}

func TestHostsAndResolve(t *testing.T) {
	w := startSmall(t, Options{})
	want := []string{hostApp, hostBlog, hostPeople, hostQuiet, hostStaff, hostTeam}
	if got := strings.Join(w.Hosts(), " "); got != strings.Join(want, " ") {
		t.Errorf("Hosts() = %s, want %s", got, strings.Join(want, " "))
	}
	if !strings.HasPrefix(w.Addr(), "127.0.0.1:") || strings.HasSuffix(w.Addr(), ":0") {
		t.Errorf("Addr() = %q, want 127.0.0.1 and a real port", w.Addr())
	}
	r := w.Resolve()
	if len(r) != len(want) {
		t.Errorf("Resolve() has %d entries, want %d: %v", len(r), len(want), r)
	}
	for _, h := range want {
		if r[h+":80"] != w.Addr() {
			t.Errorf("Resolve()[%q] = %q, want %q", h+":80", r[h+":80"], w.Addr())
		}
	}
}

func TestLogRecordsRequests(t *testing.T) {
	w := startSmall(t, Options{CrawlDelay: 1})
	c := newClient(t, w)
	reqs := []struct {
		method, url, host, ua string
		want                  Request
	}{
		{"GET", "http://people.example/robots.txt", "", "backfill/test (+https://backfill.invalid/)",
			Request{Host: hostPeople, Path: "/robots.txt", UserAgent: "backfill/test (+https://backfill.invalid/)", Status: 200}},
		{"GET", "http://staff.example.org/staff/gus.html?ref=team&x=1", "", "agent-a",
			Request{Host: hostStaff, Path: "/staff/gus.html?ref=team&x=1", UserAgent: "agent-a", Status: 200}},
		{"GET", "http://quiet.example/gone", "", "agent-b",
			Request{Host: hostQuiet, Path: "/gone", UserAgent: "agent-b", Status: 404}},
		{"GET", "http://people.example/x", "Elsewhere.Example:8080", "agent-c",
			Request{Host: "elsewhere.example", Path: "/x", UserAgent: "agent-c", Status: 404}},
		{"HEAD", "http://team.example/", "", "agent-d",
			Request{Host: hostTeam, Path: "/", UserAgent: "agent-d", Status: 200}},
	}
	before := time.Now()
	for _, r := range reqs {
		get(t, c, r.method, r.url, r.host, r.ua)
	}
	after := time.Now()
	log := w.Log()
	if len(log) != len(reqs) {
		t.Fatalf("log has %d requests, want %d: %+v", len(log), len(reqs), log)
	}
	for i, r := range reqs {
		g := log[i]
		if g.Time.Before(before) || g.Time.After(after) {
			t.Errorf("request %d: time %v outside the test's [%v, %v]", i, g.Time, before, after)
		}
		if i > 0 && g.Time.Before(log[i-1].Time) {
			t.Errorf("request %d arrived before request %d in the log", i, i-1)
		}
		// The end is taken before the response is written, so it is
		// in the log by the time the client has the response.
		if g.Done.Before(g.Time) || g.Done.After(after) {
			t.Errorf("request %d: response ended at %v, outside [its arrival %v, %v]", i, g.Done, g.Time, after)
		}
		g.Time, g.Done = time.Time{}, time.Time{}
		if g != r.want {
			t.Errorf("request %d logged as %+v, want %+v", i, g, r.want)
		}
	}
	// Log returns a copy: changing it changes nothing inside.
	log[0].Host = "changed"
	if w.Log()[0].Host != hostPeople {
		t.Error("Log() exposed the web's own slice")
	}
}

func TestLogConcurrent(t *testing.T) {
	w := startSmall(t, Options{})
	c := newClient(t, w)
	const n = 40
	errs := make(chan error, n)
	for i := range n {
		go func() {
			resp, err := c.Get(fmt.Sprintf("http://people.example/p/carol?i=%d", i))
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	seen := map[string]bool{}
	for _, r := range w.Log() {
		if r.Status != 200 || r.Host != hostPeople {
			t.Errorf("logged %+v", r)
		}
		seen[r.Path] = true
	}
	if len(seen) != n {
		t.Errorf("log holds %d distinct requests, want %d", len(seen), n)
	}
}

func TestLatency(t *testing.T) {
	const lat = 150 * time.Millisecond
	w := startSmall(t, Options{Latency: lat})
	c := newClient(t, w)
	start := time.Now()
	g := get(t, c, "GET", "http://team.example/", "", "")
	if el := time.Since(start); el < lat {
		t.Errorf("response after %s, want at least %s", el, lat)
	}
	if g.status != 200 {
		t.Errorf("status %d", g.status)
	}
}

// TestCloseLeavesNothingRunning checks that Close ends the server, its
// connections and a request waiting out its latency, and that the port no
// longer answers.
func TestCloseLeavesNothingRunning(t *testing.T) {
	baseline := runtime.NumGoroutine()
	w, err := Start(Options{CrawlDelay: 1, Latency: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, w)
	// One request left waiting on its hour of latency.
	inFlight := make(chan error, 1)
	go func() {
		resp, err := c.Get("http://people.example/p/alice")
		if err == nil {
			resp.Body.Close()
		}
		inFlight <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(w.Log()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the request never arrived")
		}
		time.Sleep(5 * time.Millisecond) // polling the log, not synchronising
	}
	closed := make(chan error, 1)
	go func() { closed <- w.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while a request waited on its latency")
	}
	<-inFlight // answered (cut short) or failed: either way it is over
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if conn, err := net.DialTimeout("tcp", w.Addr(), time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Close", w.Addr())
	}
	c.Transport.(*http.Transport).CloseIdleConnections()
	deadline = time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after Close, %d before Start:\n%s",
				runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCanonicalHost(t *testing.T) {
	cases := []struct{ in, want string }{
		{"people.example", "people.example"},
		{"People.Example:80", "people.example"},
		{"people.example.", "people.example"},
		{"[::1]:80", "::1"},
		{"", ""},
		{"a:b:c", "a:b:c"},
	}
	for _, c := range cases {
		if got := canonicalHost(c.in); got != c.want {
			t.Errorf("canonicalHost(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzServe feeds arbitrary Host headers and paths (outside input) to both
// sites: never a panic, and every answer is a valid status.
func FuzzServe(f *testing.F) {
	for _, s := range [][2]string{
		{"people.example", "/p/alice"}, {"People.Example:80", "/robots.txt"}, {"people-0001.example", "/p/0001"},
		{"people-0000.example", "/"}, {"people-99999.example", "/p/1"}, {"people-0002.example", "/p/-001"},
		{"", ""}, {"[::1", "/%zz"},
		{"folk-0001.example", "/people/ada-kakaka"}, {"folk-0002.example", "/team/1"}, {"folk-0003.example", "/home/x"},
		{"folk-0001.example", "/private/people/x"}, {"folk-0001.example", "/img/a.png"}, {"folk-0004.example", "/"},
	} {
		f.Add(s[0], s[1])
	}
	small := newSmallSite(1)
	large := &largeSite{hostCount: 3, pageCount: 5}
	people := newPeopleSite(PeopleOptions{Hosts: 3, Pages: 4, Records: 10})
	f.Fuzz(func(t *testing.T, host, path string) {
		h := canonicalHost(host)
		for _, s := range []site{small, large, people} {
			r, found := s.serve(h, path)
			if found && (r.status < 200 || r.status > 599 || r.ctype == "") {
				t.Errorf("serve(%q, %q) = status %d, type %q", h, path, r.status, r.ctype)
			}
		}
	})
}
