package supervisor

// The render pool: pages that need JavaScript are loaded in a headless
// Chromium driven over the DevTools protocol, and the DOM they leave behind
// is handed to the mappings as if it had been fetched.
//
// Data flow. Render takes a tab (a slot of a semaphore of Tabs), opens a new
// target in the current browser, navigates, waits for the load event and
// then for the network to go quiet (bounded), and serialises the DOM. The
// browser reaches the web only through renderProxy, a forward proxy on
// loopback whose every connection is dialed by the fetch package's guarded
// dialer: the same Resolve overrides (ports included), the same refusal of
// loopback, private and reserved addresses, for the page, its redirects, its
// scripts and its images alike. Chromium itself resolves no name at all
// (--host-resolver-rules maps every name to NOTFOUND; with a proxy it sends
// names to the proxy unresolved), so a DNS answer can never point it at an
// internal address behind the guard's back.
//
// Failure. The browser process is owned by the renderer: when it dies (the
// DevTools connection drops, its context ends, or a call says the connection
// is lost) the next Render starts a new one, counted in Stats.Restarts; a
// render that was cut short by the death is retried once on the new browser.
// Close kills the browser, kills any of its children that outlived it (found
// in /proc by the unique --user-data-dir they all carry), waits for them and
// removes the profile directory.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"backfill/fetch"
)

// ClassRender is the class of a page the browser could not render: the
// browser would not start or died, the tab crashed, the DevTools connection
// broke. Append only: it crosses the wire.
const ClassRender = "render"

// Defaults for RenderConfig fields left zero.
const (
	DefaultRenderTabs  = 2
	DefaultPageTimeout = 20 * time.Second
)

const (
	// A page counts as settled when no request of it has been in flight for
	// renderIdleQuiet after the load event; pages that never settle (polling,
	// long-lived requests) are taken as they are after renderIdleMax.
	renderIdleQuiet = 500 * time.Millisecond
	renderIdleMax   = 5 * time.Second
	renderIdlePoll  = 50 * time.Millisecond

	renderStartTimeout = 30 * time.Second // browser start, DevTools connection included
	renderRestartGap   = time.Second      // a browser that failed to start is not tried again sooner
	renderLeftoverMax  = 3 * time.Second  // how long Close hunts for outliving children
	renderProxyMaxFail = 1024             // remembered dial failures (for classifying load errors)

	// renderProxyHeader marks an answer made by the proxy itself, carrying
	// the fetch class of the failed dial.
	renderProxyHeader = "X-Backfill-Render-Proxy-Error"
)

// browserNames are looked up on PATH, in order, when RenderConfig.Exec is
// empty.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// RenderConfig configures a renderer. Zero values take the defaults.
type RenderConfig struct {
	Exec        string        // browser binary; default the first of browserNames on PATH
	Tabs        int           // pages rendered at once; default 2
	PageTimeout time.Duration // one page, navigation to serialised DOM; default 20s
	MaxBody     int64         // DOM bytes kept, more is truncated; default fetch.DefaultMaxBody
	UserAgent   string        // required; sent by the browser on every request

	// Resolve maps "host:port" to "ip:port" like fetch.Config.Resolve; the
	// proxy dials through it, so the port is honoured.
	Resolve       map[string]string
	AllowLoopback bool // permit 127.0.0.0/8 and ::1 (tests, demo)
	// ResolveOnly refuses every host:port not in Resolve: tests set it so
	// the browser, including its own background requests, reaches nothing
	// but the fixture servers.
	ResolveOnly bool

	Logger *slog.Logger // nil discards
}

// RenderStats is a snapshot of a renderer.
type RenderStats struct {
	Tabs     int   // size of the pool
	Busy     int   // tabs rendering now
	Waiting  int   // Render calls waiting for a free tab
	Rendered int64 // pages rendered
	Failed   int64 // renders that returned an error
	Restarts int64 // browsers started after the first
	PID      int   // the browser's process id; 0 while none runs

	// Memory of the browser's whole process tree, read from /proc. RSS
	// sums each process's resident set, so pages shared between the
	// processes (the binary, shared memory) count once per process: it
	// overstates, about 2.5× for an idle browser. PSS shares each page out
	// among the processes mapping it: the tree's real cost. PSS is 0 where
	// the kernel has no smaps_rollup.
	RSS uint64
	PSS uint64
}

