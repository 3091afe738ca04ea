package supervisor

// One page's render in a tab: loaded, left to settle, its DOM read and
// cut to size, and a failure at any step classified (a lost browser, a
// crashed tab, a deadline, a network error of the browser's).

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"backfill/fetch"
)

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
