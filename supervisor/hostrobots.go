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
}

// FetchRobots fetches the robots.txt of rawURL's host with f for userAgent.
// A robots.txt that cannot be had disallows everything, as in a crawl;
// the error is only for a URL that does not parse.
func FetchRobots(ctx context.Context, f *fetch.Fetcher, userAgent, rawURL string) (*HostRobots, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("robots.txt for %s: %w", rawURL, err)
	}
	robotsURL := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/robots.txt"}).String()
	resp, err := getRobots(ctx, f, robotsURL)
	return &HostRobots{rules: robotsFromFetch(resp, err, robots.ProductToken(userAgent))}, nil
}

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