// renderer is a bounded pool of tabs in one headless browser. Safe for
// concurrent use.
type renderer struct {
	cfg    RenderConfig
	log    *slog.Logger
	ctx    context.Context // parent of every browser; ended by Close
	cancel context.CancelFunc
	proxy  *renderProxy
	tabs   chan struct{} // a slot per tab being rendered

	busy, waiting    atomic.Int64
	rendered, failed atomic.Int64
	restarts         atomic.Int64
	pid              atomic.Int64

	mu       sync.Mutex // guards the fields below; held while a browser starts
	cur      *browserProc
	started  int64 // browsers started
	lastFail time.Time
	lastErr  error
	closed   bool

	closeOnce sync.Once
	closeErr  error
}

// browserProc is one running browser.
type browserProc struct {
	ctx         context.Context    // the browser's chromedp context; done when it is gone
	stopBrowser context.CancelFunc // kills the process and waits for it
	stopAlloc   context.CancelFunc // ends the allocator and waits for its goroutines
	pid         int
	dir         string // its --user-data-dir
}

// findBrowser returns the first browser binary of browserNames on PATH.
func findBrowser() (string, error) {
	for _, n := range browserNames {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no browser found on PATH (looked for %s)", strings.Join(browserNames, ", "))
}

// newRenderer starts the proxy and the browser. The browser lives until ctx
// ends or Close is called; Close must be called either way, to remove the
// profile directory and stop the proxy.
func newRenderer(ctx context.Context, cfg RenderConfig) (*renderer, error) {
	if cfg.UserAgent == "" {
		return nil, errors.New("renderer: no user agent")
	}
	if cfg.Tabs < 0 || cfg.PageTimeout < 0 || cfg.MaxBody < 0 {
		return nil, fmt.Errorf("renderer: tabs %d, page timeout %v and max body %d must not be negative", cfg.Tabs, cfg.PageTimeout, cfg.MaxBody)
	}
	if cfg.Tabs == 0 {
		cfg.Tabs = DefaultRenderTabs
	}
	if cfg.PageTimeout == 0 {
		cfg.PageTimeout = DefaultPageTimeout
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = fetch.DefaultMaxBody
	}
	if cfg.Exec == "" {
		p, err := findBrowser()
		if err != nil {
			return nil, fmt.Errorf("renderer: %w", err)
		}
		cfg.Exec = p
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "renderer")
	proxy, err := newRenderProxy(cfg, log)
	if err != nil {
		return nil, fmt.Errorf("renderer: %w", err)
	}
	r := &renderer{cfg: cfg, log: log, proxy: proxy, tabs: make(chan struct{}, cfg.Tabs)}
	r.ctx, r.cancel = context.WithCancel(ctx)
	if _, err := r.browser(); err != nil {
		r.Close()
		return nil, fmt.Errorf("renderer: %w", err)
	}
	log.Info("renderer started", "browser", cfg.Exec, "tabs", cfg.Tabs, "pid", r.pid.Load(), "proxy", proxy.addr)
	return r, nil
}

// Render loads rawURL in a tab and returns the DOM it ends with as a UTF-8
// text/html body. It waits for a free tab until ctx ends. Failures are
// *fetch.Error: ClassTimeout when the page misses its deadline, ClassRender
// when the browser fails, the proxy's class (blocked-address, dns,
// connect…) when the page could not be reached, ClassStatus (with the
// Response) for a non-2xx answer and ClassNotHTML for a document that is
// not HTML.
func (r *renderer) Render(ctx context.Context, rawURL string) (*fetch.Response, error) {
	resp, err := r.render(ctx, rawURL)
	if err != nil {
		r.failed.Add(1)
		r.log.Debug("render failed", "url", rawURL, "err", err)
	} else {
		r.rendered.Add(1)
	}
	return resp, err
}

func (r *renderer) render(ctx context.Context, rawURL string) (*fetch.Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, &fetch.Error{Class: fetch.ClassURL, URL: rawURL, Err: err}
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, &fetch.Error{Class: fetch.ClassURL, URL: rawURL, Err: errors.New("not an http(s) URL with a host")}
	}

	r.waiting.Add(1)
	select {
	case r.tabs <- struct{}{}:
		r.waiting.Add(-1)
	case <-ctx.Done():
		r.waiting.Add(-1)
		return nil, r.callerErr(ctx, rawURL, "waiting for a tab")
	case <-r.ctx.Done():
		r.waiting.Add(-1)
		return nil, &fetch.Error{Class: fetch.ClassCanceled, URL: rawURL, Err: errors.New("renderer closed")}
	}
	r.busy.Add(1)
	defer func() {
		r.busy.Add(-1)
		<-r.tabs
	}()

	for attempt := 0; ; attempt++ {
		b, err := r.browser()
		if err != nil {
			if r.ctx.Err() != nil {
				return nil, &fetch.Error{Class: fetch.ClassCanceled, URL: rawURL, Err: errors.New("renderer closed")}
			}
			return nil, &fetch.Error{Class: ClassRender, URL: rawURL, Err: err}
		}
		resp, err, died := r.renderOn(ctx, b, rawURL)
		if died {
			r.retire(b)
			if attempt == 0 && ctx.Err() == nil && r.ctx.Err() == nil {
				r.log.Warn("browser died during a render; retrying on a new browser", "url", rawURL, "err", err)
				continue
			}
		}
		return resp, err
	}
}

