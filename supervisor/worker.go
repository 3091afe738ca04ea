package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"time"

	"backfill/fetch"
	"backfill/robots"
	"backfill/seconds"
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

// maxResultLinks bounds the links one Result carries, parsed links first;
// a page with more is a link farm or a trap, and the frame must stay small.
const maxResultLinks = 10000

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
	// The cache may know a later request than we do: another supervisor
	// that owned the host before, or this one before a restart. It is read
	// when that can be so: on first sight of the host, and when our own
	// latest request to it is older than a flush interval. A host we are
	// crawling steadily is ours, and what we know of it is ahead of the
	// cache (which gets our times write-behind, see recordLastCrawl), so
	// reading it on every turn would cost a query per request for nothing.
	if h.last.IsZero() {
		// A host the scheduler forgot: its latest request may not be in
		// the cache yet. Ours, so not padded.
		if at, ok := s.pendingLastCrawl(h.name); ok {
			h.last = at
		}
	}
	if h.last.IsZero() || now.Sub(h.last) > lastCrawlFlush {
		if lc, ok := s.lastCrawl(ctx, h.name); ok && lc.After(h.last) {
			h.last, h.inherited = lc, true
		}
	}
	if h.robots == nil || !now.Before(h.robots.expires) {
		if r := s.cachedRobots(ctx, h.name, now); r != nil {
			h.robots = r
		}
	}
	if sr := s.sched.peekSub(h); sr != nil {
		return s.subTurn(ctx, h, sr, now), nil
	}
	first := s.sched.peek(h)
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
		return at, p
	}
	// The URL this turn is about: the task's, or where a redirect on
	// this host sent it (redirect.go).
	target := s.hops.url(first)
	if h.robots == nil || !now.Before(h.robots.expires) {
		// Stale rules still give the best guess of the delay.
		if at := s.nextStart(h, s.delay(h.robots)); at.After(now) {
			return at, nil
		}
		s.reserve(ctx, h, s.delay(h.robots))
		s.fetchRobots(ctx, h, target)
		if h.robots != nil && (h.robots.delay > s.cfg.MaxCrawlDelay || h.robots.disallowAll) {
			return now, nil // its tasks are answered without requests
		}
		return s.nextStart(h, s.delay(h.robots)), nil
	}

	delay := s.delay(h.robots)
	u, err := url.Parse(target)
	// hopped: a redirect on this host led here; a task with Hops came of
	// redirects from other hosts.
	hopped := target != first.URL
	redirected := hopped || first.Hops > 0
	switch {
	case err != nil: // accept checked it; kept for safety
		t := s.popInto(h, popped)
		return now, &page{task: t, res: s.answer(t, string(fetch.ClassURL), err.Error())}
	case h.robots.delay > s.cfg.MaxCrawlDelay:
		t := s.popInto(h, popped)
		return now, &page{task: t, res: s.answer(t, ClassCrawlDelay,
			fmt.Sprintf("robots.txt of %s asks for Crawl-delay %v, over the %v ceiling", h.name, h.robots.delay, s.cfg.MaxCrawlDelay))}
	case h.robots.unreachable != "":
		// robots.txt could not be fetched because the host cannot be
		// reached: that, not robots.txt, is what stops the page.
		t := s.popInto(h, popped)
		return now, &page{task: t, res: s.answer(t, string(h.robots.unreachable), h.robots.reason)}
	case !h.robots.allowed(u):
		t := s.popInto(h, popped)
		// No request was made: the next task may be looked at at once
		// (a request still waits for the delay below).
		if h.robots.disallowAll {
			return now, &page{task: t, res: s.answer(t, ClassRobotsUnavailable, h.robots.reason)}
		}
		res := s.answer(t, ClassRobots, fmt.Sprintf("disallowed by robots.txt of %s", h.name))
		if redirected {
			s.redirects.add(wire.RedirectRobots)
			res.Error = fmt.Sprintf("redirected to %s, which robots.txt of %s disallows", target, h.name)
			res.HopRefused = wire.RedirectRobots
		}
		if hopped {
			res.FinalURL, res.Chain = target, s.hops.before(t.ID)
		}
		return now, &page{task: t, res: res}
	}
	render := first.Render && s.render != nil
	if render && !hopped {
		if doc := s.docs.take(first.URL); doc != nil {
			// Its HTML is here from when it was fetched: no request.
			t := s.popInto(h, popped)
			soft, _ := s.soft404.known(h.name)
			return now, &page{task: t, start: time.Now(), resp: doc, soft404: soft, render: true}
		}
	}
	if at := s.nextStart(h, delay); at.After(now) {
		return at, nil
	}
	// The host's first page waits for its soft-404 probe, a request of
	// its own.
	s.reserve(ctx, h, delay)
	if s.probeSoft404(ctx, h, u) {
		return s.nextStart(h, delay), nil
	}
	t := s.popInto(h, popped)
	start := time.Now()
	resp, end, err := s.request(ctx, h, target, s.pageRequest(t, hopped), delay)
	s.meter.page(resp, end.Sub(start))
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
	p := &page{task: t, start: start, resp: resp, err: err, render: render}
	p.soft404, _ = s.soft404.known(h.name)
	if err != nil && redirected && fetch.ClassOf(err) == fetch.ClassBlocked {
		s.redirects.add(wire.RedirectAddress)
		p.hopRefused = wire.RedirectAddress
	}
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

