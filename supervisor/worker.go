package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime/debug"
	"time"

	"backfill/fetch"
	"backfill/store"
	"backfill/wire"
)

// Classes the supervisor adds to fetch's. Append only: they cross the wire.
const (
	ClassRobots     = string(fetch.ClassRobots) // disallowed by robots.txt; no request made
	ClassCrawlDelay = "crawl-delay"             // Crawl-delay over MaxCrawlDelay; host skipped
	ClassPanic      = "panic"                   // a page made the processing panic; recovered
	// ClassRobotsUnavailable: robots.txt could not be had, so everything is
	// disallowed until a retry succeeds; no request made.
	ClassRobotsUnavailable = string(fetch.ClassRobotsUnavailable)
)

// page is a task whose turn on its host is over: either its answer is
// already known (res), or it was fetched and waits for extraction.
type page struct {
	task    *wire.Task
	start   time.Time
	resp    *fetch.Response
	err     error
	res     *wire.Result
	soft404 *soft404Print // the host's answer to an invented path, if it answered 200
	// render: resp is the page's HTML, to be loaded in the browser before
	// extraction (a Render task on a render node).
	render bool
	// kept: res is an answer sent before, under an earlier lease
	// (answers.go); no request was made for it this time.
	kept bool
	// hopRefused: a redirect led to a request the address guard refused
	// (wire.RedirectAddress).
	hopRefused string
	// The host's pace when the turn ended, for the Result (wire.Result's
	// Delay and Ready): its delay, and when it may take its next request.
	delay time.Duration
	ready time.Time
}

// work is one worker: it takes the next ready host, gives it one turn (at
// most one request), hands it back, and then finishes the page off the
// host, so extraction and sending never hold up the host's next request.
func (s *Supervisor) work(ctx context.Context) {
	for {
		h, err := s.sched.take(ctx)
		if err != nil {
			return
		}
		next, p := s.turnSafe(ctx, h)
		if p != nil {
			s.notePace(h, p, next)
		}
		s.sched.release(h, next)
		switch {
		case p == nil:
		case p.render && p.res == nil && p.err == nil:
			// Rendering waits for the page's own requests, which workers
			// make: it is finished off the workers, so that they stay
			// free to make them (tabs bound how many render at once).
			s.renders.Go(func() { s.finishSafe(ctx, p) })
		default:
			s.finishSafe(ctx, p)
		}
	}
}

// notePace records on p the pace of its host, which the worker still
// holds: the dispatcher sends the host's next task when it may go.
func (s *Supervisor) notePace(h *host, p *page, next time.Time) {
	p.delay = s.delay(h.robots)
	p.ready = s.nextStart(h, p.delay)
	if next.After(p.ready) {
		p.ready = next
	}
}

// turnSafe runs turn, turning a panic into a "panic" answer for the task
// it popped, and keeps the host away for a default delay, since nothing is
// known about whether a request went out.
func (s *Supervisor) turnSafe(ctx context.Context, h *host) (next time.Time, p *page) {
	var popped *wire.Task
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		s.log.Error("panic during host turn recovered", "host", h.name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		next = time.Now().Add(s.cfg.DefaultDelay)
		p = nil
		if popped == nil {
			if sr := s.sched.peekSub(h); sr != nil {
				// A rendered page's request: the page learns of it.
				s.sched.popSub(h)
				sr.done <- subResult{err: &fetch.Error{Class: fetch.Class(ClassPanic), URL: sr.url, Err: fmt.Errorf("panic: %v", v)}}
				return
			}
			// The turn failed before taking a task (reading the host's
			// cached state, say). The task it was for is answered, so a
			// host whose turns always panic still drains instead of
			// holding its tasks forever.
			popped = s.sched.pop(h)
		}
		if popped != nil {
			p = &page{task: popped, res: s.answer(popped, ClassPanic, fmt.Sprintf("panic: %v", v))}
		}
	}()
	return s.turn(ctx, h, &popped)
}