// callerErr classifies the end of the caller's context.
func (r *renderer) callerErr(ctx context.Context, rawURL, doing string) *fetch.Error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &fetch.Error{Class: fetch.ClassTimeout, URL: rawURL, Err: fmt.Errorf("deadline passed while %s", doing)}
	}
	return &fetch.Error{Class: fetch.ClassCanceled, URL: rawURL, Err: fmt.Errorf("canceled while %s", doing)}
}

// browser returns the running browser, starting one when there is none or
// the last one died.
func (r *renderer) browser() (*browserProc, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.ctx.Err() != nil {
		return nil, errors.New("renderer closed")
	}
	if b := r.cur; b != nil {
		if b.ctx.Err() == nil {
			return b, nil
		}
		r.cur = nil
		r.pid.Store(0)
		r.log.Warn("browser died; starting a new one", "pid", b.pid)
		r.stop(b)
	}
	if !r.lastFail.IsZero() && time.Since(r.lastFail) < renderRestartGap {
		return nil, r.lastErr
	}
	b, err := r.start()
	if err != nil {
		r.lastFail, r.lastErr = time.Now(), err
		r.log.Error("browser did not start", "browser", r.cfg.Exec, "err", err)
		return nil, err
	}
	r.lastFail, r.lastErr = time.Time{}, nil
	if r.started > 0 {
		r.restarts.Add(1)
	}
	r.started++
	r.cur = b
	r.pid.Store(int64(b.pid))
	return b, nil
}

// retire stops b if it is still the current browser, so the next render
// starts a new one.
func (r *renderer) retire(b *browserProc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != b {
		return // already replaced (or Close took it)
	}
	r.cur = nil
	r.pid.Store(0)
	r.log.Warn("browser lost; starting a new one on the next render", "pid", b.pid)
	r.stop(b)
}

// start launches a browser with a fresh profile directory.
func (r *renderer) start() (*browserProc, error) {
	dir, err := os.MkdirTemp("", "backfill-render-")
	if err != nil {
		return nil, fmt.Errorf("browser profile: %w", err)
	}
	opts := append([]chromedp.ExecAllocatorOption(nil), chromedp.DefaultExecAllocatorOptions[:]...)
	opts = append(opts,
		chromedp.ExecPath(r.cfg.Exec),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.UserDataDir(dir),
		chromedp.UserAgent(r.cfg.UserAgent),
		chromedp.ProxyServer("http://"+r.proxy.addr),
		// Loopback is proxied too: the proxy decides what may be reached.
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		// The browser resolves nothing itself; names go to the proxy.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
		chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-crash-reporter", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("disable-notifications", true),
		// A page that grows its JavaScript heap without end crashes its own
		// tab (ClassRender), not the machine.
		chromedp.Flag("js-flags", "--max-old-space-size=256"),
	)
	if os.Getuid() == 0 {
		// The sandbox refuses to run as root.
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, acancel := chromedp.NewExecAllocator(r.ctx, opts...)
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithBrowserOption(
		chromedp.WithBrowserLogf(r.browserLog(slog.LevelDebug)),
		chromedp.WithBrowserErrorf(r.browserLog(slog.LevelDebug)),
	))
	b := &browserProc{ctx: bctx, stopBrowser: bcancel, stopAlloc: acancel, dir: dir}

	// The first Run starts the process and ties its life to bctx, so it
	// must get bctx itself; the start deadline is kept from outside.
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(bctx) }()
	t := time.NewTimer(renderStartTimeout)
	defer t.Stop()
	select {
	case err = <-done:
	case <-t.C:
		bcancel()
		<-done
		err = fmt.Errorf("no answer within %v", renderStartTimeout)
	}
	if err == nil {
		if c := chromedp.FromContext(bctx); c != nil && c.Browser != nil && c.Browser.Process() != nil {
			b.pid = c.Browser.Process().Pid
		} else {
			err = errors.New("no browser process")
		}
	}
	if err != nil {
		r.stop(b)
		return nil, fmt.Errorf("start %s: %w", r.cfg.Exec, err)
	}
	r.log.Debug("browser started", "pid", b.pid, "profile", dir)
	return b, nil
}

