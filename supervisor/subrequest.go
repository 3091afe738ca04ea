package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"backfill/fetch"
	"backfill/wire"
)

// The requests a page makes while it is rendered (its scripts, the data
// they ask for, the kinds of resource its mappings allow) are made by the
// supervisor, not by the browser, and wait for their host's turn like any
// page: the renderer hands each one to subFetch, which queues it on its
// host in the scheduler, ahead of the host's tasks (a page waits for it in
// a tab). A worker that takes the host gives it a turn of its own
// (subTurn): robots.txt first, then the host's delay, then one request
// made by the fetcher, through the address guard, while the host is held,
// so a host never has two requests in flight. The host's health sees the
// answer as it sees a page's.

// subReq is one request of a rendered page, queued on its host.
type subReq struct {
	url  string
	ctx  context.Context // the render's; a request whose render ended is dropped unmade
	done chan subResult  // buffered: the turn never blocks on it
	// chain: the request was redirected, and url is the chain's last hop,
	// queued on its own host under that host's rules.
	chain *fetch.Chain
}

type subResult struct {
	resp *fetch.Response
	err  error
}

// subFetch makes a rendered page's request for rawURL politely: queued on
// its host until the host's turn, robots.txt obeyed, the delay kept. It
// returns the response (with the fetcher's error for a non-2xx status or a
// body that is not text, which the browser still gets), or an error
// without a response: ClassRobots when robots.txt disallows the URL, the
// fetch class when it failed, ClassCanceled when ctx ended first.
func (s *Supervisor) subFetch(ctx context.Context, rawURL string) (*fetch.Response, error) {
	hostName, err := taskHost(rawURL)
	if err != nil {
		return nil, &fetch.Error{Class: fetch.ClassURL, URL: rawURL, Err: err}
	}
	sr := &subReq{url: rawURL, ctx: ctx, done: make(chan subResult, 1)}
	if err := s.sched.addSub(hostName, sr); err != nil {
		return nil, &fetch.Error{Class: fetch.ClassCanceled, URL: rawURL, Err: err}
	}
	select {
	case r := <-sr.done:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, &fetch.Error{Class: fetch.ClassCanceled, URL: rawURL, Err: context.Cause(ctx)}
	}
}

// subTurn gives host h's first queued subrequest its turn: at most one
// request (robots.txt, or the subrequest itself), as turn does for a page.
// It returns when the host may have its next turn.
func (s *Supervisor) subTurn(ctx context.Context, h *host, sr *subReq, now time.Time) time.Time {
	answer := func(resp *fetch.Response, err error) time.Time {
		s.sched.popSub(h)
		sr.done <- subResult{resp, err}
		return now
	}
	if sr.ctx.Err() != nil {
		return answer(nil, &fetch.Error{Class: fetch.ClassCanceled, URL: sr.url, Err: errors.New("render ended")})
	}
	if wait := s.fence.hold(now); wait > 0 {
		return now.Add(wait) // cut off from the dispatcher (fence.go)
	}
	if why := s.health.refused(h.name); why != "" {
		return answer(nil, &fetch.Error{Class: fetch.Class(ClassBlacklisted), URL: sr.url, Err: errors.New(why)})
	}
	if at, _, _ := s.health.wait(h.name); at.After(now) {
		return at // in trouble: a page's request waits as long as the host asks (the render's own deadline bounds it)
	}
	if h.robots == nil || !now.Before(h.robots.expires) {
		if at := s.nextStart(h, s.delay(h.robots)); at.After(now) {
			return at
		}
		s.reserve(ctx, h, s.delay(h.robots))
		s.fetchRobots(ctx, h, sr.url)
		return s.nextStart(h, s.delay(h.robots))
	}
	u, err := url.Parse(sr.url)
	switch {
	case err != nil:
		return answer(nil, &fetch.Error{Class: fetch.ClassURL, URL: sr.url, Err: err})
	case h.robots.delay > s.cfg.MaxCrawlDelay:
		return answer(nil, &fetch.Error{Class: fetch.Class(ClassCrawlDelay), URL: sr.url,
			Err: fmt.Errorf("robots.txt of %s asks for Crawl-delay %v, over the %v ceiling", h.name, h.robots.delay, s.cfg.MaxCrawlDelay)})
	case h.robots.unreachable != "":
		return answer(nil, &fetch.Error{Class: h.robots.unreachable, URL: sr.url, Err: errors.New(h.robots.reason)})
	case !h.robots.allowed(u):
		return answer(nil, &fetch.Error{Class: fetch.ClassRobots, URL: sr.url, Err: fmt.Errorf("disallowed by robots.txt of %s", h.name)})
	}
	delay := s.delay(h.robots)
	if at := s.nextStart(h, delay); at.After(now) {
		return at
	}
	s.reserve(ctx, h, delay)
	s.sched.popSub(h)
	// No meta refresh: the browser follows its own.
	resp, end, err := s.request(sr.ctx, h, sr.url, fetch.Request{IgnoreMetaRefresh: true}, delay)
	next := end.Add(delay)
	if nb, _ := s.health.observe(h.name, resp, err, delay, end); nb.After(next) {
		next = nb
	}
	if err == nil && resp != nil && resp.Next != "" {
		if herr := s.subHop(sr, resp.Next); herr != nil {
			sr.done <- subResult{nil, herr}
		}
		return next
	}
	sr.done <- subResult{resp, s.blacklistedAddr(h.name, err)}
	return next
}

// subHop queues a rendered page's redirected request again, at its
// target, on the target's host: a request there like any other. An error
// is the request's answer (a loop, too many hops, a target that cannot be
// queued).
func (s *Supervisor) subHop(sr *subReq, next string) error {
	if sr.chain == nil {
		sr.chain = fetch.NewChain(sr.url, s.maxRedirects())
	}
	if err := sr.chain.Add(next); err != nil {
		if errors.Is(err, fetch.ErrRedirectLoop) {
			s.redirects.add(wire.RedirectLoop)
		} else {
			s.redirects.add(wire.RedirectTooMany)
		}
		return err
	}
	hostName, err := taskHost(next)
	if err != nil {
		return &fetch.Error{Class: fetch.ClassRedirect, URL: sr.url, Err: err}
	}
	s.redirects.add(wire.RedirectFollowed)
	sr.url = next
	if err := s.sched.addSub(hostName, sr); err != nil {
		return &fetch.Error{Class: fetch.ClassCanceled, URL: next, Err: err}
	}
	return nil
}

// addSub queues a rendered page's request on its host, ahead of the
// host's tasks. Subrequests take no capacity: they are bounded by the
// tabs rendering and the requests each page may make.
func (s *scheduler) addSub(hostName string, sr *subReq) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errStopped
	}
	h := s.hostLocked(hostName)
	h.subs = append(h.subs, sr)
	if !h.busy && h.index < 0 {
		s.wantTurn(h)
	}
	return nil
}

// peekSub returns the first queued subrequest of a held host, or nil.
func (s *scheduler) peekSub(h *host) *subReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(h.subs) == 0 {
		return nil
	}
	return h.subs[0]
}

// popSub removes the first queued subrequest of a held host.
func (s *scheduler) popSub(h *host) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(h.subs) == 0 {
		return
	}
	h.subs[0] = nil
	h.subs = h.subs[1:]
	if len(h.subs) == 0 {
		h.subs = nil
	}
}