// turn gives host h one turn: make sure its robots rules are known (a
// robots.txt fetch is the turn's one request), then answer or fetch the
// first queued task if the host's delay has passed. It returns when the
// host may have its next turn; a popped task is stored in *popped.
func (s *Supervisor) turn(ctx context.Context, h *host, popped **wire.Task) (time.Time, *page) {
	now := time.Now()
	if wait := s.fence.hold(now); wait > 0 {
		return now.Add(wait), nil // cut off from the dispatcher (fence.go)
	}
	s.catchUp(ctx, h, now)
	if sr := s.sched.peekSub(h); sr != nil {
		return s.subTurn(ctx, h, sr, now), nil
	}
	first := s.sched.peek(h)
	if h.held != nil && (first == nil || first.ID != h.held.task.ID) {
		s.sched.unhold(h) // its task went another way (abandoned, say): so does the page
	}
	if first == nil {
		return now, nil
	}
	// A task sent again while its page was being fetched (its answer was
	// not kept yet when it arrived) is answered from that fetch.
	if res := s.answers.answer(first); res != nil {
		return now, &page{task: s.popInto(h, popped), res: res, kept: true}
	}
	// A host that moved here from another supervisor comes with the time
	// its last request there may have ended, as the dispatcher saw it: the
	// delay holds across the move even without a shared cache.
	if first.HostLast.After(h.last) {
		h.last, h.inherited = first.HostLast, true
	}
	// A blacklisted host, or one that asked for a wait over the ceiling,
	// is answered without requests.
	if at, p := s.troubled(h, popped, now); p != nil {
		if h.held != nil {
			s.sched.unhold(h) // the task is answered without its page
		}
		return at, p
	}
	// The URL this turn is about: the task's, or where a redirect on
	// this host sent it (redirect.go).
	target := s.hops.url(first)
	if h.robots == nil || !now.Before(h.robots.expires) {
		at := s.robotsTurn(ctx, h, target, now)
		return at, s.handBack(h, popped, at, time.Now())
	}
	delay := s.delay(h.robots)
	if h.held != nil {
		return s.heldTurn(ctx, h, first, popped, now, delay)
	}
	return s.pageTurn(ctx, h, newAim(first, target), popped, now, delay)
}

// catchUp brings what this process knows of h up to date with the host
// cache before its turn.
//
// The cache may know a later request than we do: another supervisor
// that owned the host before, or this one before a restart. It is read
// when that can be so: on first sight of the host, and when our own
// latest request to it is older than a flush interval. A host we are
// crawling steadily is ours, and what we know of it is ahead of the
// cache (which gets our times write-behind, see recordLastCrawl), so
// reading it on every turn would cost a query per request for nothing.
func (s *Supervisor) catchUp(ctx context.Context, h *host, now time.Time) {
	if h.last.IsZero() {
		// A host the scheduler forgot: its latest request may not be in
		// the cache yet. Ours, so not padded.
		if at, ok := s.pendingLastCrawl(h.name); ok {
			h.last = at
		}
	}
	// A host whose rules ask for no delay is spaced by nothing: when its
	// last request ended does not matter, and is not worth a query.
	spaced := h.robots == nil || s.delay(h.robots) > 0
	if spaced && (h.last.IsZero() || now.Sub(h.last) > lastCrawlFlush) {
		if lc, ok := s.lastCrawl(ctx, h.name); ok && lc.After(h.last) {
			h.last, h.inherited = lc, true
		}
	}
	if h.robots == nil || !now.Before(h.robots.expires) {
		if r := s.cachedRobots(ctx, h.name, now); r != nil {
			h.robots = r
		}
	}
}

// aim is what a page's turn is about: the task first on its host's queue
// and the URL its request goes to.
type aim struct {
	task   *wire.Task
	target string   // the task's URL, or where a redirect on this host sent it
	u      *url.URL // target parsed, unless err
	err    error
	// hopped: a redirect on this host led here; redirected: so did one
	// from another host (a task with Hops).
	hopped, redirected bool
}

func newAim(first *wire.Task, target string) aim {
	u, err := url.Parse(target)
	hopped := target != first.URL
	return aim{task: first, target: target, u: u, err: err, hopped: hopped, redirected: hopped || first.Hops > 0}
}

