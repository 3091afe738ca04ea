package supervisor

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"backfill/fetch"
	"backfill/robots"
)

// HostRobots is what one host's robots.txt says to one User-Agent, read by
// the same rules the workers apply, for tools that fetch a few pages of a
// host outside a crawl (mappings learn): which URLs may be fetched, and the
// Crawl-delay between two requests.
type HostRobots struct {
	rules *robotsRules
	// unavailable: the file could not be had (a *RobotsError wrapping the
	// fetch's error), so everything is disallowed.
	unavailable error
}

// Request makes one request (fetch.Do, or a caller's wrapper of it that
// keeps the host's delay before it and notes its end).
type Request func(ctx context.Context, rawURL string, r fetch.Request) (*fetch.Response, error)

// FetchRobots reads the robots.txt of rawURL's host for userAgent as the
// workers do: each request made with do (so a caller that keeps the
// host's delay keeps it between the hops too), a redirect followed on the
// host only and at most five times, anything else making the file
// unavailable, which allows everything (RFC 9309). A robots.txt that
// cannot be had disallows everything, as in a crawl; the error is only
// for a URL that does not parse.
func FetchRobots(ctx context.Context, do Request, userAgent, rawURL string) (*HostRobots, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("robots.txt for %s: %w", rawURL, err)
	}
	host := fetch.HostKey(u)
	cur := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/robots.txt"}).String()
	var chain *fetch.Chain
	for {
		resp, err := do(ctx, cur, robotsRequest)
		if err == nil && resp != nil && resp.Next != "" {
			if follow, _ := robotsHopRule(host, &chain, cur, resp.Next); follow {
				cur = resp.Next
				continue
			}
			resp, err = nil, robotsGaveUp(cur)
		}
		hr := &HostRobots{rules: robotsFromFetch(resp, err, robots.ProductToken(userAgent))}
		if hr.rules.disallowAll && hr.rules.reason != "" {
			hr.unavailable = &RobotsError{URL: cur, Reason: hr.rules.reason, Err: err}
		}
		return hr, nil
	}
}

// Unavailable is the *RobotsError of a robots.txt that could not be had
// (everything is disallowed until it can be), nil otherwise.
func (h *HostRobots) Unavailable() error { return h.unavailable }

// Allowed reports whether rawURL may be fetched.
func (h *HostRobots) Allowed(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && h.rules.allowed(u)
}

// CrawlDelay is the robots.txt's Crawl-delay for the User-Agent, 0 when
// it sets none.
func (h *HostRobots) CrawlDelay() time.Duration { return h.rules.delay }

// Reason says why everything is disallowed, when the robots.txt could not
// be had; "" otherwise.
func (h *HostRobots) Reason() string { return h.rules.reason }