func (r *renderer) browserLog(level slog.Level) func(string, ...any) {
	return func(format string, args ...any) {
		r.log.Log(context.Background(), level, "browser: "+fmt.Sprintf(format, args...))
	}
}

// stop kills b, waits for it, kills whatever of its process tree outlived
// it and removes its profile.
func (r *renderer) stop(b *browserProc) error {
	b.stopBrowser()
	b.stopAlloc()
	if n := killLeftovers(b.dir, renderLeftoverMax); n > 0 {
		r.log.Debug("browser children outlived it; killed", "count", n)
	}
	removeSingletonDir(b.dir)
	if err := os.RemoveAll(b.dir); err != nil {
		return fmt.Errorf("remove browser profile %s: %w", b.dir, err)
	}
	return nil
}

// removeSingletonDir removes the directory the browser made under TMPDIR
// for its singleton socket, which the profile links to: a browser that is
// killed leaves it behind, one per start.
func removeSingletonDir(profile string) {
	target, err := os.Readlink(filepath.Join(profile, "SingletonSocket"))
	if err != nil || !filepath.IsAbs(target) {
		return
	}
	dir := filepath.Dir(target)
	if base := filepath.Base(dir); strings.HasPrefix(base, "org.chromium.Chromium.") || strings.HasPrefix(base, "com.google.Chrome.") {
		os.RemoveAll(dir)
	}
}

// Stats returns a snapshot; RSS is read from /proc.
func (r *renderer) Stats() RenderStats {
	pid := int(r.pid.Load())
	st := RenderStats{
		Tabs:     cap(r.tabs),
		Busy:     int(r.busy.Load()),
		Waiting:  int(r.waiting.Load()),
		Rendered: r.rendered.Load(),
		Failed:   r.failed.Load(),
		Restarts: r.restarts.Load(),
		PID:      pid,
	}
	if pid > 0 {
		st.RSS, st.PSS = treeMemory(pid)
	}
	return st
}

// Close kills the browser and its children, waits for them, removes the
// profile directory and stops the proxy. Renders in progress fail with
// ClassCanceled. Safe to call more than once.
func (r *renderer) Close() error {
	r.closeOnce.Do(func() {
		r.cancel()
		r.mu.Lock()
		r.closed = true
		b := r.cur
		r.cur = nil
		r.pid.Store(0)
		var errs []error
		if b != nil {
			errs = append(errs, r.stop(b))
		}
		r.mu.Unlock()
		// Every render gives its tab back on the way out.
		for range cap(r.tabs) {
			r.tabs <- struct{}{}
		}
		errs = append(errs, r.proxy.close())
		r.closeErr = errors.Join(errs...)
		r.log.Info("renderer stopped", "rendered", r.rendered.Load(), "failed", r.failed.Load(), "restarts", r.restarts.Load())
	})
	return r.closeErr
}