// pageTurn is the turn of a host whose robots rules are known and whose
// first page waits for no verdict: the page is answered without a
// request if it may not be fetched (refusal) or its HTML is already here,
// else fetched once the delay has passed, after the host's soft-404
// probe if that is due.
func (s *Supervisor) pageTurn(ctx context.Context, h *host, a aim, popped **wire.Task, now time.Time, delay time.Duration) (time.Time, *page) {
	if p := s.refusal(h, a, popped); p != nil {
		return now, p
	}
	render := a.task.Render && s.render != nil
	if render && !a.hopped {
		if doc := s.docs.take(a.task.URL); doc != nil {
			// Its HTML is here from when it was fetched: no request.
			t := s.popInto(h, popped)
			soft, _ := s.soft404.known(h.name)
			return now, &page{task: t, start: time.Now(), resp: doc, soft404: soft, render: true}
		}
	}
	if at := s.nextStart(h, delay); at.After(now) {
		return at, s.handBack(h, popped, at, now)
	}
	s.reserve(ctx, h, delay)
	// The soft-404 probe comes after the host's first page (soft404.go).
	if h.probeDue {
		h.probeDue = false
		if s.probeSoft404(ctx, h, a.u) {
			at := s.nextStart(h, delay)
			return at, s.handBack(h, popped, at, time.Now())
		}
	}
	return s.fetchPage(ctx, h, a, render, popped, delay)
}

// refusal is the answer, made without a request, to a page its host's
// robots rules keep from being fetched, or nil if it may be.
func (s *Supervisor) refusal(h *host, a aim, popped **wire.Task) *page {
	switch {
	case a.err != nil: // accept checked it; kept for safety
		t := s.popInto(h, popped)
		return &page{task: t, res: s.answer(t, string(fetch.ClassURL), a.err.Error())}
	case h.robots.delay > s.cfg.MaxCrawlDelay:
		t := s.popInto(h, popped)
		return &page{task: t, res: s.answer(t, ClassCrawlDelay,
			fmt.Sprintf("robots.txt of %s asks for Crawl-delay %v, over the %v ceiling", h.name, h.robots.delay, s.cfg.MaxCrawlDelay))}
	case h.robots.unreachable != "":
		// robots.txt could not be fetched because the host cannot be
		// reached: that, not robots.txt, is what stops the page.
		t := s.popInto(h, popped)
		return &page{task: t, res: s.answer(t, string(h.robots.unreachable), h.robots.reason)}
	case !h.robots.allowed(a.u):
		t := s.popInto(h, popped)
		// No request was made: the next task may be looked at at once
		// (a request still waits for the delay).
		if h.robots.disallowAll {
			return &page{task: t, res: s.answer(t, ClassRobotsUnavailable, h.robots.reason)}
		}
		res := s.answer(t, ClassRobots, fmt.Sprintf("disallowed by robots.txt of %s", h.name))
		if a.redirected {
			s.redirects.add(wire.RedirectRobots)
			res.Error = fmt.Sprintf("redirected to %s, which robots.txt of %s disallows", a.target, h.name)
			res.HopRefused = wire.RedirectRobots
		}
		if a.hopped {
			res.FinalURL, res.Chain = a.target, s.hops.before(t.ID)
		}
		return &page{task: t, res: res}
	}
	return nil
}

// fetchPage makes the turn's one request, for the first queued page (or
// the hop its redirect asks for), its host's delay passed and reserved.
// The page comes back to be finished, unless it is to be asked again
// (a Retry-After, a hop on its host) or held for its host's soft-404
// verdict (hold): it is then back on its host's queue.
func (s *Supervisor) fetchPage(ctx context.Context, h *host, a aim, render bool, popped **wire.Task, delay time.Duration) (time.Time, *page) {
	soft, judged := s.soft404Verdict(ctx, h)
	t := s.popInto(h, popped)
	start := time.Now()
	resp, end, err := s.request(ctx, h, a.target, s.pageRequest(t, a.hopped), delay)
	s.meter.page(resp, end.Sub(start))
	h.probeDue = !judged
	next, retry, err := s.afterFetch(h, t, resp, err, end, delay)
	if retry {
		*popped = nil // back on its host's queue
		return next, nil
	}
	if err == nil && resp != nil && resp.Next != "" {
		p := s.hop(h, t, resp)
		if p == nil {
			*popped = nil // back on its host's queue, for the hop
		}
		return next, p
	}
	p := &page{task: t, start: start, resp: resp, err: err, render: render, soft404: soft}
	if err != nil && a.redirected && fetch.ClassOf(err) == fetch.ClassBlocked {
		s.redirects.add(wire.RedirectAddress)
		p.hopRefused = wire.RedirectAddress
	}
	if !judged && s.hold(h, p) {
		s.sched.requeue(h, t)
		*popped = nil
		return next, nil
	}
	return next, p
}

