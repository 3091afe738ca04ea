package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"backfill/etl"
	"backfill/fetch"
	"backfill/proctest"
)

const renderUA = "backfill-test/1.0 (+http://crawler.example/about)"

// jsSite is a fixture web on loopback for the renderer alone: js.example
// and api.example (one server, told apart by Host), whose pages get their
// data from scripts. The renderer's requests are made by get, a plain
// fetcher that logs them: politeness is the supervisor's, tested in
// rendernode_test.go.
type jsSite struct {
	srv  *httptest.Server
	stop chan struct{} // closed at cleanup: every stalled handler returns

	arrived chan string   // paths of /slow/ requests as they arrive
	release chan struct{} // one token lets one /slow/ request answer

	fetcher *fetch.Fetcher
	mu      sync.Mutex
	served  []string // host+path of every request the server got
	asked   []string // URLs the renderer handed to get
}

// Pages of jsSite. jsPage's script fills in the DOM, loads data from its
// own host and from api.example (with a header that needs a CORS
// preflight), and asks for everything else a page may: an image, a font,
// a stylesheet, a POST beacon, a prefetch; its favicon is the browser's
// own request.
const (
	jsPage = `<!doctype html>
<html><head><title>Listing</title>
<link rel="stylesheet" href="/style.css">
<link rel="prefetch" href="/next.html">
<style>@font-face { font-family: F; src: url(/font.woff2); } body { font-family: F; }</style>
</head>
<body>
<div class="location">static placeholder</div>
<div class="price"></div>
<div class="remote"></div>
<img src="/photo.png">
<script src="/app.js"></script>
</body></html>`

	appJS = `setTimeout(function () {
  fetch('/data.json').then(function (r) { return r.json(); }).then(function (d) {
    document.querySelector('.location').textContent = d.location;
  });
  fetch('http://api.example/v1/extra.json', {headers: {'X-Requested-With': 'backfill-test'}})
    .then(function (r) { return r.json(); })
    .then(function (d) { document.querySelector('.remote').textContent = d.extra; });
  navigator.sendBeacon('/beacon', 'seen');
  fetch('/submit', {method: 'POST', body: 'x=1'}).catch(function () {});
  document.querySelector('.price').textContent = 'Price: ' + (40 + 2);
}, 50);`
)

func newJSSite(t *testing.T) *jsSite {
	t.Helper()
	s := &jsSite{
		stop:    make(chan struct{}),
		arrived: make(chan string, 16),
		release: make(chan struct{}, 16),
	}
	page := func(w http.ResponseWriter, ctype, body string) {
		w.Header().Set("Content-Type", ctype)
		fmt.Fprint(w, body)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := strings.Cut(r.Host, ":")
		s.mu.Lock()
		s.served = append(s.served, host+r.URL.Path)
		s.mu.Unlock()
		switch host + r.URL.Path {
		case "js.example/js", "js.example/js2":
			page(w, "text/html; charset=utf-8", jsPage)
		case "js.example/app.js":
			page(w, "application/javascript", appJS)
		case "js.example/data.json":
			page(w, "application/json", `{"location": "Rendered Town"}`)
		case "api.example/v1/extra.json":
			w.Header().Set("Access-Control-Allow-Origin", "*")
			page(w, "application/json", `{"extra": "from the API"}`)
		case "js.example/photo.png":
			page(w, "image/png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
		case "js.example/latin1":
			// Latin-1 on the wire: the renderer gets it as UTF-8.
			page(w, "text/html; charset=iso-8859-1", "<html><body><p class=\"town\">Z\xfcrich</p><script>document.body.insertAdjacentHTML('beforeend', '<p class=\"js\">ok</p>');</script></body></html>")
		case "js.example/big":
			page(w, "text/html; charset=utf-8", `<html><body><script>document.body.insertAdjacentHTML('beforeend', '<p>' + 'é'.repeat(50000) + '</p>');</script></body></html>`)
		case "js.example/state":
			// What an earlier page left behind, if anything, and then
			// something for a later page to find.
			page(w, "text/html; charset=utf-8", `<html><body><p class="state"></p><script>
document.querySelector('.state').textContent = 'cookie=' + document.cookie + ' stored=' + localStorage.getItem('k') + ' session=' + sessionStorage.getItem('k');
document.cookie = 'k=1; max-age=3600'; localStorage.setItem('k', '1'); sessionStorage.setItem('k', '1');
</script></body></html>`)
		case "js.example/hang":
			page(w, "text/html; charset=utf-8", `<html><body><p>waiting</p><script src="/stall.js"></script></body></html>`)
		case "js.example/stall.js":
			select {
			case <-r.Context().Done():
			case <-s.stop:
			}
		case "js.example/busy":
			page(w, "text/html; charset=utf-8", `<html><body><script>var t = Date.now(); while (Date.now() - t < 8000) {}</script><p>done</p></body></html>`)
		default:
			if slow, ok := strings.CutPrefix(r.URL.Path, "/slow/"); ok {
				if strings.HasSuffix(slow, ".js") {
					s.arrived <- r.URL.Path
					select {
					case <-s.release:
						page(w, "application/javascript", `document.body.insertAdjacentHTML('beforeend', '<p class="slow">`+slow+`</p>');`)
					case <-r.Context().Done():
					case <-s.stop:
					}
					return
				}
				page(w, "text/html; charset=utf-8", `<html><body><script src="/slow/`+slow+`.js"></script></body></html>`)
				return
			}
			http.NotFound(w, r)
		}
	}))
	addr := s.srv.Listener.Addr().String()
	s.fetcher = fetch.New(fetch.Config{UserAgent: renderUA, AllowLoopback: true, IgnoreMetaRefresh: true,
		Resolve: map[string]string{"js.example:80": addr, "api.example:80": addr,
			"slow0.example:80": addr, "slow1.example:80": addr, "slow2.example:80": addr}})
	t.Cleanup(func() {
		select {
		case <-s.stop:
		default:
			close(s.stop)
		}
		s.srv.Close()
		s.fetcher.Close()
	})
	return s
}