// renderOn renders rawURL in a new tab of b. died reports that the browser
// was lost during the attempt.
func (r *renderer) renderOn(ctx context.Context, b *browserProc, rawURL string) (resp *fetch.Response, err error, died bool) {
	tctx, tcancel := chromedp.NewContext(b.ctx)
	defer tcancel() // closes the tab
	rctx, rcancel := context.WithTimeout(tctx, r.cfg.PageTimeout)
	defer rcancel()
	defer context.AfterFunc(ctx, rcancel)()
	start := time.Now()

	w := &pageWatch{inflight: make(map[network.RequestID]bool), last: start}
	fail := func(stage string, err error) (*fetch.Response, error, bool) {
		fe, died := r.classify(ctx, rctx, b, w, rawURL, stage, err)
		return nil, fe, died
	}
	if err := chromedp.Listen(rctx, w.event); err != nil {
		return fail("opening a tab", err)
	}
	nav, err := chromedp.Run(rctx, chromedp.NavigateResponse(rawURL))
	if err != nil {
		return fail("loading", err)
	}
	// Settling is a nicety: it stops in time to leave a fifth of the page
	// deadline for reading the DOM, which is then taken as it is.
	settle := renderIdleMax
	if dl, ok := rctx.Deadline(); ok {
		settle = min(settle, time.Until(dl)-r.cfg.PageTimeout/5)
	}
	if err := w.waitIdle(rctx, renderIdleQuiet, settle); err != nil {
		return fail("waiting for the network to settle", err)
	}
	dom, err := chromedp.Run(rctx, chromedp.Evaluate[domSnapshot](domScript(r.cfg.MaxBody)))
	if err != nil {
		return fail("reading the DOM", err)
	}

	resp = &fetch.Response{
		URL:         dom.URL,
		ContentType: "text/html",
		Charset:     "utf-8",
		Elapsed:     time.Since(start),
	}
	if !strings.HasPrefix(resp.URL, "http://") && !strings.HasPrefix(resp.URL, "https://") {
		resp.URL = rawURL
	}
	var mime string
	if nav != nil {
		resp.Status = int(nav.Status)
		resp.Header = headerOf(nav.Headers)
		mime = strings.ToLower(strings.TrimSpace(nav.MimeType))
		if nav.URL != "" && resp.URL == rawURL {
			resp.URL = nav.URL
		}
		if class := resp.Header.Get(renderProxyHeader); class != "" {
			// The proxy answered for a page it could not reach.
			return nil, &fetch.Error{Class: fetch.Class(class), URL: rawURL, Err: r.proxy.failure(w.document(rawURL), class)}, false
		}
	}
	// The page cut the DOM to MaxBody UTF-16 units; bytes can be more.
	body := []byte(dom.HTML)
	resp.Truncated = int64(dom.Length) > r.cfg.MaxBody
	if int64(len(body)) > r.cfg.MaxBody {
		body = trimUTF8(body[:r.cfg.MaxBody])
		resp.Truncated = true
	}
	resp.Body = body

	switch {
	case mime != "" && mime != "text/html" && mime != "application/xhtml+xml":
		return &fetch.Response{URL: resp.URL, Status: resp.Status, Header: resp.Header, ContentType: mime, Elapsed: resp.Elapsed},
			&fetch.Error{Class: fetch.ClassNotHTML, URL: rawURL, Err: fmt.Errorf("document is %s, not HTML", mime)}, false
	case resp.Status != 0 && (resp.Status < 200 || resp.Status > 299):
		return resp, &fetch.Error{Class: fetch.ClassStatus, URL: rawURL, Err: fmt.Errorf("status %d", resp.Status)}, false
	}
	return resp, nil, false
}

// classify turns a failed step into a *fetch.Error, and says whether the
// browser was lost.
func (r *renderer) classify(ctx, rctx context.Context, b *browserProc, w *pageWatch, rawURL, stage string, err error) (*fetch.Error, bool) {
	switch {
	case r.ctx.Err() != nil:
		return &fetch.Error{Class: fetch.ClassCanceled, URL: rawURL, Err: errors.New("renderer closed")}, false
	case b.ctx.Err() != nil || lostBrowser(err):
		return &fetch.Error{Class: ClassRender, URL: rawURL, Err: fmt.Errorf("browser lost while %s: %w", stage, err)}, true
	case ctx.Err() != nil:
		return r.callerErr(ctx, rawURL, stage), false
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		return &fetch.Error{Class: fetch.ClassTimeout, URL: rawURL, Err: fmt.Errorf("page not rendered within %v (%s)", r.cfg.PageTimeout, stage)}, false
	case w.hasCrashed():
		return &fetch.Error{Class: ClassRender, URL: rawURL, Err: fmt.Errorf("tab crashed while %s", stage)}, false
	}
	var le *chromedp.LoadError
	if errors.As(err, &le) {
		doc := w.document(rawURL)
		if fe := r.proxy.lastFailure(doc); fe != nil {
			return &fetch.Error{Class: fe.Class, URL: rawURL, Err: fe}, false
		}
		return &fetch.Error{Class: netErrorClass(le.ErrorText), URL: rawURL, Err: err}, false
	}
	return &fetch.Error{Class: ClassRender, URL: rawURL, Err: fmt.Errorf("%s: %w", stage, err)}, false
}

// lostBrowser recognises errors that mean the DevTools connection or the
// browser process is gone.
func lostBrowser(err error) bool {
	if err == nil {
		return false
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "lost the connection to the browser") ||
		strings.Contains(s, "browser process exited") ||
		strings.Contains(s, "broken pipe")
}

