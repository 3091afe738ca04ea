package supervisor

// The render pool: pages that need JavaScript are loaded in a headless
// Chromium driven over the DevTools protocol, and the DOM they leave behind
// is handed to the mappings as if it had been fetched.
//
// Data flow. Render takes a tab (a slot of a semaphore of Tabs), takes an
// idle target of the current browser or opens one (rendertab.go: a target
// renders page after page, cleared between them), has every request of the
// tab paused before it leaves (the Fetch domain, renderintercept.go),
// navigates to the page, waits for the load event and then for the network
// to go quiet (bounded), and serialises the DOM. The browser never makes a
// request itself: the page's HTML is the one the supervisor already
// fetched, the requests the page goes on to make (its scripts, the data
// they load, the resource kinds its mappings allow) are made by the
// supervisor under the host's politeness and handed back, and everything
// else (images, fonts, favicons, beacons, prefetches, websockets...) is
// refused without a request. What the browser would send on its own goes to deadEnd, a proxy
// that refuses everything (renderproxy.go), and it resolves no name itself
// (--host-resolver-rules maps every name to NOTFOUND).
//
// Time. A page may spend PageTimeout rendering, not counting the time its
// requests spend waiting for their hosts' turns and being fetched, which
// is bounded by WaitMax (pageclock.go): a host's delay holds up a page, it
// does not make it fail.
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
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"backfill/fetch"
	"backfill/seconds"
)

// ClassRender is the class of a page the browser could not render: the
// browser would not start or died, the tab crashed, the DevTools connection
// broke. Append only: it crosses the wire.
const ClassRender = "render"

// Defaults for RenderConfig fields left zero.
const (
	DefaultRenderTabs    = 2
	DefaultPageTimeout   = 20 * time.Second
	DefaultRenderWaitMax = 2 * time.Minute
)

const (
	// A page counts as settled when no request of it has been in flight for
	// renderIdleQuiet after the load event; pages that never settle (polling,
	// long-lived requests) are taken as they are after renderIdleMax. A
	// script's own requests keep it unsettled however long their hosts
	// make them wait; the quiet only covers a script's work between one
	// answer and its next request.
	renderIdleQuiet = 300 * time.Millisecond
	renderIdleMax   = 5 * time.Second
	renderIdlePoll  = 50 * time.Millisecond

	renderStartTimeout = 30 * time.Second // browser start, DevTools connection included
	renderRestartGap   = time.Second      // a browser that failed to start is not tried again sooner
	renderLeftoverMax  = 3 * time.Second  // how long Close hunts for outliving children
	renderBrowserIdle  = time.Minute      // an unused browser is stopped after this long (restLater)

	// renderMaxRequests bounds the requests one page may have made for it
	// (cache hits included); beyond, its requests are refused. A page that
	// needs more is a crawler trap, or not worth its hosts' time.
	renderMaxRequests = 64
	// renderCacheBytes bounds the bodies kept for pages to share (see
	// renderCache).
	renderCacheBytes = 16 << 20
)