// robotsHop records that h's robots.txt request at from was sent to next,
// and reports whether the hop is to be followed (robotsHopRule).
func (s *Supervisor) robotsHop(h *host, from, next string) bool {
	follow, reason := robotsHopRule(h.name, &h.robotsHop, from, next)
	s.redirects.add(reason)
	return follow
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

// cachedRobots returns a host's unexpired robots rules from the cache, or
// nil.
func (s *Supervisor) cachedRobots(ctx context.Context, name string, now time.Time) *robotsRules {
	c, ok := fromCache(ctx, s, "read robots", name, s.cache.Robots)
	if !ok || !now.Before(c.Expires) {
		return nil
	}
	r := parseRobots(c.Status, c.Body, s.token)
	r.expires = c.Expires
	if r.disallowAll {
		r.reason = fmt.Sprintf("%s; nothing is fetched from %s until a retry succeeds (next at %s)",
			r.reason, name, c.Expires.UTC().Format(time.RFC3339))
	}
	return r
}

// fetchRobots makes h's robots.txt request, the turn's one request to
// the host: the file, or a hop on its way there. It keeps at most 500 KiB
// and follows no meta refresh. A redirect on the host is followed as
// pages' are, one request a turn after the delay, at most five (RFC 9309;
// more mean the file is unavailable, which allows everything); one to
// another host is not followed, since that host's rules are not ours to
// judge here: the file counts as unavailable too. The hosts a site
// redirects to have robots.txt files of their own, read before any of
// their pages. 4xx allows everything; 5xx, 429 or no answer disallows
// everything until a retry succeeds: the retry comes RobotsRetry later,
// doubling with each failure up to RobotsTTL, and not before a
// Retry-After. Rules that failed because the host could not be reached
// are not cached: they carry the network class the host's pages are
// answered with.
func (s *Supervisor) fetchRobots(ctx context.Context, h *host, pageURL string) {
	u, err := url.Parse(pageURL)
	if err != nil {
		return
	}
	robotsURL := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/robots.txt"}).String()
	if h.robotsHop != nil {
		urls := h.robotsHop.URLs()
		robotsURL = urls[len(urls)-1]
	}
	s.robots.Add(1)
	start := time.Now()
	resp, end, err := s.request(ctx, h, robotsURL, robotsRequest, s.delay(h.robots))
	if ctx.Err() != nil {
		return // shutting down; nothing learned
	}
	if err == nil && resp != nil && resp.Next != "" {
		if s.robotsHop(h, robotsURL, resp.Next) {
			return // the next turn asks the hop's target
		}
		resp, err = nil, robotsGaveUp(robotsURL)
	}
	h.robotsHop = nil
	// A blacklisted address blacklists the host: its turns answer
	// "blacklisted" from now on.
	err = s.blacklistedAddr(h.name, err)
	prev := h.robots
	r := robotsFromFetch(resp, err, s.token)
	ttl := s.cfg.RobotsTTL
	notBefore, _ := s.health.observe(h.name, resp, err, s.delay(prev), end)
	if r.disallowAll {
		r.failures = 1
		if prev != nil && prev.failures > 0 {
			r.failures = prev.failures + 1
		}
		ttl = hostPause(s.cfg.RobotsRetry, r.failures-1, s.cfg.RobotsTTL)
		if r.failures == 1 {
			ttl = min(s.cfg.RobotsRetry, s.cfg.RobotsTTL)
		}
		// The host's pages are answered without requests until the
		// retry, which comes no sooner than the host allows.
		if w := notBefore.Sub(start); w > ttl {
			ttl = min(w, MaxRobotsTTL)
		}
		r.reason = fmt.Sprintf("%s; nothing is fetched from %s until a retry succeeds (next in %v)", r.reason, h.name, ttl.Round(time.Millisecond))
	}
	r.expires = start.Add(ttl)
	h.robots = r
	status := 0
	var body []byte
	if resp != nil {
		// A response that failed on its content (a status, a type) still
		// says what the site answered.
		status, body = resp.Status, resp.Body
	}
	s.meter.robots[robotsOutcome(r, status)].Add(1)
	if len(body) > robots.MaxSize {
		body = body[:robots.MaxSize]
	}
	s.log.Debug("robots.txt fetched", "host", h.name, "status", status, "error", err,
		seconds.Attr("crawl_delay", r.delay), "allow_all", r.allowAll, "disallow_all", r.disallowAll, "ignored_lines", r.ignored)
	if r.unreachable != "" {
		return
	}
	if !r.disallowAll && (status < 200 || status > 299) {
		status, body = http.StatusNotFound, nil // unavailable (4xx, or too many redirects): allows all
	}
	cctx, cancel := context.WithTimeout(ctx, cacheTimeout)
	defer cancel()
	entry := store.Robots{Status: status, Body: body, FetchedAt: start.UTC(), Expires: r.expires.UTC()}
	if err := s.cache.PutRobots(cctx, h.name, entry); err != nil && ctx.Err() == nil {
		s.cacheFailed("put robots", h.name, err)
	}
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

// finishSafe runs finish, answering "panic" if extraction panics, and
// always gives the task's capacity back.
func (s *Supervisor) finishSafe(ctx context.Context, p *page) {
	// Whichever way the task was answered, its count of 429/503 answers
	// goes with it: health keeps counts of held tasks only; so does the
	// chain of its redirects.
	s.health.settled(p.task.ID)
	defer s.hops.forget(p.task.ID)
	released := false
	release := func() {
		if !released {
			released = true
			s.sched.done()
		}
	}
	defer release()
	var res *wire.Result
	func() {
		defer func() {
			if v := recover(); v != nil {
				s.log.Error("panic while processing page recovered", "url", p.task.URL, "host", p.task.Host, "class", ClassPanic, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				res = s.answer(p.task, ClassPanic, fmt.Sprintf("panic: %v", v))
			}
		}()
		res = s.finish(ctx, p)
	}()
	if ctx.Err() != nil {
		// Stopping: a page fetched is worth its result (fetching it
		// again would cost its host a request), if it goes out at once.
		// A failure may be the stop's own doing: the lease covers it.
		if res.Class != "" {
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), stopGrace)
		defer cancel()
	}
	switch {
	case p.kept:
		s.reanswered.Add(1)
	case res.Class == "":
		s.fetched.Add(1)
		s.answers.keep(p.task, res)
	default:
		s.countFailed(res.Class)
	}
	s.logPage(p, res)
	if p.delay > 0 || !p.ready.IsZero() {
		// A copy: a kept answer may be read while this one goes out.
		paced := *res
		paced.Delay, paced.Ready = p.delay, max(time.Until(p.ready), 0)
		res = &paced
	}
	// The slot is freed before the result can reach the dispatcher: it
	// counts the task done when the result arrives and may send the next
	// one at once, which must find room here.
	release()
	s.sendResult(ctx, fitFrame(res))
}

// logPage says at debug level what became of one task: one line per page,
// naming its URL and host, and its failure class when it failed.
func (s *Supervisor) logPage(p *page, res *wire.Result) {
	if !s.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	args := []any{"url", p.task.URL, "host", p.task.Host, "status", res.Status}
	if !p.start.IsZero() {
		args = append(args, "ms", time.Since(p.start).Milliseconds())
	}
	if res.Class != "" {
		s.log.Debug("page failed", append(args, "class", res.Class, "error", res.Error)...)
		return
	}
	s.log.Debug("page done", append(args, "bytes", res.Bytes, "fields", len(res.Fields), "links", len(res.Links), "render", p.task.Render)...)
}

// finish builds the Result of a page: its answer if already known, its
// failure class, or what the mappings extracted from it (once rendered,
// for a page to render).
func (s *Supervisor) finish(ctx context.Context, p *page) *wire.Result {
	if p.res != nil {
		return p.res
	}
	t := p.task
	res := &wire.Result{TaskID: t.ID, Lease: t.Lease, Supervisor: s.cfg.Name, URL: t.URL, FetchedAt: p.start.UTC(),
		Chain: s.hops.before(t.ID)}
	if p.resp != nil {
		res.FinalURL = p.resp.URL
		res.Status = p.resp.Status
		res.Bytes = int64(len(p.resp.Body))
	}
	if p.err != nil || p.resp == nil {
		err := p.err
		if err == nil {
			err = errors.New("no response")
		}
		res.Class = string(fetch.ClassOf(err))
		if res.Class == "" {
			res.Class = string(fetch.ClassOther)
		}
		res.Error = err.Error()
		res.HopRefused = p.hopRefused
		return res
	}
	res.ETag, res.LastModified = validators(p.resp)
	if p.resp.NotModified {
		// The page is what the dispatcher last saw: it answers from its
		// cached extraction.
		res.NotModified = true
		return res
	}
	if p.soft404.matches(t.URL, p.resp) {
		res.Class = ClassSoft404
		res.Error = "resembles the host's answer to an invented path (a soft 404)"
		return res
	}
	pageURL := p.resp.URL
	if pageURL == "" {
		pageURL = t.URL
	}
	if p.render {
		rendered, err := s.renderPage(ctx, pageURL, p.resp)
		if err != nil {
			res.Class, res.Error = string(fetch.ClassOf(err)), err.Error()
			return res
		}
		p.resp = rendered
		res.Bytes = int64(len(rendered.Body))
		if rendered.URL != "" {
			pageURL, res.FinalURL = rendered.URL, rendered.URL
		}
	}
	extract := s.cfg.Mappings.Extract
	if s.cfg.ContentSeen {
		extract = s.cfg.Mappings.ExtractWithFingerprint
	}
	ex := extract(pageURL, p.resp.Body, p.resp.ContentType)
	if ex == nil {
		return res
	}
	res.Mappings = ex.Mappings
	for _, f := range ex.Fields {
		res.Fields = append(res.Fields, wire.Field{Mapping: f.Mapping, Name: f.Field, Values: f.Values, Match: f.Match})
	}
	for _, e := range ex.Errors {
		res.FieldErrs = append(res.FieldErrs, e.String())
	}
	res.Links = mergeLinks(ex.Links, ex.OutLinks, maxResultLinks)
	if !p.render {
		res.JSOnly = ex.JSOnly
		if ex.JSOnly && s.docs != nil {
			s.docs.put(t.URL, p.resp)
		}
	}
	if s.cfg.ContentSeen {
		fp := ex.Fingerprint
		res.TextHash, res.Simhash, res.Words = fp.Exact[:], fp.Sim, fp.Words
	}
	return res
}

// maxValidator bounds an ETag or Last-Modified kept for the next
// conditional request; a longer one is not worth a place in the
// dispatcher's state.
const maxValidator = 256

// validators are the ETag and Last-Modified of a fetched page, for the
// dispatcher to send back when it fetches the page again.
func validators(resp *fetch.Response) (etag, lastModified string) {
	if resp == nil || resp.Header == nil {
		return "", ""
	}
	keep := func(v string) string {
		if len(v) > maxValidator {
			return ""
		}
		return v
	}
	return keep(resp.Header.Get("Etag")), keep(resp.Header.Get("Last-Modified"))
}

// mergeLinks lists parsed links (Parsed) then other outbound links, each
// URL once, at most limit of them.
func mergeLinks(parsed, out []string, limit int) []wire.Link {
	if len(parsed)+len(out) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(parsed)+len(out))
	links := make([]wire.Link, 0, min(len(parsed)+len(out), limit))
	for i, list := range [][]string{parsed, out} {
		for _, l := range list {
			if len(links) >= limit {
				return links
			}
			if l == "" || seen[l] {
				continue
			}
			seen[l] = true
			links = append(links, wire.Link{URL: l, Parsed: i == 0})
		}
	}
	return links
}

// fitFrame trims a Result that would not fit in one frame, saying so in
// Error: first absurd field values (over 64 KiB, or beyond 100 per field),
// then links from the end. Ordinary results are far below the limit and are
// returned untouched without being encoded here.
func fitFrame(r *wire.Result) *wire.Result {
	const maxValue, maxValues = 64 << 10, 100
	if approxSize(r) < wire.MaxFrame/8 {
		return r
	}
	valuesCapped := false
	for {
		b, err := wire.Encode(wire.KindResult, r)
		if err == nil && len(b) <= wire.MaxFrame {
			return r
		}
		t := *r
		t.Error = "result trimmed to fit one frame"
		switch {
		case !valuesCapped:
			valuesCapped = true
			t.Fields = make([]wire.Field, 0, len(r.Fields))
			for _, f := range r.Fields {
				vals := make([]string, 0, min(len(f.Values), maxValues))
				for _, v := range f.Values[:min(len(f.Values), maxValues)] {
					if len(v) > maxValue {
						v = v[:maxValue]
					}
					vals = append(vals, v)
				}
				f.Values = vals
				t.Fields = append(t.Fields, f)
			}
			t.FieldErrs = r.FieldErrs[:min(len(r.FieldErrs), maxValues)]
		case len(r.Links) > 0:
			t.Links = r.Links[:len(r.Links)/2]
		default:
			t.Fields, t.FieldErrs, t.Links = nil, nil, nil
			return &t
		}
		r = &t
	}
}

// approxSize is a cheap lower bound of a Result's encoded size.
func approxSize(r *wire.Result) int {
	n := len(r.URL) + len(r.FinalURL) + len(r.Error)
	for _, f := range r.Fields {
		for _, v := range f.Values {
			n += len(v) + 4
		}
	}
	for _, l := range r.Links {
		n += len(l.URL) + 16
	}
	for _, e := range r.FieldErrs {
		n += len(e) + 4
	}
	return n
}

// renderPage loads a fetched page in the browser and returns the DOM it
// ends with. The page's requests are made by subFetch, and the resource
// kinds its mappings allow are let through.
func (s *Supervisor) renderPage(ctx context.Context, pageURL string, doc *fetch.Response) (*fetch.Response, error) {
	start := time.Now()
	resp, err := s.render.Render(ctx, renderJob{doc: doc, allow: s.cfg.Mappings.RenderResources(pageURL), get: s.subFetch})
	s.meter.renderSeconds.Observe(time.Since(start).Seconds())
	return resp, err
}
