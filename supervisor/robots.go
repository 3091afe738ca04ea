package supervisor

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"backfill/fetch"
	"backfill/robots"
)

// robotsMaxRedirects is how many redirects a robots.txt fetch follows:
// RFC 9309 asks for at least five and lets a crawler treat more as an
// unavailable file (which allows everything).
const robotsMaxRedirects = 5

// getRobots reads robotsURL with f, the fetcher pages are read with (one
// connection per host serves both): each hop a request of its own, at
// most robotsMaxRedirects of them, no meta refresh (RFC 9309 knows none),
// at most robots.MaxSize bytes kept. Too many redirects, or a loop, is a
// ClassRedirect error, which robotsFromFetch takes for no usable file.
func getRobots(ctx context.Context, f *fetch.Fetcher, robotsURL string) (*fetch.Response, error) {
	chain := fetch.NewChain(robotsURL, robotsMaxRedirects)
	at := robotsURL
	for {
		resp, err := f.Do(ctx, at, fetch.Request{MaxBody: robots.MaxSize, IgnoreMetaRefresh: true})
		if err != nil || resp.Next == "" {
			return resp, err
		}
		if err := chain.Add(resp.Next); err != nil {
			return nil, err
		}
		at = resp.Next
	}
}

// robotsRules is what one host's robots.txt says to our product token.
type robotsRules struct {
	status      int // HTTP status of the fetch; 0 when unreachable
	allowAll    bool
	disallowAll bool
	rules       *robots.Rules // the rules for our token, when neither of the above
	delay       time.Duration // their Crawl-delay; 0 when absent
	ignored     int           // lines of the file that could not be used
	expires     time.Time

	// Set when the fetch failed and everything is disallowed until a
	// retry succeeds: why, how many fetches in a row failed, and, when
	// the host could not be reached at all, the network class its pages
	// are answered with instead of "robots-unavailable".
	reason      string
	failures    int
	unreachable fetch.Class
}

// allowed reports whether u may be fetched. The path and query are matched
// as sent on the request line, as RFC 9309 prescribes.
func (r *robotsRules) allowed(u *url.URL) bool {
	switch {
	case r.allowAll:
		return true
	case r.disallowAll:
		return false
	}
	return r.rules.AllowedURL(u)
}

// parseRobots turns a robots.txt answer into rules for token (the product
// token of our User-Agent). 2xx is parsed; 4xx means there is no
// robots.txt, so everything is allowed; anything else (5xx, unreachable,
// nonsense statuses) disallows everything for now. Lines that cannot be
// used are ignored and the rest is used, so one bad line does not discard
// a site's rules.
func parseRobots(status int, body []byte, token string) *robotsRules {
	r := &robotsRules{status: status}
	switch {
	case status >= 200 && status < 300:
	case status >= 400 && status < 500 && status != http.StatusTooManyRequests:
		r.allowAll = true
		return r
	default:
		r.disallowAll = true
		r.reason = fmt.Sprintf("robots.txt answered status %d", status)
		if status == 0 {
			r.reason = "robots.txt could not be read"
		}
		return r
	}
	r.rules = robots.Parse(body, token)
	r.delay, r.ignored = r.rules.CrawlDelay(), r.rules.Ignored()
	return r
}

// robotsFromFetch turns the outcome of a robots.txt fetch into rules for
// token. An answer is judged by its status (a body that failed on its
// content type is still parsed: lines that are not rules are ignored, so
// an HTML page usually yields none); too many redirects mean there is no
// usable file, which allows everything; a host that could not be reached
// (no address, no connection, no TLS, no answer in time, an address
// refused) disallows everything and carries the network class; anything
// else — a 429, a 5xx, a connection reset or a garbled answer once
// connected, a response that could not be read — disallows everything as
// robots.txt unavailable.
func robotsFromFetch(resp *fetch.Response, err error, token string) *robotsRules {
	class := fetch.ClassOf(err)
	switch {
	case resp != nil && resp.Status != 0:
		body := resp.Body
		if len(body) > robots.MaxSize {
			body = body[:robots.MaxSize]
		}
		return parseRobots(resp.Status, body, token)
	case class == fetch.ClassRedirect:
		return &robotsRules{allowAll: true}
	case unreachableClass(class):
		return &robotsRules{disallowAll: true, unreachable: class,
			reason: fmt.Sprintf("robots.txt unreachable (%s): %v", class, err)}
	}
	return &robotsRules{disallowAll: true, reason: fmt.Sprintf("robots.txt could not be read (%s): %v", class, err)}
}

// unreachableClass reports the fetch classes that mean a host could not be
// reached at all: its pages are answered with that class. A failure after
// the host answered (a reset, a garbled response: "protocol") is not one:
// the host is there and its robots.txt is what is unavailable.
func unreachableClass(c fetch.Class) bool {
	return c != fetch.ClassProtocol && networkClass(c)
}

// RobotsError is a robots.txt that could not be read (the host not
// reachable, an address refused, a 5xx or 429, a response cut short):
// under RFC 9309 nothing may be fetched from the host until it can be,
// which is not the same as its rules disallowing the page. Err is the
// fetch's error when there was one (a *fetch.Error with its class).
type RobotsError struct {
	URL    string // the robots.txt URL
	Reason string
	Err    error
}

func (e *RobotsError) Error() string { return e.URL + ": " + e.Reason }
func (e *RobotsError) Unwrap() error { return e.Err }

// CheckRobots fetches the robots.txt of rawURL's host with f and reports
// whether userAgent may fetch rawURL, by the same rules the workers apply.
// A robots.txt that could not be read is a *RobotsError, not a "no". It is
// for one-off fetches outside a crawl, such as trying a mapping on a live
// page.
func CheckRobots(ctx context.Context, f *fetch.Fetcher, userAgent, rawURL string) (bool, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false, fmt.Errorf("check robots.txt for %s: %w", rawURL, err)
	}
	robotsURL := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/robots.txt"}).String()
	resp, err := getRobots(ctx, f, robotsURL)
	r := robotsFromFetch(resp, err, robots.ProductToken(userAgent))
	if r.disallowAll && r.reason != "" {
		return false, &RobotsError{URL: robotsURL, Reason: r.reason, Err: err}
	}
	return r.allowed(u), nil
}
