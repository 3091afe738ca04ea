package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/temoto/robotstxt"

	"backfill/fetch"
)

// maxRobotsBody is the most of a robots.txt that is parsed; RFC 9309 asks
// crawlers to parse at least 500 KiB and lets them ignore the rest.
const maxRobotsBody = 500 << 10

// robotsMaxRedirects is how many redirects a robots.txt fetch follows:
// RFC 9309 asks for at least five and lets a crawler treat more as an
// unavailable file (which allows everything).
const robotsMaxRedirects = 5

// robotsRules is what one host's robots.txt says to our product token.
type robotsRules struct {
	status      int // HTTP status of the fetch; 0 when unreachable
	allowAll    bool
	disallowAll bool
	group       *robotstxt.Group // the group for our token, when neither of the above
	delay       time.Duration    // Crawl-delay of that group; 0 when absent
	expires     time.Time
	parseErr    error // lines the parser refused (the rest was used)

	// Set when the fetch failed and everything is disallowed until a
	// retry succeeds: why, how many fetches in a row failed, and, when
	// the host could not be reached at all, the network class its pages
	// are answered with instead of "robots".
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
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	return r.group.Test(path)
}

// parseRobots turns a robots.txt answer into rules for token (the product
// token of our User-Agent, lower case). 2xx is parsed; 4xx means there is no
// robots.txt, so everything is allowed; anything else (5xx, unreachable,
// nonsense statuses) disallows everything for now. Lines the parser refuses
// are dropped and the rest is used, so one bad line does not discard a
// site's rules.
func parseRobots(status int, body []byte, token string) *robotsRules {
	r := &robotsRules{status: status}
	switch {
	case status >= 200 && status < 300:
	case status >= 400 && status < 500 && status != http.StatusTooManyRequests:
		r.allowAll = true
		return r
	default:
		r.disallowAll = true
		return r
	}
	if len(body) > maxRobotsBody {
		body = body[:maxRobotsBody]
	}
	data, err := robotstxt.FromBytes(body)
	if err != nil {
		r.parseErr = err
		data, err = robotstxt.FromBytes(dropRefusedLines(body))
	}
	if err != nil || data == nil {
		// Nothing usable survived; RFC 9309 treats unparseable content as
		// no rules.
		r.allowAll = true
		return r
	}
	r.group = data.FindGroup(token)
	r.delay = r.group.CrawlDelay
	if r.delay < 0 {
		// An absurd Crawl-delay overflowed the conversion to a duration;
		// it is over any ceiling.
		r.delay = time.Duration(math.MaxInt64)
	}
	return r
}

// robotsFromFetch turns the outcome of a robots.txt fetch into rules for
// token. An answer is judged by its status (a body that failed on its
// content type is still parsed: lines that are not rules are ignored, so
// an HTML page usually yields none); too many redirects mean there is no
// usable file, which allows everything; a host that could not be reached
// disallows everything and carries the network class; anything else (a
// 429, a 5xx, a response that could not be read) disallows everything.
func robotsFromFetch(resp *fetch.Response, err error, token string) *robotsRules {
	class := fetch.ClassOf(err)
	switch {
	case resp != nil && resp.Status != 0:
		body := resp.Body
		if len(body) > maxRobotsBody {
			body = body[:maxRobotsBody]
		}
		r := parseRobots(resp.Status, body, token)
		if r.disallowAll {
			r.reason = fmt.Sprintf("robots.txt answered status %d", resp.Status)
		}
		return r
	case class == fetch.ClassRedirect:
		return &robotsRules{allowAll: true}
	case networkClass(class):
		return &robotsRules{disallowAll: true, unreachable: class,
			reason: fmt.Sprintf("robots.txt unreachable (%s): %v", class, err)}
	}
	return &robotsRules{disallowAll: true, reason: fmt.Sprintf("robots.txt could not be read: %v", err)}
}

// dropRefusedLines removes the lines the parser refuses outright: rules and
// Crawl-delay before any User-agent, and Crawl-delay values that are not a
// finite, non-negative number.
func dropRefusedLines(body []byte) []byte {
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 4096), maxRobotsBody+1)
	sawAgent := false
	for sc.Scan() {
		line := sc.Text()
		key, val, ok := strings.Cut(line, ":")
		if ok {
			key = strings.ToLower(strings.TrimSpace(key))
			if i := strings.IndexByte(val, '#'); i >= 0 {
				val = val[:i]
			}
			val = strings.TrimSpace(val)
			switch key {
			case "user-agent", "useragent":
				sawAgent = true
			case "allow", "disallow":
				if !sawAgent {
					continue
				}
			case "crawl-delay", "crawldelay":
				f, err := strconv.ParseFloat(val, 64)
				if !sawAgent || err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
					continue
				}
			}
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// productToken is the part of a User-Agent that robots.txt groups name:
// "backfill/1.0 (+https://backfill.example/bot)" → "backfill".
func productToken(userAgent string) string {
	tok := strings.TrimSpace(userAgent)
	if i := strings.IndexAny(tok, "/ ;("); i >= 0 {
		tok = tok[:i]
	}
	tok = strings.ToLower(tok)
	if tok == "" {
		return "backfill"
	}
	return tok
}

// CheckRobots fetches the robots.txt of rawURL's host with f and reports
// whether userAgent may fetch rawURL, by the same rules the workers apply.
// It is for one-off fetches outside a crawl, such as trying a mapping on a
// live page.
func CheckRobots(ctx context.Context, f *fetch.Fetcher, userAgent, rawURL string) (bool, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false, fmt.Errorf("check robots.txt for %s: %w", rawURL, err)
	}
	robotsURL := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/robots.txt"}).String()
	resp, err := f.Get(ctx, robotsURL)
	return robotsFromFetch(resp, err, productToken(userAgent)).allowed(u), nil
}