// netErrorClass maps Chromium's net error texts to fetch classes.
func netErrorClass(text string) fetch.Class {
	t := strings.TrimPrefix(text, "net::")
	switch {
	case t == "ERR_NAME_NOT_RESOLVED" || t == "ERR_NAME_RESOLUTION_FAILED":
		return fetch.ClassDNS
	case t == "ERR_TIMED_OUT" || t == "ERR_CONNECTION_TIMED_OUT":
		return fetch.ClassTimeout
	case t == "ERR_TOO_MANY_REDIRECTS" || t == "ERR_INVALID_REDIRECT" || t == "ERR_UNSAFE_REDIRECT":
		return fetch.ClassRedirect
	case strings.HasPrefix(t, "ERR_CERT_") || strings.HasPrefix(t, "ERR_SSL_"):
		return fetch.ClassTLS
	case strings.HasPrefix(t, "ERR_CONNECTION_") || t == "ERR_ADDRESS_UNREACHABLE" ||
		t == "ERR_TUNNEL_CONNECTION_FAILED" || t == "ERR_PROXY_CONNECTION_FAILED" || t == "ERR_EMPTY_RESPONSE":
		return fetch.ClassConnect
	case t == "ERR_INVALID_HTTP_RESPONSE" || t == "ERR_CONTENT_LENGTH_MISMATCH" || t == "ERR_INCOMPLETE_CHUNKED_ENCODING" ||
		t == "ERR_RESPONSE_HEADERS_TOO_BIG" || t == "ERR_INVALID_CHUNKED_ENCODING":
		return fetch.ClassProtocol
	case t == "ERR_BLOCKED_BY_CLIENT" || t == "ERR_BLOCKED_BY_RESPONSE" || t == "ERR_ACCESS_DENIED":
		return fetch.ClassBlocked
	case t == "ERR_INVALID_URL" || t == "ERR_DISALLOWED_URL_SCHEME" || t == "ERR_UNKNOWN_URL_SCHEME":
		return fetch.ClassURL
	case t == "ERR_ABORTED":
		return fetch.ClassNotHTML // a download: the document was not displayable
	}
	return ClassRender
}

// domSnapshot is what domScript returns.
type domSnapshot struct {
	HTML   string `json:"html"`
	Length int    `json:"length"` // UTF-16 units of the whole serialisation
	URL    string `json:"url"`
}

// domScript serialises the document (doctype included), cut in the page to
// at most max UTF-16 units so a monstrous DOM never crosses the pipe whole.
func domScript(max int64) string {
	return `(() => {
	const d = document, n = d.documentElement;
	let h = n ? n.outerHTML : "";
	if (d.doctype) h = new XMLSerializer().serializeToString(d.doctype) + "\n" + h;
	const length = h.length;
	if (h.length > ` + strconv.FormatInt(max, 10) + `) h = h.slice(0, ` + strconv.FormatInt(max, 10) + `);
	return {html: h, length: length, url: String(d.location.href)};
})()`
}