// browserNames are looked up on PATH, in order, when RenderConfig.Exec is
// empty. The headless shells come first: the same engine without the
// browser's windows, tab strip and services, it takes less than half the
// memory and CPU per page (BENCHMARKS.md, rendering).
var browserNames = []string{"chromium-headless-shell", "chrome-headless-shell", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// RenderConfig configures a renderer. Zero values take the defaults.
type RenderConfig struct {
	Exec string // browser binary; default the first of browserNames on PATH
	Tabs int    // pages rendered at once; default 2
	// PageTimeout bounds one page, navigation to serialised DOM, not
	// counting the time its requests wait for their hosts and are fetched;
	// default 20s. WaitMax bounds that time, all the page's requests
	// together; default 2m.
	PageTimeout time.Duration
	WaitMax     time.Duration
	MaxBody     int64  // DOM bytes kept, more is truncated; default fetch.DefaultMaxBody
	UserAgent   string // required; what the page's scripts see as navigator.userAgent

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
	Opened   int64 // tabs opened; each renders pages until one fails (rendertab.go)
	PID      int   // the browser's process id; 0 while none runs

	// The requests of rendered pages: Fetched were handed to the
	// supervisor to make (each a request to its host, unless robots.txt
	// or the guard refused it), Shared were answered by an earlier page's
	// request for the same URL (renderCache), Blocked were refused without
	// a request (a resource kind no mapping allows, a method that sends
	// data, more than a page may make), and Strays are the browser's own
	// requests, which deadEnd refused.
	Fetched, Shared, Blocked, Strays int64

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
	proxy  *deadEnd
	cache  *renderCache
	tabs   chan struct{} // a slot per tab being rendered

	busy, waiting    atomic.Int64
	rendered, failed atomic.Int64
	fetched, shared  atomic.Int64
	blocked          atomic.Int64
	restarts         atomic.Int64
	opened           atomic.Int64
	pid              atomic.Int64

	mu       sync.Mutex // guards the fields below; held while a browser starts
	cur      *browserProc
	started  int64 // browsers started
	lastFail time.Time
	lastErr  error
	closed   bool
	// idleAfter is how long the browser may go without a render before it
	// is stopped (renderBrowserIdle); idle fires then. rested: the current
	// browser is gone because it was idle, so the next start is no
	// restart.
	idleAfter time.Duration
	idle      *time.Timer
	rested    bool

	bg sync.WaitGroup // releases of tabs (release)

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
	idle        []*tab // its tabs not rendering now; guarded by renderer.mu
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
	if cfg.Tabs < 0 || cfg.PageTimeout < 0 || cfg.WaitMax < 0 || cfg.MaxBody < 0 {
		return nil, fmt.Errorf("renderer: tabs %d, page timeout %v, wait %v and max body %d must not be negative", cfg.Tabs, cfg.PageTimeout, cfg.WaitMax, cfg.MaxBody)
	}
	if cfg.Tabs == 0 {
		cfg.Tabs = DefaultRenderTabs
	}
	if cfg.PageTimeout == 0 {
		cfg.PageTimeout = DefaultPageTimeout
	}
	if cfg.WaitMax == 0 {
		cfg.WaitMax = DefaultRenderWaitMax
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
	proxy, err := newDeadEnd(log)
	if err != nil {
		return nil, fmt.Errorf("renderer: %w", err)
	}
	r := &renderer{cfg: cfg, log: log, proxy: proxy, cache: newRenderCache(renderCacheBytes), tabs: make(chan struct{}, cfg.Tabs),
		idleAfter: renderBrowserIdle}
	r.ctx, r.cancel = context.WithCancel(ctx)
	if _, err := r.browser(); err != nil {
		r.Close()
		return nil, fmt.Errorf("renderer: %w", err)
	}
	log.Info("renderer started", "browser", cfg.Exec, "tabs", cfg.Tabs, "pid", r.pid.Load(), "proxy", proxy.addr)
	return r, nil
}

// renderJob is a page to render and how its requests are made.
type renderJob struct {
	// doc is the page as the supervisor fetched it (final URL, status,
	// headers, HTML decoded to UTF-8): the browser loads it from here.
	doc *fetch.Response
	// allow lists the resource kinds (etl.RenderResourceKinds) the
	// mappings of the page let the browser have, besides scripts and the
	// requests scripts make.
	allow []string
	// get makes one request of the page politely (Supervisor.subFetch):
	// it returns when the host's turn came and the answer is in.
	get func(ctx context.Context, rawURL string) (*fetch.Response, error)
}

// Render loads the page of job in a tab and returns the DOM it ends with
// as a UTF-8 text/html body, with the page's status and headers. It waits
// for a free tab until ctx ends. Failures are *fetch.Error: ClassTimeout
// when the page misses its deadline, ClassRender when the browser fails,
// ClassNotHTML for a document that is not HTML, ClassURL for one without
// an http(s) URL.
func (r *renderer) Render(ctx context.Context, job renderJob) (*fetch.Response, error) {
	start := time.Now()
	resp, err := r.render(ctx, job)
	if err != nil {
		r.failed.Add(1)
		r.log.Debug("render failed", "url", job.doc.URL, "error", err)
	} else {
		r.rendered.Add(1)
		r.log.Debug("page rendered", "url", job.doc.URL, seconds.Attr("took", time.Since(start)), seconds.Attr("tab", resp.Elapsed))
	}
	return resp, err
}

func (r *renderer) render(ctx context.Context, job renderJob) (*fetch.Response, error) {
	rawURL := job.doc.URL
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, &fetch.Error{Class: fetch.ClassURL, URL: rawURL, Err: err}
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, &fetch.Error{Class: fetch.ClassURL, URL: rawURL, Err: errors.New("not an http(s) URL with a host")}
	}
	if ct := job.doc.ContentType; ct != "text/html" && ct != "application/xhtml+xml" {
		return nil, &fetch.Error{Class: fetch.ClassNotHTML, URL: rawURL, Err: fmt.Errorf("document is %s, not HTML", ct)}
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
	var used *tab // handed back by release, with the tab slot
	var reuse bool
	defer func() { r.release(used, reuse) }()

	for attempt := 0; ; attempt++ {
		b, err := r.browser()
		if err != nil {
			if r.ctx.Err() != nil {
				return nil, &fetch.Error{Class: fetch.ClassCanceled, URL: rawURL, Err: errors.New("renderer closed")}
			}
			return nil, &fetch.Error{Class: ClassRender, URL: rawURL, Err: err}
		}
		t := r.takeTab(b)
		resp, err, died := r.renderOn(ctx, t, job)
		if died {
			t.cancel()
			r.retire(b)
			if attempt == 0 && ctx.Err() == nil && r.ctx.Err() == nil {
				r.log.Warn("browser died during a render; retrying on a new browser", "url", rawURL, "error", err)
				continue
			}
			return resp, err
		}
		used, reuse = t, err == nil
		return resp, err
	}
}

// takeTab returns an idle tab of b, or a new one.
func (r *renderer) takeTab(b *browserProc) *tab {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(b.idle); n > 0 {
		t := b.idle[n-1]
		b.idle = b.idle[:n-1]
		return t
	}
	r.opened.Add(1)
	return newTab(b)
}

// release gives a render's tab slot back, with its tab (nil when the
// browser died under it): a tab whose page went well is reset and kept for
// the next render, any other is closed. The reset and the closing, a few
// calls to the browser, are done off the caller's way, while the slot is
// still held.
func (r *renderer) release(t *tab, reuse bool) {
	r.busy.Add(-1)
	done := func() {
		<-r.tabs
		r.restLater()
	}
	if t == nil {
		done()
		return
	}
	r.bg.Go(func() {
		defer done()
		if reuse && t.pages < renderTabPages && r.ctx.Err() == nil {
			err := t.reset()
			if err == nil {
				r.mu.Lock()
				kept := r.cur == t.b && !r.closed
				if kept {
					t.b.idle = append(t.b.idle, t)
				}
				r.mu.Unlock()
				if kept {
					return
				}
			} else if r.ctx.Err() == nil {
				r.log.Debug("tab could not be reset; closing it", "error", err)
			}
		}
		t.cancel()
	})
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
		r.log.Error("browser did not start", "browser", r.cfg.Exec, "error", err)
		return nil, err
	}
	r.lastFail, r.lastErr = time.Time{}, nil
	if r.started > 0 && !r.rested {
		r.restarts.Add(1)
	}
	r.started++
	r.rested = false
	r.cur = b
	r.pid.Store(int64(b.pid))
	return b, nil
}

// restLater has the browser stopped once it has gone idleAfter without a
// render: a crawl renders in bursts, if at all, and an idle browser holds
// hundreds of megabytes. The next render starts one again.
func (r *renderer) restLater() {
	if r.busy.Load() > 0 || r.waiting.Load() > 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.cur == nil {
		return
	}
	if r.idle != nil {
		r.idle.Stop()
	}
	r.idle = time.AfterFunc(r.idleAfter, r.rest)
}

// rest stops the browser if no render has started since restLater.
func (r *renderer) rest() {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A render takes busy before it asks for the browser (under mu), so
	// none is using this one when busy and waiting are 0 here.
	b := r.cur
	if r.closed || b == nil || r.busy.Load() > 0 || r.waiting.Load() > 0 {
		return
	}
	r.cur = nil
	r.rested = true
	r.log.Debug("browser idle; stopped until the next render", "pid", b.pid, seconds.Attr("idle", r.idleAfter))
	if err := r.stop(b); err != nil {
		r.log.Warn("stopping the idle browser", "error", err)
	}
	r.pid.Store(0) // once it is gone: Stats says no browser runs
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
		// Loopback goes to the dead end too: nothing is bypassed.
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		// The browser resolves nothing itself; names go to the proxy.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
		// Fewer of the browser's own requests (each refused by the dead
		// end): chromedp's defaults (Translate, BlinkGenPropertyTrees) and
		// the services that call home.
		chromedp.Flag("disable-features", "Translate,BlinkGenPropertyTrees,NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,AutofillServerCommunication,CertificateTransparencyComponentUpdater,"+
			// The processes extraction does not need: the omnibox's
			// pages (a renderer of their own, though no window is
			// shown), a spare renderer kept warm for the next site, and
			// a renderer per site (see renderer-process-limit below); and
			// the page a tab left, kept alive in case it comes back.
			"WebUIOmniboxPopup,WebUIOmniboxFullPopup,WebUIOmniboxAimPopup,SpareRendererForSitePerProcess,IsolateOrigins,site-per-process,BackForwardCache"),
		// The network service runs in the browser process, not in a
		// process of its own: a crash of it is a crash of the browser,
		// which the renderer survives anyway (restart).
		chromedp.Flag("enable-features", "NetworkService,NetworkServiceInProcess2"),
		// Site isolation keeps one site's data out of another's renderer;
		// here no page has anything of another site to take (every tab is
		// a profile of its own, no credentials, every answer a public
		// page), and a page's renderer would be started again at each
		// navigation to another site. A page's crash still takes only its
		// own tab down: tabs are profiles apart, and profiles never share
		// a renderer.
		chromedp.Flag("disable-site-isolation-trials", true),
		chromedp.Flag("renderer-process-limit", strconv.Itoa(r.cfg.Tabs)),
		// With --disable-gpu the GPU process only composites in software;
		// it runs as a thread of the browser instead of a process.
		chromedp.Flag("in-process-gpu", true),
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
			// The binary may be a script that starts the browser and
			// waits for it (Debian's chromium-headless-shell): the browser
			// is the process of the profile that is none of its children.
			b.pid = browserMain(c.Browser.Process().Pid, dir)
		} else {
			err = errors.New("no browser process")
		}
	}
	if err == nil {
		// The tab the browser opened with is none of the render's (each of
		// those is a profile of its own), and its renderer would idle
		// beside theirs.
		c := chromedp.FromContext(bctx)
		_, err = chromedp.CallBrowser(bctx, target.CloseTarget, target.CloseTargetParams{TargetID: c.Target.TargetID})
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
	// Its tabs went with it; their contexts end without a call.
	for _, t := range b.idle {
		t.cancel()
	}
	b.idle = nil
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
		Opened:   r.opened.Load(),
		PID:      pid,
		Fetched:  r.fetched.Load(),
		Shared:   r.shared.Load(),
		Blocked:  r.blocked.Load(),
		Strays:   r.proxy.strays.Load(),
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
		if r.idle != nil {
			r.idle.Stop()
		}
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
		r.bg.Wait()
		errs = append(errs, r.proxy.close())
		r.closeErr = errors.Join(errs...)
		r.log.Info("renderer stopped", "rendered", r.rendered.Load(), "failed", r.failed.Load(), "restarts", r.restarts.Load(),
			"requests", r.fetched.Load(), "shared", r.shared.Load(), "blocked", r.blocked.Load(), "strays", r.proxy.strays.Load())
	})
	return r.closeErr
}

