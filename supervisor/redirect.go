package supervisor

import (
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"backfill/etl"
	"backfill/fetch"
	"backfill/wire"
)

// A page's request may be answered with a redirect (or a meta refresh):
// the target is a request of its own, under its host's rules like any
// other. The fetcher makes one request at a time (fetch.Do) and says
// where a response points; the supervisor then:
//
//   - for a target on the task's own host, puts the task back at the
//     front of the host's queue with the hop recorded (hops): the host's
//     next turn checks the target against robots.txt and waits the
//     host's delay before requesting it, as for any page;
//   - for a target on another host, makes no request there: the task is
//     answered with the target (wire.Result.Redirect), and the dispatcher
//     queues it as a task of that host, for its owner, with the records
//     of this one.
//
// The chain of hops, across hosts too (wire.Task.Hops), is held to the
// fetcher's MaxRedirects and never visits a URL twice (fetch.Chain). What
// became of each hop is counted by reason (wire.Redirect*).

// hopChains holds the chains of the tasks being sent through redirects on
// their host, by task ID, until the task is answered.
type hopChains struct {
	mu sync.Mutex
	m  map[string]*fetch.Chain
}

// url is the URL t's next request goes to: the last hop of its chain, or
// its own.
func (c *hopChains) url(t *wire.Task) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch := c.m[t.ID]; ch != nil {
		urls := ch.URLs()
		return urls[len(urls)-1]
	}
	return t.URL
}

// chain is t's chain so far, made when t has none: its own URL, with room
// for what is left of max after the hops that led to it.
func (c *hopChains) chain(t *wire.Task, max int) *fetch.Chain {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]*fetch.Chain)
	}
	ch := c.m[t.ID]
	if ch == nil {
		ch = fetch.NewChain(t.URL, max-t.Hops)
		c.m[t.ID] = ch
	}
	return ch
}

// before lists the URLs t requested before its last one (nil without a
// hop): what the Result reports as Chain.
func (c *hopChains) before(id string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.m[id]
	if ch == nil {
		return nil
	}
	urls := ch.URLs()
	return append([]string(nil), urls[:len(urls)-1]...)
}

// forget drops t's chain once it is answered.
func (c *hopChains) forget(id string) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// redirectCounts counts the redirects this supervisor met by what became
// of them, its own requests' (robots.txt, rendered pages' requests)
// included: Stats.Redirects. The crawl's summary counts the pages'
// redirects from their Results instead, which are never behind.
type redirectCounts struct {
	mu sync.Mutex
	m  map[string]int64
}

func (r *redirectCounts) add(reason string) {
	r.mu.Lock()
	if r.m == nil {
		r.m = make(map[string]int64)
	}
	r.m[reason]++
	r.mu.Unlock()
}

func (r *redirectCounts) snapshot() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) == 0 {
		return nil
	}
	out := make(map[string]int64, len(r.m))
	for k, v := range r.m {
		out[k] = v
	}
	return out
}

// maxRedirects is the longest chain of hops a page may take.
func (s *Supervisor) maxRedirects() int {
	if n := s.cfg.Fetch.MaxRedirects; n > 0 {
		return n
	}
	return fetch.DefaultMaxRedirects
}

// hop decides what follows a response that points elsewhere (resp.Next):
// a hop on h is queued again at the front of h (nil page: the host's next
// turn makes it); a hop to another host, or one the chain refuses, is
// t's answer.
func (s *Supervisor) hop(h *host, t *wire.Task, resp *fetch.Response) *page {
	ch := s.hops.chain(t, s.maxRedirects())
	from := resp.URL
	if err := ch.Add(resp.Next); err != nil {
		reason := wire.RedirectTooMany
		if errors.Is(err, fetch.ErrRedirectLoop) {
			reason = wire.RedirectLoop
		}
		s.redirects.add(reason)
		res := s.answer(t, string(fetch.ClassRedirect), err.Err.Error())
		res.FinalURL, res.Status, res.Chain, res.HopRefused = from, resp.Status, s.hops.before(t.ID), reason
		return &page{task: t, res: res}
	}
	next, err := url.Parse(resp.Next)
	if err != nil { // fetch made it; kept for safety
		s.redirects.add(wire.RedirectLoop)
		res := s.answer(t, string(fetch.ClassRedirect), fmt.Sprintf("unusable redirect target %q: %v", resp.Next, err))
		res.HopRefused = wire.RedirectLoop
		return &page{task: t, res: res}
	}
	if fetch.HostKey(next) == h.name {
		s.redirects.add(wire.RedirectFollowed)
		s.sched.requeue(h, t)
		return nil
	}
	target, err := etl.NormalizeURL(resp.Next)
	if err != nil {
		s.redirects.add(wire.RedirectLoop)
		res := s.answer(t, string(fetch.ClassRedirect), fmt.Sprintf("redirect to %s: %v", resp.Next, err))
		res.FinalURL, res.Status, res.HopRefused = from, resp.Status, wire.RedirectLoop
		return &page{task: t, res: res}
	}
	s.redirects.add(wire.RedirectOtherHost)
	urls := ch.URLs()
	res := &wire.Result{TaskID: t.ID, Lease: t.Lease, Supervisor: s.cfg.Name, URL: t.URL,
		FinalURL: from, Status: resp.Status, Redirect: target, FetchedAt: time.Now().UTC(),
		Chain: append([]string(nil), urls[:len(urls)-2]...)}
	return &page{task: t, res: res}
}