// trimUTF8 drops a partial rune at the end of b.
func trimUTF8(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		r, size := utf8.DecodeLastRune(b)
		if r != utf8.RuneError || size != 1 {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

// headerOf converts DevTools headers (values may hold several lines).
func headerOf(h network.Headers) http.Header {
	if len(h) == 0 {
		return nil
	}
	out := make(http.Header, len(h))
	for k, v := range h {
		s, ok := v.(string)
		if !ok {
			s = fmt.Sprint(v)
		}
		for _, line := range strings.Split(s, "\n") {
			out.Add(k, strings.ToValidUTF8(line, "\uFFFD"))
		}
	}
	return out
}

// pageWatch follows one tab's requests, from the DevTools reader goroutine:
// its methods are short and only take the lock.
type pageWatch struct {
	mu       sync.Mutex
	inflight map[network.RequestID]bool
	last     time.Time // last request start or end
	frame    cdp.FrameID
	doc      string // the main frame's latest document request
	crashed  bool
}

func (w *pageWatch) event(ev any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		w.inflight[e.RequestID] = true
		w.last = time.Now()
		if e.Type == network.ResourceTypeDocument && e.Request != nil && (w.frame == "" || e.FrameID == w.frame) {
			w.frame = e.FrameID
			w.doc = e.Request.URL
		}
	case *network.EventLoadingFinished:
		delete(w.inflight, e.RequestID)
		w.last = time.Now()
	case *network.EventLoadingFailed:
		delete(w.inflight, e.RequestID)
		w.last = time.Now()
	case *inspector.EventTargetCrashed:
		w.crashed = true
	}
}

// waitIdle waits until no request has been in flight for quiet, or for
// max at most. Only ctx ending is an error.
func (w *pageWatch) waitIdle(ctx context.Context, quiet, max time.Duration) error {
	end := time.Now().Add(max)
	tick := time.NewTicker(renderIdlePoll)
	defer tick.Stop()
	for {
		w.mu.Lock()
		idle := len(w.inflight) == 0 && time.Since(w.last) >= quiet
		w.mu.Unlock()
		if idle || !time.Now().Before(end) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (w *pageWatch) hasCrashed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.crashed
}

// document is the URL the main frame last asked for, else fallback.
func (w *pageWatch) document(fallback string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.doc != "" {
		return w.doc
	}
	return fallback
}

// renderProxy is the browser's only way out: a forward proxy on loopback
// (plain HTTP requests and CONNECT tunnels) that dials through the fetch
// package's guard.
type renderProxy struct {
	addr    string
	ln      net.Listener
	srv     *http.Server
	fetcher *fetch.Fetcher
	rp      *httputil.ReverseProxy
	tr      *http.Transport
	cfg     RenderConfig
	log     *slog.Logger

	mu     sync.Mutex // guards closed, tunnels and wg.Add
	closed bool
	conns  map[net.Conn]struct{} // both ends of open tunnels
	wg     sync.WaitGroup        // Serve, handlers and tunnel pumps

	failMu sync.Mutex
	fails  map[string]*fetch.Error // last dial failure by lower-case host:port
}

func newRenderProxy(cfg RenderConfig, log *slog.Logger) (*renderProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("render proxy: %w", err)
	}
	p := &renderProxy{
		addr: ln.Addr().String(),
		ln:   ln,
		fetcher: fetch.New(fetch.Config{
			UserAgent:     cfg.UserAgent,
			Resolve:       cfg.Resolve,
			AllowLoopback: cfg.AllowLoopback,
		}),
		cfg:   cfg,
		log:   log,
		conns: make(map[net.Conn]struct{}),
		fails: make(map[string]*fetch.Error),
	}
	p.tr = &http.Transport{
		DialContext:            p.dial,
		DisableCompression:     true, // bytes pass through as the browser asked for them
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        30 * time.Second,
		ResponseHeaderTimeout:  fetch.DefaultHeaderTimeout,
		MaxResponseHeaderBytes: fetch.DefaultMaxHeaderBytes,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// A proxy request carries its absolute URL already.
			pr.Out.Host = pr.In.Host
		},
		Transport: p.tr,
		ErrorLog:  slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			p.refuse(w, err)
		},
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.srv.Serve(ln) // returns when close closes the listener
	}()
	return p, nil
}

// refuse answers a request the proxy could not carry out, with the fetch
// class in renderProxyHeader.
func (p *renderProxy) refuse(w http.ResponseWriter, err error) {
	class := fetch.ClassOf(err)
	if class == fetch.ClassOther {
		class = fetch.ClassConnect
	}
	w.Header().Set(renderProxyHeader, string(class))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusBadGateway)
	io.WriteString(w, err.Error())
}

func (p *renderProxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		http.Error(w, "proxy closed", http.StatusServiceUnavailable)
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()

	switch {
	case req.Method == http.MethodConnect:
		p.tunnel(w, req)
	case req.URL.Scheme == "http" && req.URL.Host != "":
		p.rp.ServeHTTP(w, req)
	default:
		http.Error(w, "only proxy requests are served", http.StatusBadRequest)
	}
}

// dial connects through the guard, honouring ResolveOnly, and remembers
// failures so a load error can be classified.
func (p *renderProxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	key := strings.ToLower(addr)
	if p.cfg.ResolveOnly && !p.inResolve(key) {
		err := &fetch.Error{Class: fetch.ClassBlocked, URL: addr, Err: errors.New("not among the resolve overrides")}
		p.noteFailure(key, err)
		p.log.Debug("render proxy refused", "addr", addr, "err", err)
		return nil, err
	}
	c, err := p.fetcher.DialContext(ctx, network, addr)
	if err != nil {
		var fe *fetch.Error
		if !errors.As(err, &fe) {
			fe = &fetch.Error{Class: fetch.ClassConnect, URL: addr, Err: err}
		}
		p.noteFailure(key, fe)
		p.log.Debug("render proxy dial failed", "addr", addr, "err", fe)
		return nil, fe
	}
	return c, nil
}

func (p *renderProxy) inResolve(key string) bool {
	for k := range p.cfg.Resolve {
		if strings.EqualFold(k, key) {
			return true
		}
	}
	return false
}

