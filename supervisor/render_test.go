package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"backfill/fetch"
)

const renderUA = "backfill-test/1.0 (+http://crawler.example/about)"

// jsSite is a fixture web on loopback whose pages get their data from
// JavaScript after load. It is reached by the browser as js.example:PORT
// (and priv.example:PORT, which resolves to a private address the guard
// must refuse).
type jsSite struct {
	srv     *httptest.Server
	port    string
	tls     *httptest.Server // same pages over TLS with a certificate no browser trusts
	tlsPort string
	stop    chan struct{} // closed at cleanup: every stalled handler returns

	arrived chan string   // paths of /slow/ requests as they arrive
	release chan struct{} // one token lets one /slow/ request answer

	mu  sync.Mutex
	uas map[string]bool // User-Agent values seen
}

const jsPage = `<!doctype html>
<html><head><title>Listing</title></head>
<body>
<div class="location">static placeholder</div>
<div class="price"></div>
<script>
setTimeout(function () {
  fetch('/data.json').then(function (r) { return r.json(); }).then(function (d) {
    document.querySelector('.location').textContent = d.location;
  });
  document.querySelector('.price').textContent = 'Price: ' + (40 + 2);
}, 50);
</script>
</body></html>`

func newJSSite(t *testing.T) *jsSite {
	t.Helper()
	s := &jsSite{
		stop:    make(chan struct{}),
		arrived: make(chan string, 16),
		release: make(chan struct{}, 16),
		uas:     make(map[string]bool),
	}
	mux := http.NewServeMux()
	html := func(w http.ResponseWriter, status int, body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
	mux.HandleFunc("/js", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.uas[r.UserAgent()] = true
		s.mu.Unlock()
		html(w, 200, jsPage)
	})
	mux.HandleFunc("/data.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"location": "Rendered Town"}`)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/js", http.StatusFound)
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		html(w, 404, `<html><body><p class="why">gone</p></body></html>`)
	})
	mux.HandleFunc("/image", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		html(w, 200, `<html><body><script>document.body.insertAdjacentHTML('beforeend', '<p>' + 'é'.repeat(50000) + '</p>');</script></body></html>`)
	})
	// A page whose image never arrives: the load event never fires.
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		html(w, 200, `<html><body><p>waiting</p><img src="/stall"></body></html>`)
	})
	mux.HandleFunc("/stall", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
	})
	// A page answered only when the test releases it.
	mux.HandleFunc("/slow/", func(w http.ResponseWriter, r *http.Request) {
		s.arrived <- r.URL.Path
		select {
		case <-s.release:
			html(w, 200, `<html><body><p class="slow">`+r.URL.Path+`</p></body></html>`)
		case <-r.Context().Done():
		case <-s.stop:
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })

	s.srv = httptest.NewServer(mux) // 127.0.0.1
	_, s.port, _ = net.SplitHostPort(s.srv.Listener.Addr().String())
	s.tls = httptest.NewTLSServer(mux)
	s.tls.Config.ErrorLog = log.New(io.Discard, "", 0) // the browser's refused handshakes
	_, s.tlsPort, _ = net.SplitHostPort(s.tls.Listener.Addr().String())
	t.Cleanup(func() {
		close(s.stop)
		s.srv.Close()
		s.tls.Close()
	})
	return s
}

func (s *jsSite) url(path string) string { return "http://js.example:" + s.port + path }

func (s *jsSite) resolve() map[string]string {
	return map[string]string{
		"js.example:" + s.port:     "127.0.0.1:" + s.port,
		"priv.example:" + s.port:   "10.0.0.1:" + s.port, // refused by the guard before any dial
		"tls.example:" + s.tlsPort: "127.0.0.1:" + s.tlsPort,
	}
}

func (s *jsSite) sawUA(ua string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.uas[ua]
}

// needBrowser skips when no browser is installed.
func needBrowser(t *testing.T) {
	t.Helper()
	if _, err := findBrowser(); err != nil {
		t.Skipf("render tests need Chromium (Debian package chromium): %v", err)
	}
}

// renderMaxBody is far above the fixture pages but below /big.
const renderMaxBody = 20000

