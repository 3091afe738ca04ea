package supervisor

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/chromedp/cdproto/cdp"
	cdpfetch "github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"backfill/etl"
	"backfill/fetch"
)

// Every request of a tab is paused before it leaves the browser (the
// DevTools Fetch domain, at the request stage) and answered here, so the
// browser itself never touches the network:
//
//   - the page's own document is answered with the HTML the supervisor
//     fetched (renderJob.doc): no second request for it;
//   - scripts, the GET requests scripts make (XHR, fetch), later
//     navigations of the page itself, and the kinds of resource the
//     page's mappings allow (etl.RenderResourceKinds) are made by the
//     supervisor (renderJob.get: robots.txt, the host's delay, one request
//     at a time per host, the address guard) and answered with what came
//     back, or failed as it failed; an answer an earlier page already had
//     is shared (renderCache);
//   - a CORS preflight for a GET is answered here: the GET that follows is
//     an ordinary request, whose answer the browser checks as it would;
//   - everything else is failed without a request: images, fonts,
//     stylesheets, media and frames unless a mapping allows them, and
//     always favicons, beacons and pings, prefetches, manifests,
//     websockets, event streams, requests that send data (POST, PUT...),
//     and a page's requests beyond renderMaxRequests.

// allowedAlways are the resource types every page may have fetched.
var allowedAlways = map[network.ResourceType]bool{
	network.ResourceTypeScript: true,
	network.ResourceTypeXHR:    true,
	network.ResourceTypeFetch:  true,
}

// resourceTypes are the browser's resource types of each kind a mapping
// may allow. Frame documents are told from the page's own by their frame.
var resourceTypes = map[string][]network.ResourceType{
	etl.ResourceStylesheet: {network.ResourceTypeStylesheet},
	etl.ResourceImage:      {network.ResourceTypeImage},
	etl.ResourceFont:       {network.ResourceTypeFont},
	etl.ResourceMedia:      {network.ResourceTypeMedia, network.ResourceTypeTextTrack},
	etl.ResourceFrame:      {network.ResourceTypeDocument},
}

// interceptor answers the paused requests of one tab. Each is answered on
// a goroutine of its own, since a request may wait for its host's turn;
// wait returns once all have finished (after the render's context ended,
// they finish at once).
type interceptor struct {
	r     *renderer
	ctx   context.Context // the render's: calls to the tab go through it
	job   renderJob
	clock *pageClock
	allow map[network.ResourceType]bool
	// documentSeen is told the URL of every document the tab is asked for
	// (the page's, its frames', its navigations'): their origins' storage
	// is cleared before the tab renders another page.
	documentSeen func(rawURL string)
	wg           sync.WaitGroup

	mu        sync.Mutex
	docServed bool        // the page's document was asked for
	mainFrame cdp.FrameID // its frame
	requests  int         // requests handed to the supervisor or the cache
}

// intercept pauses every request of the tab of ctx and starts answering
// them.
func (r *renderer) intercept(ctx context.Context, job renderJob, clock *pageClock, documentSeen func(string)) (*interceptor, error) {
	ic := &interceptor{r: r, ctx: ctx, job: job, clock: clock, allow: make(map[network.ResourceType]bool), documentSeen: documentSeen}
	frames := false
	for _, k := range job.allow {
		for _, t := range resourceTypes[k] {
			ic.allow[t] = true
		}
		frames = frames || k == etl.ResourceFrame
	}
	if !frames {
		delete(ic.allow, network.ResourceTypeDocument)
	}
	paused := chromedp.Events(ctx, cdpfetch.RequestPaused) // subscribed from here on
	if _, err := chromedp.Call(ctx, cdpfetch.Enable, cdpfetch.EnableParams{
		Patterns: []*cdpfetch.RequestPattern{{URLPattern: "*", RequestStage: cdpfetch.RequestStageRequest}},
	}); err != nil {
		return nil, err
	}
	ic.wg.Add(1)
	go func() {
		defer ic.wg.Done()
		for ev, err := range paused {
			if err != nil {
				return // the render ended, or the tab went
			}
			ic.wg.Add(1)
			go func() {
				defer ic.wg.Done()
				ic.answer(ev)
			}()
		}
	}()
	return ic, nil
}

// wait returns when every paused request has been answered or dropped.
func (ic *interceptor) wait() { ic.wg.Wait() }