// renderOn renders job's page in tab t. died reports that the
// browser was lost during the attempt.
func (r *renderer) renderOn(ctx context.Context, t *tab, job renderJob) (resp *fetch.Response, err error, died bool) {
	rawURL := job.doc.URL
	b := t.b
	t.pages++
	rctx, rcancel := context.WithCancelCause(t.ctx)
	stopCaller := context.AfterFunc(ctx, func() { rcancel(context.Cause(ctx)) })
	clock := newPageClock(r.cfg.PageTimeout, r.cfg.WaitMax)
	stopClock := clock.watch(rctx, rcancel)
	var ic *interceptor
	// Ending a render: stop its requests' handlers and wait for them
	// before the tab goes, so none is left talking to a closed tab.
	defer func() {
		stopCaller()
		rcancel(nil)
		if ic != nil {
			ic.wait()
		}
		stopClock()
	}()

	w := &pageWatch{inflight: make(map[network.RequestID]bool), last: time.Now()}
	fail := func(stage string, err error) (*fetch.Response, error, bool) {
		fe, died := r.classify(ctx, rctx, b, w, rawURL, stage, err)
		return nil, fe, died
	}
	if err := t.open(rctx); err != nil {
		return fail("opening a tab", err)
	}
	if err := chromedp.Listen(rctx, w.event); err != nil {
		return fail("opening a tab", err)
	}
	if ic, err = r.intercept(rctx, job, clock, t.touched); err != nil {
		return fail("intercepting the tab's requests", err)
	}
	if _, err := chromedp.Run(rctx, chromedp.NavigateResponse(rawURL)); err != nil {
		return fail("loading", err)
	}
	// Settling is a nicety: it stops in time to leave a fifth of the page
	// deadline for reading the DOM, which is then taken as it is.
	settle := min(renderIdleMax, r.cfg.PageTimeout-clock.active()-r.cfg.PageTimeout/5)
	if err := w.waitIdle(rctx, clock, renderIdleQuiet, settle); err != nil {
		return fail("waiting for the network to settle", err)
	}
	dom, err := chromedp.Run(rctx, chromedp.Evaluate[domSnapshot](domScript(r.cfg.MaxBody)))
	if err != nil {
		return fail("reading the DOM", err)
	}

	resp = &fetch.Response{
		URL:         dom.URL,
		Status:      job.doc.Status,
		Header:      job.doc.Header,
		ContentType: "text/html",
		Charset:     "utf-8",
		Elapsed:     clock.elapsed(),
		RemoteAddr:  job.doc.RemoteAddr,
		Redirects:   job.doc.Redirects,
	}
	if !strings.HasPrefix(resp.URL, "http://") && !strings.HasPrefix(resp.URL, "https://") {
		resp.URL = rawURL
	}
	// The page cut the DOM to MaxBody UTF-16 units; bytes can be more.
	body := []byte(dom.HTML)
	resp.Truncated = int64(dom.Length) > r.cfg.MaxBody
	if int64(len(body)) > r.cfg.MaxBody {
		body = trimUTF8(body[:r.cfg.MaxBody])
		resp.Truncated = true
	}
	resp.Body = body
	return resp, nil, false
}