// hold keeps p, a page fetched before its host's soft-404 verdict, on
// its host until the probe has answered, if it reads like a not-found
// (soft404.go) and its body fits the bounds, and reports whether it did.
func (s *Supervisor) hold(h *host, p *page) bool {
	r := p.resp
	if p.err != nil || r == nil || r.NotModified || r.Status < 200 || r.Status > 299 || len(r.Body) > soft404HoldMax {
		return false
	}
	if u, err := url.Parse(p.task.URL); err != nil || (u.Path == "" || u.Path == "/") && u.RawQuery == "" {
		return false // a root page is never a soft 404
	}
	if !looksNotFound(r.Body) || !s.sched.hold(h, p) {
		return false
	}
	s.soft404Held.Add(1)
	return true
}

// heldTurn is the turn of a host whose first page waits for its soft-404
// verdict (hold): its probe, the turn's one request, unless the verdict
// came meanwhile (the host cache, or the probe path disallowed); then
// the page goes on, judged, under the task's latest lease.
func (s *Supervisor) heldTurn(ctx context.Context, h *host, first *wire.Task, popped **wire.Task, now time.Time, delay time.Duration) (time.Time, *page) {
	p := h.held
	next := now
	if _, known := s.soft404Verdict(ctx, h); !known {
		if at := s.nextStart(h, delay); at.After(now) {
			return at, nil
		}
		s.reserve(ctx, h, delay)
		u, _ := url.Parse(first.URL)
		h.probeDue = false
		if s.probeSoft404(ctx, h, u) {
			next = s.nextStart(h, delay)
		}
		if ctx.Err() != nil {
			return next, nil // stopping: the task stays queued, and its lease brings it back
		}
	}
	s.sched.unhold(h)
	p.task = s.popInto(h, popped)
	p.soft404, _ = s.soft404.known(h.name)
	return next, p
}

// pageRequest is how a page's one request is made. A Render task's page
// is fetched the same way: the browser loads the HTML fetched here, and
// makes none of the page's requests itself (see renderPage). A page
// fetched before is asked conditionally, so that a 304 saves the body and
// the extraction (the dispatcher keeps the last one), unless it is to be
// rendered (a render needs the page itself) or a redirect led here (the
// validators are those of the page the task's URL led to last time, and
// the first request carried them).
func (s *Supervisor) pageRequest(t *wire.Task, hopped bool) fetch.Request {
	if (t.Render && s.render != nil) || hopped || (t.ETag == "" && t.LastModified == "") {
		return fetch.Request{}
	}
	return fetch.Request{Validators: &fetch.Validators{ETag: t.ETag, LastModified: t.LastModified}}
}

// request makes the one request of a host's turn, the only way the
// supervisor asks a host anything (a page, a hop, robots.txt, the
// soft-404 probe, a rendered page's request): the caller holds the host
// (no other request to it is in flight), robots.txt allows the URL (but
// for robots.txt itself) and the delay has passed. It follows nothing
// (fetch.Do) and notes the request's end as the host's last (requestDone).
func (s *Supervisor) request(ctx context.Context, h *host, rawURL string, r fetch.Request, delay time.Duration) (resp *fetch.Response, end time.Time, err error) {
	start := time.Now()
	s.inFlight.start(h.name)
	resp, err = s.fetcher.Do(ctx, rawURL, r)
	s.inFlight.end(h.name)
	return resp, s.requestDone(h, start, delay), err
}