// answer decides what becomes of one paused request.
func (ic *interceptor) answer(ev cdpfetch.EventRequestPaused) {
	req := ev.Request
	if req == nil {
		return
	}
	typ := ev.ResourceType
	if typ == network.ResourceTypeDocument {
		ic.documentSeen(req.URL)
		switch ic.document(ev.FrameID) {
		case docPage:
			ic.fulfill(ev, ic.job.doc)
			return
		case docNavigation:
			typ = "" // the page going elsewhere: fetched like a script's request
		}
	}
	if req.Method == http.MethodOptions && header(req.Headers, "Access-Control-Request-Method") != "" {
		ic.preflight(ev)
		return
	}
	switch {
	case req.Method != http.MethodGet:
		ic.block(ev, req.Method+" sends data")
	case prefetch(req.Headers):
		ic.block(ev, "a prefetch")
	case typ != "" && !allowedAlways[typ] && !ic.allow[typ]:
		ic.block(ev, "no mapping of the page allows "+strings.ToLower(string(typ))+" requests")
	case !httpURL(req.URL):
		ic.block(ev, "not an http(s) URL")
	case !ic.count():
		ic.block(ev, fmt.Sprintf("the page made more than %d requests", renderMaxRequests))
	default:
		ic.fetch(ev)
	}
}

// What a document request is.
const (
	docPage       = iota // the page itself: answered with the fetched HTML
	docNavigation        // the page's frame going elsewhere later
	docFrame             // the document of a frame in the page
)

// document classifies a document request by its frame: the first one
// asked for is the page, and its frame the page's frame.
func (ic *interceptor) document(frame cdp.FrameID) int {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	switch {
	case !ic.docServed:
		ic.docServed, ic.mainFrame = true, frame
		return docPage
	case frame == ic.mainFrame:
		return docNavigation
	}
	return docFrame
}

// count takes one of the page's renderMaxRequests, if any is left.
func (ic *interceptor) count() bool {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.requests >= renderMaxRequests {
		return false
	}
	ic.requests++
	return true
}

// fetch has the supervisor make the request (or shares an earlier page's
// answer) and hands the answer to the browser.
func (ic *interceptor) fetch(ev cdpfetch.EventRequestPaused) {
	rawURL := ev.Request.URL
	if i := strings.IndexByte(rawURL, '#'); i >= 0 {
		rawURL = rawURL[:i]
	}
	ic.clock.send()
	resp, err, shared := ic.r.cache.get(ic.ctx, rawURL, ic.job.get)
	ic.clock.back()
	if shared {
		ic.r.shared.Add(1)
	} else {
		ic.r.fetched.Add(1)
	}
	if resp == nil {
		ic.r.log.Debug("page request failed", "url", rawURL, "type", ev.ResourceType, "error", err)
		ic.fail(ev, failReason(err))
		return
	}
	// A non-2xx status or a body that is not text still goes to the
	// browser as the site sent it.
	ic.r.log.Debug("page request answered", "url", rawURL, "type", ev.ResourceType, "status", resp.Status, "shared", shared)
	ic.fulfill(ev, resp)
}

// fulfill answers the request with resp. Its body is as the fetcher kept
// it: decoded, and text made UTF-8, so the headers that described the
// bytes on the wire are dropped or rewritten.
func (ic *interceptor) fulfill(ev cdpfetch.EventRequestPaused, resp *fetch.Response) {
	_, err := chromedp.Call(ic.ctx, cdpfetch.FulfillRequest, cdpfetch.FulfillRequestParams{
		RequestID:       ev.RequestID,
		ResponseCode:    int64(resp.Status),
		ResponseHeaders: fulfilledHeaders(resp),
		Body:            resp.Body,
	})
	if err != nil && ic.ctx.Err() == nil {
		ic.r.log.Debug("answering a page request failed", "url", ev.Request.URL, "error", err)
	}
}

// preflight answers a CORS preflight. A GET or HEAD is let through: the
// request that follows is made as any GET is, and the browser checks its
// answer's own CORS headers. Anything else would send data, and is
// refused.
func (ic *interceptor) preflight(ev cdpfetch.EventRequestPaused) {
	h := ev.Request.Headers
	switch strings.ToUpper(strings.TrimSpace(header(h, "Access-Control-Request-Method"))) {
	case http.MethodGet, http.MethodHead:
	default:
		ic.block(ev, "preflight of a request that sends data")
		return
	}
	hdr := []*cdpfetch.HeaderEntry{
		{Name: "Access-Control-Allow-Methods", Value: "GET, HEAD"},
		{Name: "Access-Control-Max-Age", Value: "600"},
		{Name: "Vary", Value: "Origin"},
	}
	if o := header(h, "Origin"); o != "" {
		hdr = append(hdr, &cdpfetch.HeaderEntry{Name: "Access-Control-Allow-Origin", Value: o},
			&cdpfetch.HeaderEntry{Name: "Access-Control-Allow-Credentials", Value: "true"})
	}
	if rh := header(h, "Access-Control-Request-Headers"); rh != "" {
		hdr = append(hdr, &cdpfetch.HeaderEntry{Name: "Access-Control-Allow-Headers", Value: rh})
	}
	_, err := chromedp.Call(ic.ctx, cdpfetch.FulfillRequest, cdpfetch.FulfillRequestParams{
		RequestID: ev.RequestID, ResponseCode: http.StatusNoContent, ResponseHeaders: hdr,
	})
	if err != nil && ic.ctx.Err() == nil {
		ic.r.log.Debug("answering a preflight failed", "url", ev.Request.URL, "error", err)
	}
}