// classify turns a failed step into a *fetch.Error, and says whether the
// browser was lost.
func (r *renderer) classify(ctx, rctx context.Context, b *browserProc, w *pageWatch, rawURL, stage string, err error) (*fetch.Error, bool) {
	var late *pageLate
	switch {
	case r.ctx.Err() != nil:
		return &fetch.Error{Class: fetch.ClassCanceled, URL: rawURL, Err: errors.New("renderer closed")}, false
	case b.ctx.Err() != nil || lostBrowser(err):
		return &fetch.Error{Class: ClassRender, URL: rawURL, Err: fmt.Errorf("browser lost while %s: %w", stage, err)}, true
	case ctx.Err() != nil:
		return r.callerErr(ctx, rawURL, stage), false
	case errors.As(context.Cause(rctx), &late):
		return &fetch.Error{Class: fetch.ClassTimeout, URL: rawURL, Err: fmt.Errorf("%v (%s)", late, stage)}, false
	case w.hasCrashed():
		return &fetch.Error{Class: ClassRender, URL: rawURL, Err: fmt.Errorf("tab crashed while %s", stage)}, false
	}
	var le *chromedp.LoadError
	if errors.As(err, &le) {
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
	crashed  bool
}

func (w *pageWatch) event(ev any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		w.inflight[e.RequestID] = true
		w.last = time.Now()
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
// max at most of the page's own time (a request waiting for its host's
// turn does not count: see pageClock). Only ctx ending is an error.
func (w *pageWatch) waitIdle(ctx context.Context, clock *pageClock, quiet, max time.Duration) error {
	end := clock.active() + max
	tick := time.NewTicker(renderIdlePoll)
	defer tick.Stop()
	for {
		w.mu.Lock()
		idle := len(w.inflight) == 0 && time.Since(w.last) >= quiet
		w.mu.Unlock()
		if idle || clock.active() >= end {
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
