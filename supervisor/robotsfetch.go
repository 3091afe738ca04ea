package supervisor

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"backfill/robots"
	"backfill/seconds"
	"backfill/store"
)

// robotsTurn is the turn of host h whose robots rules are not known or
// have expired: once the delay has passed (stale rules still give the
// best guess of it), robots.txt is fetched for the page at target, the
// turn's one request. It returns when the host may have its next turn.
func (s *Supervisor) robotsTurn(ctx context.Context, h *host, target string, now time.Time) time.Time {
	if at := s.nextStart(h, s.delay(h.robots)); at.After(now) {
		return at
	}
	s.reserve(ctx, h, s.delay(h.robots))
	s.fetchRobots(ctx, h, target)
	if h.robots != nil && (h.robots.delay > s.cfg.MaxCrawlDelay || h.robots.disallowAll) {
		return now // its tasks are answered without requests
	}
	return s.nextStart(h, s.delay(h.robots))
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

// robotsHop records that h's robots.txt request at from was sent to next,
// and reports whether the hop is to be followed (robotsHopRule).
func (s *Supervisor) robotsHop(h *host, from, next string) bool {
	follow, reason := robotsHopRule(h.name, &h.robotsHop, from, next)
	s.redirects.add(reason)
	return follow
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