func (s *jsSite) url(path string) string { return "http://js.example" + path }

// get is the renderer's way to the site: a plain fetch, logged.
func (s *jsSite) get(ctx context.Context, rawURL string) (*fetch.Response, error) {
	s.mu.Lock()
	s.asked = append(s.asked, rawURL)
	s.mu.Unlock()
	return s.fetcher.Get(ctx, rawURL)
}

// job fetches the page at path as the supervisor would and makes the
// renderJob for it.
func (s *jsSite) job(t *testing.T, path string, allow ...string) renderJob {
	t.Helper()
	return s.jobAt(t, s.url(path), allow...)
}

// jobAt is job for a page anywhere on the site's hosts.
func (s *jsSite) jobAt(t *testing.T, rawURL string, allow ...string) renderJob {
	t.Helper()
	doc, err := s.fetcher.Get(context.Background(), rawURL)
	if err != nil {
		t.Fatalf("fetch %s: %v", rawURL, err)
	}
	return renderJob{doc: doc, allow: allow, get: s.get}
}

// logs returns and clears what the server got and what get was asked.
func (s *jsSite) logs() (served, asked []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	served, asked = s.served, s.asked
	s.served, s.asked = nil, nil
	return served, asked
}

// needBrowser skips when no browser is installed.
func needBrowser(t *testing.T) {
	t.Helper()
	if _, err := findBrowser(); err != nil {
		proctest.NoChromium(t, fmt.Sprintf("render tests need Chromium (Debian package chromium): %v", err))
	}
}

// renderMaxBody is far above the fixture pages but below /big.
const renderMaxBody = 20000

func startRenderer(t *testing.T, tabs int, timeout, waitMax time.Duration) *renderer {
	t.Helper()
	r, err := newRenderer(context.Background(), RenderConfig{
		Tabs:        tabs,
		PageTimeout: timeout,
		WaitMax:     waitMax,
		MaxBody:     renderMaxBody,
		UserAgent:   renderUA,
	})
	if err != nil {
		t.Fatalf("newRenderer: %v", err)
	}
	return r
}

