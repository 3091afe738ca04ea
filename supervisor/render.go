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
// to go quiet (bounded), and serialises the DOM (renderpage.go). The
// browser never makes a request itself: the page's HTML is the one the
// supervisor already fetched, the requests the page goes on to make (its
// scripts, the data they load, the resource kinds its mappings allow) are
// made by the supervisor under the host's politeness and handed back, and
// everything else (images, fonts, favicons, beacons, prefetches,
// websockets...) is refused without a request. What the browser would send
// on its own goes to deadEnd, a proxy that refuses everything
// (renderproxy.go), and it resolves no name itself (--host-resolver-rules
// maps every name to NOTFOUND).
//
// Time. A page may spend PageTimeout rendering, not counting the time its
// requests spend waiting for their hosts' turns and being fetched, which
// is bounded by WaitMax (pageclock.go): a host's delay holds up a page, it
// does not make it fail.
//
// Failure. The browser process is owned by the renderer (browser.go): when
// it dies (the DevTools connection drops, its context ends, or a call says
// the connection is lost) the next Render starts a new one, counted in
// Stats.Restarts; a render that was cut short by the death is retried once
// on the new browser. Close kills the browser, kills any of its children
// that outlived it (found in /proc by the unique --user-data-dir they all
// carry), waits for them and removes the profile directory.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

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