// block fails a request that is not made at all.
func (ic *interceptor) block(ev cdpfetch.EventRequestPaused, why string) {
	ic.r.blocked.Add(1)
	ic.r.log.Debug("page request refused", "url", ev.Request.URL, "type", ev.ResourceType, "why", why)
	ic.fail(ev, network.ErrorReasonBlockedByClient)
}

func (ic *interceptor) fail(ev cdpfetch.EventRequestPaused, reason network.ErrorReason) {
	_, err := chromedp.Call(ic.ctx, cdpfetch.FailRequest, cdpfetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: reason})
	if err != nil && ic.ctx.Err() == nil {
		ic.r.log.Debug("failing a page request failed", "url", ev.Request.URL, "error", err)
	}
}

// failReason is the browser's error for a request the supervisor could
// not make.
func failReason(err error) network.ErrorReason {
	switch c := fetch.ClassOf(err); c {
	case fetch.ClassRobots, fetch.ClassBlocked, fetch.Class(ClassBlacklisted), fetch.Class(ClassCrawlDelay):
		return network.ErrorReasonBlockedByClient
	case fetch.ClassDNS, fetch.ClassDNSTimeout:
		return network.ErrorReasonNameNotResolved
	case fetch.ClassConnect:
		return network.ErrorReasonConnectionFailed
	case fetch.ClassTimeout:
		return network.ErrorReasonTimedOut
	case fetch.ClassCanceled:
		return network.ErrorReasonAborted
	}
	return network.ErrorReasonFailed
}

// droppedHeaders describe the bytes on the wire or the connection, or
// would leave state in the browser; the body handed over is decoded.
var droppedHeaders = map[string]bool{
	"Content-Encoding": true, "Content-Length": true, "Transfer-Encoding": true,
	"Connection": true, "Keep-Alive": true, "Upgrade": true, "Trailer": true,
	"Set-Cookie": true, "Set-Cookie2": true, "Alt-Svc": true, "Strict-Transport-Security": true,
	"Proxy-Authenticate": true, "Proxy-Connection": true,
}

// fulfilledHeaders are resp's headers for the browser: Content-Type says
// UTF-8 for a text body the fetcher decoded.
func fulfilledHeaders(resp *fetch.Response) []*cdpfetch.HeaderEntry {
	out := make([]*cdpfetch.HeaderEntry, 0, len(resp.Header)+1)
	for k, vs := range resp.Header {
		k = http.CanonicalHeaderKey(k)
		if droppedHeaders[k] || k == "Content-Type" {
			continue
		}
		for _, v := range vs {
			out = append(out, &cdpfetch.HeaderEntry{Name: k, Value: v})
		}
	}
	ct := resp.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt == "" {
		ct = resp.ContentType
	}
	if resp.Charset != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt == "" {
			mt = resp.ContentType
		}
		ct = mime.FormatMediaType(mt, map[string]string{"charset": "utf-8"})
	}
	if ct != "" {
		out = append(out, &cdpfetch.HeaderEntry{Name: "Content-Type", Value: ct})
	}
	return out
}

// prefetch reports a request for a page the browser guesses may come next
// (<link rel=prefetch>, which it types as a fetch): Sec-Purpose or Purpose
// says so.
func prefetch(h network.Headers) bool {
	p := strings.ToLower(header(h, "Sec-Purpose") + " " + header(h, "Purpose"))
	return strings.Contains(p, "prefetch") || strings.Contains(p, "prerender")
}

// header looks a request header up by name, case-insensitively.
func header(h network.Headers, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			if s, ok := v.(string); ok {
				return s
			}
			return fmt.Sprint(v)
		}
	}
	return ""
}

func httpURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Hostname() != ""
}
