package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
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

// robotsErrorTTL bounds how long a failed robots.txt fetch (5xx or
// unreachable, which disallows everything) is trusted before it is tried
// again, so a host that was briefly down is not shut out for a whole TTL.
const robotsErrorTTL = 10 * time.Minute

// robotsRules is what one host's robots.txt says to our product token.
type robotsRules struct {
	status      int // HTTP status of the fetch; 0 when unreachable
	allowAll    bool
	disallowAll bool
	group       *robotstxt.Group // the group for our token, when neither of the above
	delay       time.Duration    // Crawl-delay of that group; 0 when absent
	expires     time.Time
	parseErr    error // lines the parser refused (the rest was used)
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
	case status >= 400 && status < 500:
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
	resp, _ := f.Get(ctx, robotsURL)
	status, body := 0, []byte(nil)
	if resp != nil {
		status, body = resp.Status, resp.Body
	}
	if len(body) > maxRobotsBody {
		body = body[:maxRobotsBody]
	}
	return parseRobots(status, body, productToken(userAgent)).allowed(u), nil
}