func startRenderer(t *testing.T, s *jsSite, tabs int, timeout time.Duration) *renderer {
	t.Helper()
	r, err := newRenderer(context.Background(), RenderConfig{
		Tabs:          tabs,
		PageTimeout:   timeout,
		MaxBody:       renderMaxBody,
		UserAgent:     renderUA,
		Resolve:       s.resolve(),
		AllowLoopback: true,
		ResolveOnly:   true,
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
	if _, err := r.Render(context.Background(), "http://js.example/"); fetch.ClassOf(err) != fetch.ClassCanceled {
		t.Errorf("Render after Close: %v, want class canceled", err)
	}
}

func TestRenderPages(t *testing.T) {
	needBrowser(t)
	baseline := runtime.NumGoroutine()
	s := newJSSite(t)
	// Generous: these pages take under a second, but a loaded CI machine
	// can be slow; the deadline itself is tested in TestRenderPageDeadline.
	const pageTimeout = 10 * time.Second
	r := startRenderer(t, s, 2, pageTimeout)

	// A plain fetch of the page sees only the placeholder.
	f := fetch.New(fetch.Config{UserAgent: renderUA, Resolve: s.resolve(), AllowLoopback: true})
	plain, err := f.Get(context.Background(), s.url("/js"))
	f.Close()
	if err != nil {
		t.Fatalf("plain fetch: %v", err)
	}
	if strings.Contains(string(plain.Body), "Rendered Town") || !strings.Contains(string(plain.Body), "static placeholder") {
		t.Fatalf("plain fetch body should hold only the placeholder:\n%s", plain.Body)
	}

	cases := []struct {
		name      string
		url       string
		class     fetch.Class // "" for success
		status    int
		finalPath string
		contains  []string
		lacks     []string
		errHas    string
		within    time.Duration
		atLeast   time.Duration
	}{
		{name: "javascript writes the DOM", url: s.url("/js"), status: 200, finalPath: "/js",
			contains: []string{`<div class="location">Rendered Town</div>`, "Price: 42", "<!DOCTYPE html>"},
			lacks:    []string{"static placeholder"}, within: pageTimeout},
		{name: "redirect followed", url: s.url("/redirect"), status: 200, finalPath: "/js",
			contains: []string{"Rendered Town"}, within: pageTimeout},
		{name: "not found keeps the response", url: s.url("/missing"), class: fetch.ClassStatus, status: 404,
			contains: []string{`<p class="why">gone</p>`}, within: pageTimeout},
		{name: "image is not html", url: s.url("/image"), class: fetch.ClassNotHTML, status: 200, within: pageTimeout},
		{name: "host outside resolve refused", url: "http://elsewhere.example:" + s.port + "/", class: fetch.ClassBlocked,
			errHas: "not among the resolve overrides", within: pageTimeout},
		{name: "private address refused by the guard", url: "http://priv.example:" + s.port + "/", class: fetch.ClassBlocked,
			errHas: "10.0.0.1 (private)", within: pageTimeout},
		{name: "https through the tunnel, untrusted certificate", url: "https://tls.example:" + s.tlsPort + "/js", class: fetch.ClassTLS,
			errHas: "ERR_CERT", within: pageTimeout},
		{name: "https host outside resolve refused at CONNECT", url: "https://elsewhere.example/", class: fetch.ClassBlocked,
			errHas: "not among the resolve overrides", within: pageTimeout},
		{name: "not http", url: "file:///etc/passwd", class: fetch.ClassURL, within: time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			resp, err := r.Render(context.Background(), tc.url)
			took := time.Since(start)
			if got := fetch.ClassOf(err); got != tc.class {
				t.Fatalf("class %q (err %v), want %q", got, err, tc.class)
			}
			if tc.errHas != "" && !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("error %q does not say %q", err, tc.errHas)
			}
			if took > tc.within || took < tc.atLeast {
				t.Errorf("took %v, want between %v and %v", took, tc.atLeast, tc.within)
			}
			if tc.status != 0 {
				if resp == nil {
					t.Fatalf("no response, want status %d", tc.status)
				}
				if resp.Status != tc.status {
					t.Errorf("status %d, want %d", resp.Status, tc.status)
				}
			}
			if tc.finalPath != "" && resp.URL != s.url(tc.finalPath) {
				t.Errorf("final URL %q, want %q", resp.URL, s.url(tc.finalPath))
			}
			if len(tc.contains)+len(tc.lacks) > 0 {
				if resp.ContentType != "text/html" {
					t.Errorf("content type %q", resp.ContentType)
				}
				for _, want := range tc.contains {
					if !strings.Contains(string(resp.Body), want) {
						t.Errorf("body lacks %q:\n%s", want, resp.Body)
					}
				}
				for _, bad := range tc.lacks {
					if strings.Contains(string(resp.Body), bad) {
						t.Errorf("body still holds %q", bad)
					}
				}
			}
		})
	}
	if !s.sawUA(renderUA) {
		t.Errorf("the site never saw User-Agent %q", renderUA)
	}

	t.Run("two tabs busy, a third waits", func(t *testing.T) {
		type result struct {
			resp *fetch.Response
			err  error
		}
		results := make(chan result, 3)
		for i := range 3 {
			go func() {
				resp, err := r.Render(context.Background(), s.url("/slow/"+strconv.Itoa(i)))
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
		resp, err := r.Render(context.Background(), s.url("/big"))
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Truncated || len(resp.Body) > renderMaxBody || !utf8.Valid(resp.Body) {
			t.Errorf("truncated %v, %d bytes (valid UTF-8 %v), want truncated to at most %d",
				resp.Truncated, len(resp.Body), utf8.Valid(resp.Body), renderMaxBody)
		}
	})

	st := r.Stats()
	t.Logf("browser pid %d: tree rss %.0f MiB, pss %.0f MiB; rendered %d, failed %d",
		st.PID, float64(st.RSS)/(1<<20), float64(st.PSS)/(1<<20), st.Rendered, st.Failed)
	if st.PID == 0 || st.RSS == 0 || st.PSS == 0 || st.PSS > st.RSS {
		t.Errorf("stats: pid %d rss %d pss %d, want all > 0 and pss <= rss", st.PID, st.RSS, st.PSS)
	}
	if st.Restarts != 0 {
		t.Errorf("restarts %d, want 0", st.Restarts)
	}
	shutDown(t, r, s, baseline)
}

func TestRenderPageDeadline(t *testing.T) {
	needBrowser(t)
	baseline := runtime.NumGoroutine()
	s := newJSSite(t)
	const pageTimeout = 3 * time.Second
	r := startRenderer(t, s, 1, pageTimeout)

	// The image of /hang never arrives, so the load event never fires.
	start := time.Now()
	_, err := r.Render(context.Background(), s.url("/hang"))
	took := time.Since(start)
	if fetch.ClassOf(err) != fetch.ClassTimeout {
		t.Fatalf("class %q (err %v), want timeout", fetch.ClassOf(err), err)
	}
	if took < pageTimeout || took > pageTimeout+3500*time.Millisecond {
		t.Errorf("took %v, want the %v deadline (plus closing the tab)", took, pageTimeout)
	}
	// The caller's own deadline, shorter than the page's, is a timeout too.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err = r.Render(ctx, s.url("/hang"))
	cancel()
	if fetch.ClassOf(err) != fetch.ClassTimeout {
		t.Errorf("caller deadline: class %q (err %v), want timeout", fetch.ClassOf(err), err)
	}
	// The tab is free again and the browser unharmed.
	if resp, err := r.Render(context.Background(), s.url("/js")); err != nil || !strings.Contains(string(resp.Body), "Rendered Town") {
		t.Errorf("render after timeouts: %v", err)
	}
	if st := r.Stats(); st.Restarts != 0 || st.Busy != 0 {
		t.Errorf("restarts %d busy %d, want 0 and 0", st.Restarts, st.Busy)
	}
	shutDown(t, r, s, baseline)
}

func TestRenderRestartsDeadBrowser(t *testing.T) {
	needBrowser(t)
	baseline := runtime.NumGoroutine()
	s := newJSSite(t)
	r := startRenderer(t, s, 1, 5*time.Second)

	if _, err := r.Render(context.Background(), s.url("/js")); err != nil {
		t.Fatalf("first render: %v", err)
	}
	old := r.Stats().PID
	if old == 0 {
		t.Fatal("no browser pid")
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatalf("kill browser %d: %v", old, err)
	}

	resp, err := r.Render(context.Background(), s.url("/js"))
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
	s.stop = make(chan struct{}) // the site's cleanup closes it again
	s.srv.Close()
	s.tls.Close()
	waitGoroutines(t, baseline, 5*time.Second)
}