func (p *renderProxy) noteFailure(key string, err *fetch.Error) {
	p.failMu.Lock()
	defer p.failMu.Unlock()
	if len(p.fails) >= renderProxyMaxFail {
		clear(p.fails)
	}
	p.fails[key] = err
}

// lastFailure is the last dial failure for rawURL's host:port, if any.
func (p *renderProxy) lastFailure(rawURL string) *fetch.Error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	key := strings.ToLower(net.JoinHostPort(u.Hostname(), port))
	p.failMu.Lock()
	defer p.failMu.Unlock()
	return p.fails[key]
}

// failure explains a proxy-made answer for rawURL.
func (p *renderProxy) failure(rawURL, class string) error {
	if fe := p.lastFailure(rawURL); fe != nil {
		return fe
	}
	return fmt.Errorf("proxy could not reach the page (%s)", class)
}

// tunnel serves CONNECT: dial through the guard, then pump bytes both ways
// until either side closes.
func (p *renderProxy) tunnel(w http.ResponseWriter, req *http.Request) {
	up, err := p.dial(req.Context(), "tcp", req.Host)
	if err != nil {
		p.refuse(w, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		up.Close()
		down.Close()
		return
	}
	p.conns[up], p.conns[down] = struct{}{}, struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	closeBoth := func() {
		p.mu.Lock()
		delete(p.conns, up)
		delete(p.conns, down)
		p.mu.Unlock()
		up.Close()
		down.Close()
	}
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		closeBoth()
		p.wg.Done()
		return
	}
	go func() {
		defer p.wg.Done()
		io.Copy(down, up)
		closeBoth()
	}()
	io.Copy(up, brw.Reader) // buffered bytes first, then the connection
	closeBoth()
}

// close stops the proxy and waits for every goroutine it started.
func (p *renderProxy) close() error {
	p.mu.Lock()
	p.closed = true
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	err := p.srv.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
	p.tr.CloseIdleConnections()
	p.fetcher.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// The browser's process tree, read from /proc.

// procInfo is what /proc/PID/stat says about a process.
type procInfo struct {
	pid, ppid int
	state     byte
}

// readProcs lists the processes of the machine (Linux; empty elsewhere).
func readProcs() []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]procInfo, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold anything; the
		// fields after the last ')' are fixed.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		out = append(out, procInfo{pid: pid, ppid: ppid, state: f[0][0]})
	}
	return out
}

// treeMemory sums the resident and proportional set sizes of pid and all
// its descendants.
func treeMemory(pid int) (rss, pss uint64) {
	children := make(map[int][]int)
	for _, p := range readProcs() {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	page := uint64(os.Getpagesize())
	queue := []int{pid}
	seen := map[int]bool{}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		dir := "/proc/" + strconv.Itoa(p)
		if b, err := os.ReadFile(dir + "/statm"); err == nil {
			if f := strings.Fields(string(b)); len(f) > 1 {
				if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
					rss += n * page
				}
			}
		}
		if b, err := os.ReadFile(dir + "/smaps_rollup"); err == nil {
			for line := range strings.Lines(string(b)) {
				if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
					if f := strings.Fields(rest); len(f) > 0 {
						if kb, err := strconv.ParseUint(f[0], 10, 64); err == nil {
							pss += kb << 10
						}
					}
					break
				}
			}
		}
		queue = append(queue, children[p]...)
	}
	return rss, pss
}

// profileProcs lists the processes started with --user-data-dir=dir:
// Chromium passes it to every child, so it finds the tree even after the
// main process died and its children were reparented.
func profileProcs(dir string) []int {
	want := []byte("--user-data-dir=" + dir + "\x00")
	var pids []int
	self := os.Getpid()
	for _, p := range readProcs() {
		if p.pid == self || p.state == 'Z' {
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cmdline")
		if err != nil {
			continue
		}
		if strings.Contains(string(b)+"\x00", string(want)) {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// killLeftovers kills the processes of profile dir until none is seen for a
// few passes in a row (a child can fork as its parent dies), for at most
// limit. It returns how many it killed.
func killLeftovers(dir string, limit time.Duration) int {
	const quietPasses = 3
	deadline := time.Now().Add(limit)
	killed := 0
	for quiet := 0; quiet < quietPasses && time.Now().Before(deadline); {
		pids := profileProcs(dir)
		if len(pids) == 0 {
			quiet++
		} else {
			quiet = 0
		}
		for _, pid := range pids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		time.Sleep(10 * time.Millisecond) // a pass over /proc, not synchronisation
	}
	return killed
}