// closeAndCheck closes r and checks that no process of its browser is left,
// no child of this process is left (zombies included), and the profile is
// gone.
func closeAndCheck(t *testing.T, r *renderer) {
	t.Helper()
	r.mu.Lock()
	var dir string
	if r.cur != nil {
		dir = r.cur.dir
	}
	r.mu.Unlock()
	if dir == "" {
		t.Fatal("renderer has no running browser before Close")
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if pids := profileProcs(dir); len(pids) > 0 {
		t.Errorf("browser processes left after Close: %v", pids)
	}
	for _, p := range readProcs() {
		if p.ppid == os.Getpid() {
			comm, _ := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/comm")
			t.Errorf("child process %d (%s, state %c) left after Close", p.pid, strings.TrimSpace(string(comm)), p.state)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("profile directory %s left after Close (stat: %v)", dir, err)
	}
	if st := r.Stats(); st.PID != 0 || st.RSS != 0 || st.PSS != 0 {
		t.Errorf("stats after Close: pid %d rss %d pss %d, want 0", st.PID, st.RSS, st.PSS)
	}
	doc := &fetch.Response{URL: "http://js.example/", Status: 200, ContentType: "text/html"}
	if _, err := r.Render(context.Background(), renderJob{doc: doc}); fetch.ClassOf(err) != fetch.ClassCanceled {
		t.Errorf("Render after Close: %v, want class canceled", err)
	}
}

// TestRenderPages renders pages in one browser: the DOM scripts write is
// read, the page's HTML comes from the job (the site serves it once, to
// the test's own fetch), the requests the page makes go through get
// (scripts, XHR to its host and to another, after a preflight answered in
// the browser) and nothing else reaches the site: no image, font,
// stylesheet, prefetch, favicon, beacon or POST unless allowed. A script
// two pages load is fetched once.
func TestRenderPages(t *testing.T) {
	needBrowser(t)
	baseline := runtime.NumGoroutine()
	s := newJSSite(t)
	// Generous: these pages take under a second, but a loaded CI machine
	// can be slow; the deadline itself is tested in TestRenderPageDeadline.
	const pageTimeout = 10 * time.Second
	r := startRenderer(t, 2, pageTimeout, pageTimeout)

	t.Run("scripts fill the DOM, only their requests are made", func(t *testing.T) {
		job := s.job(t, "/js")
		if strings.Contains(string(job.doc.Body), "Rendered Town") {
			t.Fatal("the page's HTML already holds the value its script writes")
		}
		s.logs()
		resp, err := r.Render(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`<div class="location">Rendered Town</div>`, "Price: 42", `<div class="remote">from the API</div>`, "<!DOCTYPE html>"} {
			if !strings.Contains(string(resp.Body), want) {
				t.Errorf("DOM lacks %q:\n%s", want, resp.Body)
			}
		}
		if resp.URL != s.url("/js") || resp.Status != 200 || resp.ContentType != "text/html" {
			t.Errorf("response URL %q status %d type %q", resp.URL, resp.Status, resp.ContentType)
		}
		served, asked := s.logs()
		slices.Sort(served)
		slices.Sort(asked)
		wantServed := []string{"api.example/v1/extra.json", "js.example/app.js", "js.example/data.json"}
		if !slices.Equal(served, wantServed) {
			t.Errorf("the site served %v, want only %v", served, wantServed)
		}
		wantAsked := []string{"http://api.example/v1/extra.json", s.url("/app.js"), s.url("/data.json")}
		if !slices.Equal(asked, wantAsked) {
			t.Errorf("requests handed to get: %v, want %v", asked, wantAsked)
		}
		st := r.Stats()
		// photo, font, stylesheet, prefetch, favicon, beacon, POST: at
		// least these were refused without a request.
		if st.Blocked < 6 || st.Fetched != 3 {
			t.Errorf("stats: blocked %d fetched %d, want at least 6 blocked and 3 fetched", st.Blocked, st.Fetched)
		}
	})

	t.Run("a second page shares the script, allows images", func(t *testing.T) {
		job := s.job(t, "/js2", etl.ResourceImage)
		s.logs()
		resp, err := r.Render(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(resp.Body), "Rendered Town") {
			t.Errorf("DOM lacks the script's value:\n%s", resp.Body)
		}
		served, _ := s.logs()
		slices.Sort(served)
		// app.js and data.json were fetched for /js already; the API
		// answer too. The image is allowed now.
		if want := []string{"js.example/photo.png"}; !slices.Equal(served, want) {
			t.Errorf("the site served %v, want only %v", served, want)
		}
		if st := r.Stats(); st.Shared < 3 {
			t.Errorf("shared %d, want the script and both data answers shared", st.Shared)
		}
	})

	t.Run("text in another charset", func(t *testing.T) {
		resp, err := r.Render(context.Background(), s.job(t, "/latin1"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(resp.Body), `<p class="town">Zürich</p>`) || !strings.Contains(string(resp.Body), `<p class="js">ok</p>`) {
			t.Errorf("DOM of a Latin-1 page:\n%s", resp.Body)
		}
	})

	t.Run("not html, not http", func(t *testing.T) {
		doc := &fetch.Response{URL: s.url("/photo.png"), Status: 200, ContentType: "image/png"}
		if _, err := r.Render(context.Background(), renderJob{doc: doc, get: s.get}); fetch.ClassOf(err) != fetch.ClassNotHTML {
			t.Errorf("image: %v, want class %s", err, fetch.ClassNotHTML)
		}
		doc = &fetch.Response{URL: "file:///etc/passwd", Status: 200, ContentType: "text/html"}
		if _, err := r.Render(context.Background(), renderJob{doc: doc, get: s.get}); fetch.ClassOf(err) != fetch.ClassURL {
			t.Errorf("file URL: %v, want class %s", err, fetch.ClassURL)
		}
	})

	t.Run("two tabs busy, a third waits", func(t *testing.T) {
		type result struct {
			resp *fetch.Response
			err  error
		}
		results := make(chan result, 3)
		for i := range 3 {
			// One host each: the fetcher keeps one connection per host,
			// so two requests to one host would take turns.
			job := s.jobAt(t, fmt.Sprintf("http://slow%d.example/slow/%d", i, i))
			go func() {
				resp, err := r.Render(context.Background(), job)
				results <- result{resp, err}
			}()
		}
		got := map[string]bool{}
		for len(got) < 2 {
			select {
			case p := <-s.arrived:
				got[p] = true
			case <-time.After(pageTimeout):
				t.Fatalf("only %d of 2 renders reached the site", len(got))
			}
		}
		deadline := time.Now().Add(pageTimeout)
		for st := r.Stats(); st.Busy != 2 || st.Waiting != 1; st = r.Stats() {
			if time.Now().After(deadline) {
				t.Fatalf("stats busy %d waiting %d, want 2 and 1", st.Busy, st.Waiting)
			}
			time.Sleep(5 * time.Millisecond) // polling a counter
		}
		select {
		case p := <-s.arrived:
			t.Fatalf("a third render reached the site (%s) while two tabs were busy", p)
		default:
		}
		for range 3 {
			s.release <- struct{}{}
		}
		for range 3 {
			res := <-results
			if res.err != nil {
				t.Errorf("slow render: %v", res.err)
			} else if !strings.Contains(string(res.resp.Body), `class="slow"`) {
				t.Errorf("slow render body: %s", res.resp.Body)
			}
		}
		if p := <-s.arrived; p == "" {
			t.Error("third render never reached the site")
		}
	})

	t.Run("truncated to MaxBody", func(t *testing.T) {
		resp, err := r.Render(context.Background(), s.job(t, "/big"))
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Truncated || len(resp.Body) > renderMaxBody || !utf8.Valid(resp.Body) {
			t.Errorf("truncated %v, %d bytes (valid UTF-8 %v), want truncated to at most %d",
				resp.Truncated, len(resp.Body), utf8.Valid(resp.Body), renderMaxBody)
		}
	})

	st := r.Stats()
	t.Logf("browser pid %d: tree rss %.0f MiB, pss %.0f MiB; rendered %d, failed %d; requests %d, shared %d, blocked %d, strays %d",
		st.PID, float64(st.RSS)/(1<<20), float64(st.PSS)/(1<<20), st.Rendered, st.Failed, st.Fetched, st.Shared, st.Blocked, st.Strays)
	if st.PID == 0 || st.RSS == 0 || st.PSS == 0 || st.PSS > st.RSS {
		t.Errorf("stats: pid %d rss %d pss %d, want all > 0 and pss <= rss", st.PID, st.RSS, st.PSS)
	}
	if st.Restarts != 0 {
		t.Errorf("restarts %d, want 0", st.Restarts)
	}
	shutDown(t, r, s, baseline)
}

// TestRenderTabReuse: one tab renders page after page, and none finds the
// cookies or storage an earlier one left; a tab whose page failed is not
// used again.
func TestRenderTabReuse(t *testing.T) {
	needBrowser(t)
	baseline := runtime.NumGoroutine()
	s := newJSSite(t)
	r := startRenderer(t, 1, 2*time.Second, 3*time.Second)
	const clean = `<p class="state">cookie= stored=null session=null</p>`
	for i := range 3 {
		resp, err := r.Render(context.Background(), s.job(t, "/state"))
		if err != nil {
			t.Fatalf("render %d: %v", i+1, err)
		}
		if !strings.Contains(string(resp.Body), clean) {
			t.Errorf("render %d found an earlier page's state, want %s:\n%s", i+1, clean, resp.Body)
		}
	}
	if st := r.Stats(); st.Opened != 1 || st.Rendered != 3 {
		t.Errorf("tabs opened %d for %d pages, want 1 for 3", st.Opened, st.Rendered)
	}
	if _, err := r.Render(context.Background(), s.job(t, "/busy")); fetch.ClassOf(err) != fetch.ClassTimeout {
		t.Fatalf("busy page: %v, want a timeout", err)
	}
	resp, err := r.Render(context.Background(), s.job(t, "/state"))
	if err != nil || !strings.Contains(string(resp.Body), clean) {
		t.Errorf("render after a failed page: %v", err)
	}
	if st := r.Stats(); st.Opened != 2 || st.Restarts != 0 {
		t.Errorf("tabs opened %d, restarts %d; want a new tab after the failed page, on the same browser", st.Opened, st.Restarts)
	}
	shutDown(t, r, s, baseline)
}

// TestRenderPageDeadline: a page whose script never arrives fails when its
// requests have waited WaitMax, one whose own script keeps it busy when
// PageTimeout has passed, and a caller's deadline is a timeout too; the
// tab is free again after each.
func TestRenderPageDeadline(t *testing.T) {
	needBrowser(t)
	baseline := runtime.NumGoroutine()
	s := newJSSite(t)
	const pageTimeout, waitMax = 2 * time.Second, 3 * time.Second
	r := startRenderer(t, 1, pageTimeout, waitMax)

	for _, tc := range []struct {
		name, path string
		within     time.Duration // the limit, plus closing the tab
		errHas     string
	}{
		{"requests wait too long", "/hang", waitMax + 4*time.Second, "waited over"},
		{"page busy too long", "/busy", pageTimeout + 8*time.Second, "not rendered within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := r.Render(context.Background(), s.job(t, tc.path))
			took := time.Since(start)
			if fetch.ClassOf(err) != fetch.ClassTimeout || !strings.Contains(fmt.Sprint(err), tc.errHas) {
				t.Fatalf("class %q (err %v), want timeout saying %q", fetch.ClassOf(err), err, tc.errHas)
			}
			if took > tc.within {
				t.Errorf("took %v, want at most %v", took, tc.within)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := r.Render(ctx, s.job(t, "/hang"))
	cancel()
	if fetch.ClassOf(err) != fetch.ClassTimeout {
		t.Errorf("caller deadline: class %q (err %v), want timeout", fetch.ClassOf(err), err)
	}
	// The tab is free again and the browser unharmed.
	if resp, err := r.Render(context.Background(), s.job(t, "/js")); err != nil || !strings.Contains(string(resp.Body), "Rendered Town") {
		t.Errorf("render after timeouts: %v", err)
	}
	if st := r.Stats(); st.Restarts != 0 || st.Busy != 0 {
		t.Errorf("restarts %d busy %d, want 0 and 0", st.Restarts, st.Busy)
	}
	shutDown(t, r, s, baseline)
}

// TestRenderRestartsDeadBrowser: a browser killed under the renderer is
// replaced at the next render, and one left idle is stopped and started
// again when needed.
func TestRenderRestartsDeadBrowser(t *testing.T) {
	needBrowser(t)
	baseline := runtime.NumGoroutine()
	s := newJSSite(t)
	r := startRenderer(t, 1, 5*time.Second, 5*time.Second)

	if _, err := r.Render(context.Background(), s.job(t, "/js")); err != nil {
		t.Fatalf("first render: %v", err)
	}
	old := r.Stats().PID
	if old == 0 {
		t.Fatal("no browser pid")
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatalf("kill browser %d: %v", old, err)
	}

	resp, err := r.Render(context.Background(), s.job(t, "/js"))
	if err != nil {
		t.Fatalf("render after the browser was killed: %v", err)
	}
	if !strings.Contains(string(resp.Body), "Rendered Town") {
		t.Errorf("render after restart lacks the JavaScript value:\n%s", resp.Body)
	}
	st := r.Stats()
	if st.Restarts != 1 {
		t.Errorf("restarts %d, want 1", st.Restarts)
	}
	if st.PID == 0 || st.PID == old {
		t.Errorf("browser pid %d after restart (old %d)", st.PID, old)
	}
	// The killed browser was reaped: no zombie of it is left.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := os.Stat("/proc/" + strconv.Itoa(old))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("killed browser %d still in /proc", old)
		}
		time.Sleep(10 * time.Millisecond) // polling /proc
	}

	// An idle browser is stopped, profile and all, and the next render
	// starts one again; that is no restart.
	r.mu.Lock()
	r.idleAfter = 100 * time.Millisecond
	r.mu.Unlock()
	if _, err := r.Render(context.Background(), s.job(t, "/js")); err != nil {
		t.Fatalf("render before idling: %v", err)
	}
	r.mu.Lock()
	dir := r.cur.dir
	r.mu.Unlock()
	deadline = time.Now().Add(10 * time.Second)
	for r.Stats().PID != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the browser was not stopped when idle")
		}
		time.Sleep(10 * time.Millisecond) // polling a counter
	}
	if pids := profileProcs(dir); len(pids) > 0 {
		t.Errorf("processes of the idle browser left: %v", pids)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("profile of the idle browser left (stat: %v)", err)
	}
	r.mu.Lock()
	r.idleAfter = time.Hour
	r.mu.Unlock()
	if resp, err := r.Render(context.Background(), s.job(t, "/js")); err != nil || !strings.Contains(string(resp.Body), "Rendered Town") {
		t.Fatalf("render after idling: %v", err)
	}
	if st := r.Stats(); st.Restarts != 1 || st.PID == 0 {
		t.Errorf("after idling: restarts %d pid %d, want 1 (the kill's) and a running browser", st.Restarts, st.PID)
	}
	shutDown(t, r, s, baseline)
}

func TestRenderConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  RenderConfig
		want string
	}{
		{"no user agent", RenderConfig{}, "no user agent"},
		{"negative tabs", RenderConfig{UserAgent: renderUA, Tabs: -1}, "must not be negative"},
		{"negative wait", RenderConfig{UserAgent: renderUA, WaitMax: -time.Second}, "must not be negative"},
		{"missing binary", RenderConfig{UserAgent: renderUA, Exec: "/nonexistent/chromium"}, "/nonexistent/chromium"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := newRenderer(context.Background(), tc.cfg)
			if err == nil {
				r.Close()
				t.Fatal("newRenderer succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestNetErrorClass(t *testing.T) {
	cases := map[string]fetch.Class{
		"net::ERR_NAME_NOT_RESOLVED":        fetch.ClassDNS,
		"net::ERR_CONNECTION_REFUSED":       fetch.ClassConnect,
		"net::ERR_TUNNEL_CONNECTION_FAILED": fetch.ClassConnect,
		"net::ERR_TIMED_OUT":                fetch.ClassTimeout,
		"net::ERR_TOO_MANY_REDIRECTS":       fetch.ClassRedirect,
		"net::ERR_CERT_AUTHORITY_INVALID":   fetch.ClassTLS,
		"net::ERR_INVALID_HTTP_RESPONSE":    fetch.ClassProtocol,
		"net::ERR_SOMETHING_NEW":            ClassRender,
	}
	for text, want := range cases {
		if got := netErrorClass(text); got != want {
			t.Errorf("netErrorClass(%q) = %q, want %q", text, got, want)
		}
	}
}

// shutDown closes the renderer (checking it left nothing behind), then the
// site, and waits for the goroutines to return to baseline.
func shutDown(t *testing.T, r *renderer, s *jsSite, baseline int) {
	t.Helper()
	closeAndCheck(t, r)
	close(s.stop)
	s.srv.Close()
	s.fetcher.Close()
	waitGoroutines(t, baseline, 5*time.Second)
}