func (s *Supervisor) popInto(h *host, popped **wire.Task) *wire.Task {
	t := s.sched.pop(h)
	*popped = t
	return t
}

// delay is the gap between request starts on a host with rules r: its
// Crawl-delay, else DefaultDelay. A Crawl-delay over the ceiling means no
// page is requested at all; the only requests left are robots.txt
// refreshes, spaced by the ceiling.
func (s *Supervisor) delay(r *robotsRules) time.Duration {
	if r == nil || r.delay == 0 {
		return s.cfg.DefaultDelay
	}
	return min(r.delay, s.cfg.MaxCrawlDelay)
}

// nextStart is the earliest start of h's next request, delay after the
// end of the latest one known.
//
// A time inherited from the cache may be behind: its writer flushes its
// times every lastCrawlFlush, so it may have made a later request that is
// not written yet. With a delay to keep, an inherited time is therefore
// padded by the flush interval. With no delay there is nothing to pad:
// last-crawl times only space requests out, they never told two
// supervisors apart while both fetch. A host the cache has no time for is
// not padded either: that would hold back the first request to every
// host of every crawl to cover one narrow case (a host whose very first
// request was made by another supervisor within the last flush interval
// and that changed owner in that instant), and a change of owner can
// overlap with the previous owner's requests anyway, since it still
// fetches the tasks it holds until they are done.
//
// A host in trouble (a Retry-After, a back-off) starts no earlier than
// its health allows.
func (s *Supervisor) nextStart(h *host, delay time.Duration) time.Time {
	if delay > 0 && h.inherited {
		delay += lastCrawlFlush
	}
	at := h.last.Add(delay)
	if nb, _, _ := s.health.wait(h.name); nb.After(at) {
		at = nb
	}
	return at
}

// requestDone records that a request to h ended now, here and (write-
// behind) in the shared cache, so the delay holds even if the host
// changes owner. The delay runs from the end of one request to the start
// of the next: the host gets its full pause however slowly it answered,
// and request arrivals at the host are never closer than the delay.
//
// start is when the request began and delay what the host was owed since
// the one before: the pace ledger keeps both for operators.
func (s *Supervisor) requestDone(h *host, start time.Time, delay time.Duration) time.Time {
	end := time.Now()
	h.last, h.inherited = end, false
	s.recordLastCrawl(h.name, end)
	s.paces.note(h.name, start, end, delay)
	return end
}

// lastCrawl reads when a host's last request ended from the cache.
func (s *Supervisor) lastCrawl(ctx context.Context, name string) (time.Time, bool) {
	return fromCache(ctx, s, "read last crawl", name, s.cache.LastCrawl)
}

// fromCache reads host's entry with read, one of the host cache's
// lookups, within cacheTimeout. ok is false when there is none; a failure
// other than its absence is logged (cacheFailed) and the crawl goes on
// without it.
func fromCache[T any](ctx context.Context, s *Supervisor, op, host string, read func(context.Context, string) (T, error)) (v T, ok bool) {
	cctx, cancel := context.WithTimeout(ctx, cacheTimeout)
	defer cancel()
	v, err := read(cctx, host)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
			s.cacheFailed(op, host, err)
		}
		var zero T
		return zero, false
	}
	return v, true
}

// cacheFailed logs a host cache failure at Warn the first time and every
// thousandth time after, so a broken store does not flood the log; the
// crawl goes on with what this process knows.
func (s *Supervisor) cacheFailed(op, host string, err error) {
	if n := s.cacheErrs.Add(1); n == 1 || n%1000 == 0 {
		s.log.Warn("host cache failed; going on with local state", "op", op, "host", host, "error", err, "failures", n)
	}
}

// answer is a Result for t carrying a failure class.
func (s *Supervisor) answer(t *wire.Task, class, msg string) *wire.Result {
	return &wire.Result{
		TaskID: t.ID, Lease: t.Lease, Supervisor: s.cfg.Name, URL: t.URL,
		Class: class, Error: msg, FetchedAt: time.Now().UTC(),
	}
}
