package supervisor

// The render pool's browser process: found on PATH, started with a fresh
// profile and the command line that keeps it from making requests of its
// own, started again when it dies, stopped when idle, and stopped for good
// with whatever of its process tree outlived it (renderproc.go).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"backfill/seconds"
)

// FindBrowser returns the browser a render node starts when
// RenderConfig.Exec is empty: the first on PATH of chromium-headless-shell,
// chrome-headless-shell, chromium, chromium-browser, google-chrome and
// google-chrome-stable.
func FindBrowser() (string, error) { return findBrowser() }

// browserNames are looked up on PATH, in order, when RenderConfig.Exec is
// empty. The headless shells come first: the same engine without the
// browser's windows, tab strip and services, it takes less than half the
// memory and CPU per page (BENCHMARKS.md, rendering).
var browserNames = []string{"chromium-headless-shell", "chrome-headless-shell", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

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
	actx, acancel := chromedp.NewExecAllocator(r.ctx, r.browserOptions(dir)...)
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithBrowserOption(
		chromedp.WithBrowserLogf(r.browserLog(slog.LevelDebug)),
		chromedp.WithBrowserErrorf(r.browserLog(slog.LevelDebug)),
	))
	b := &browserProc{ctx: bctx, stopBrowser: bcancel, stopAlloc: acancel, dir: dir}

	if err := b.connect(); err != nil {
		r.stop(b)
		return nil, fmt.Errorf("start %s: %w", r.cfg.Exec, err)
	}
	r.log.Debug("browser started", "pid", b.pid, "profile", dir)
	return b, nil
}

// browserOptions are the command line of a browser with profile dir: a
// headless browser that makes no request of its own but through the dead
// end, and runs as few processes as extraction needs.
func (r *renderer) browserOptions(dir string) []chromedp.ExecAllocatorOption {
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
	return opts
}

// connect waits for b's process to start and answer on DevTools, within
// renderStartTimeout, notes its pid and closes the tab it opened with.
func (b *browserProc) connect() error {
	var err error
	// The first Run starts the process and ties its life to b.ctx, so it
	// must get b.ctx itself; the start deadline is kept from outside.
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(b.ctx) }()
	t := time.NewTimer(renderStartTimeout)
	defer t.Stop()
	select {
	case err = <-done:
	case <-t.C:
		b.stopBrowser()
		<-done
		err = fmt.Errorf("no answer within %v", renderStartTimeout)
	}
	if err == nil {
		if c := chromedp.FromContext(b.ctx); c != nil && c.Browser != nil && c.Browser.Process() != nil {
			// The binary may be a script that starts the browser and
			// waits for it (Debian's chromium-headless-shell): the browser
			// is the process of the profile that is none of its children.
			b.pid = browserMain(c.Browser.Process().Pid, b.dir)
		} else {
			err = errors.New("no browser process")
		}
	}
	if err == nil {
		// The tab the browser opened with is none of the render's (each of
		// those is a profile of its own), and its renderer would idle
		// beside theirs.
		c := chromedp.FromContext(b.ctx)
		_, err = chromedp.CallBrowser(b.ctx, target.CloseTarget, target.CloseTargetParams{TargetID: c.Target.TargetID})
	}
	return err
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
