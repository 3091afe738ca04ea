package robots

import (
	"bytes"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxSize is how much of a robots.txt is parsed; RFC 9309 asks crawlers to
// parse at least 500 KiB and lets them ignore the rest.
const MaxSize = 500 << 10

// maxLine is the longest line read; the rest of a longer line is ignored.
// It is the reference parser's: a buffer of eight times the longest URL
// browsers take, less the one octet that ends it.
const maxLine = 2083*8 - 1

// Rules is what one robots.txt says to one product token.
type Rules struct {
	rules   []rule // most specific first; Allow before Disallow on a tie
	delay   time.Duration
	ignored int
}

// rule is one Allow or Disallow line.
type rule struct {
	pattern
	allow bool
}

// Parse reads a robots.txt body (its first MaxSize bytes) for the crawler
// whose product token is token: the rules and Crawl-delay of the groups
// naming it, else of the "*" groups. Nothing in a body is an error: what
// cannot be read is ignored and counted (Ignored), and the rest is used.
func Parse(body []byte, token string) *Rules {
	if len(body) > MaxSize {
		body = body[:MaxSize]
	}
	body = skipBOM(body)
	p := parser{token: token, delay: -1}
	for len(body) > 0 {
		i := bytes.IndexAny(body, "\r\n")
		if i < 0 {
			p.line(body)
			break
		}
		p.line(body[:i])
		if body[i] == '\r' && i+1 < len(body) && body[i+1] == '\n' {
			i++
		}
		body = body[i+1:]
	}
	return p.result()
}

// Allowed reports whether target, a request target as sent on the request
// line (escaped path, then "?" and the query if any), may be fetched.
func (r *Rules) Allowed(target string) bool {
	if target == "" {
		target = "/"
	}
	path := canonical(target)
	unencoded := plain(path)
	if unencoded == "/robots.txt" {
		return true
	}
	encoded := unencoded != path // the target encodes an unreserved character: try both forms
	for i := range r.rules {
		if r.rules[i].match(unencoded) || encoded && r.rules[i].match(path) {
			return r.rules[i].allow
		}
	}
	return true
}

// AllowedURL is Allowed for u's path and query.
func (r *Rules) AllowedURL(u *url.URL) bool { return r.Allowed(requestTarget(u)) }

// requestTarget is what a request for u sends on its request line: the
// escaped path ("/" for none) and the query, without the fragment.
func requestTarget(u *url.URL) string {
	target := u.EscapedPath()
	if target == "" {
		target = "/"
	}
	if u.RawQuery != "" || u.ForceQuery {
		target += "?" + u.RawQuery
	}
	return target
}

// CrawlDelay is the largest Crawl-delay of the groups that apply; 0 when
// they give none. A value too large for a Duration is the largest one.
func (r *Rules) CrawlDelay() time.Duration { return r.delay }

// Ignored counts the lines that looked like records but could not be
// used: neither "key: value" nor two words, no key, a rule outside any
// group, a rule path that can never match, a Crawl-delay that is not a
// number of seconds.
func (r *Rules) Ignored() int { return r.ignored }

// parser reads a file line by line, keeping what applies to token.
type parser struct {
	token string

	agents   bool // a User-agent line has been seen: rules belong to a group
	ruled    bool // a rule followed the group's User-agent lines: the next one starts a group
	mine     bool // the current group names token
	star     bool // the current group names "*"
	named    bool // some group names token
	own, all []rule
	// delay is the current group's largest Crawl-delay, -1 for none. It
	// is the group's whatever User-agent lines come after it, so it is
	// kept until the group ends (endGroup).
	delay              time.Duration
	ownDelay, allDelay time.Duration
	ignored            int
}

// endGroup files the current group's Crawl-delay with the groups it
// belongs to.
func (p *parser) endGroup() {
	switch {
	case p.delay < 0:
	case p.mine:
		p.ownDelay = max(p.ownDelay, p.delay)
	case p.star:
		p.allDelay = max(p.allDelay, p.delay)
	}
	p.mine, p.star, p.ruled, p.delay = false, false, false, -1
}

type key int

const (
	keyOther key = iota
	keyAgent
	keyAllow
	keyDisallow
	keyDelay
)

// keyPrefixes recognise a record by the start of its key, case-insensitively,
// with the misspellings Google's parser accepts.
var keyPrefixes = []struct {
	prefix string
	key    key
}{
	{"user-agent", keyAgent}, {"useragent", keyAgent}, {"user agent", keyAgent},
	{"allow", keyAllow},
	{"disallow", keyDisallow}, {"dissallow", keyDisallow}, {"dissalow", keyDisallow},
	{"disalow", keyDisallow}, {"diasllow", keyDisallow}, {"disallaw", keyDisallow},
	{"crawl-delay", keyDelay}, {"crawldelay", keyDelay},
}

func keyOf(k string) key {
	for _, kp := range keyPrefixes {
		if len(k) >= len(kp.prefix) && strings.EqualFold(k[:len(kp.prefix)], kp.prefix) {
			return kp.key
		}
	}
	return keyOther
}

func (p *parser) line(b []byte) {
	if len(b) > maxLine {
		b = b[:maxLine]
	}
	if i := bytes.IndexByte(b, '#'); i >= 0 {
		b = b[:i]
	}
	line := trimSpace(string(b))
	if line == "" {
		return
	}
	k, v, ok := strings.Cut(line, ":")
	if !ok {
		k, v, ok = withoutColon(line)
	}
	k, v = trimSpace(k), trimSpace(v)
	if !ok || k == "" {
		p.ignored++
		return
	}
	switch kk := keyOf(k); kk {
	case keyAgent:
		if p.ruled {
			p.endGroup()
		}
		p.agents = true
		star, tok := agentLine(v)
		switch {
		case star:
			p.star = true
		case tok != "" && strings.EqualFold(tok, p.token):
			p.mine, p.named = true, true
		}
	case keyAllow, keyDisallow:
		if !p.agents {
			p.ignored++
			return
		}
		p.ruled = true
		p.rule(v, kk == keyAllow)
	case keyDelay:
		if !p.agents {
			p.ignored++
			return
		}
		d, ok := parseDelay(v)
		if !ok {
			p.ignored++
			return
		}
		p.delay = max(p.delay, d)
	}
}

// withoutColon reads a line that lacks the colon, since operators write
// "Disallow /private/" and mean it: a key and a value separated by one
// run of spaces and tabs. A line of more than two such words is not read
// ("Disallow /a b" could mean either path).
func withoutColon(line string) (k, v string, ok bool) {
	i := strings.IndexAny(line, " \t")
	if i < 0 {
		return "", "", false
	}
	k, v = line[:i], strings.TrimLeft(line[i:], " \t")
	if strings.ContainsAny(v, " \t") {
		return "", "", false
	}
	return k, v, true
}

// rule adds an Allow or Disallow line's path to the current group.
func (p *parser) rule(v string, allow bool) {
	if v == "" {
		return // matches nothing; says only that the group has a rule
	}
	pat, ok := compile(v)
	if !ok {
		p.ignored++
		return
	}
	var dst *[]rule
	switch {
	case p.mine:
		dst = &p.own
	case p.star:
		dst = &p.all
	default:
		return
	}
	*dst = append(*dst, rule{pattern: pat, allow: allow})
	if allow {
		// Google's parser reads "Allow: /dir/index.html" (or index.htm…)
		// as also allowing "/dir/" itself.
		if i := strings.LastIndexByte(v, '/'); i >= 0 && strings.HasPrefix(v[i:], "/index.htm") {
			if dir, ok := compile(v[:i+1] + "$"); ok {
				*dst = append(*dst, rule{pattern: dir, allow: true})
			}
		}
	}
}

func (p *parser) result() *Rules {
	p.endGroup()
	r := &Rules{rules: p.all, delay: p.allDelay, ignored: p.ignored}
	if p.named {
		r.rules, r.delay = p.own, p.ownDelay
	}
	slices.SortStableFunc(r.rules, func(a, b rule) int {
		if a.octets != b.octets {
			return b.octets - a.octets
		}
		switch {
		case a.allow == b.allow:
			return 0
		case a.allow:
			return -1
		}
		return 1
	})
	return r
}

// parseDelay reads a Crawl-delay value: a finite, non-negative number of
// seconds. One too large for a Duration is the largest Duration.
func parseDelay(v string) (time.Duration, bool) {
	if v == "" || strings.ContainsAny(v, "xXpPnN_") { // no hex, Inf, NaN or digit separators
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil && !isRange(err) || f < 0 || math.IsNaN(f) {
		return 0, false
	}
	if f*float64(time.Second) >= math.MaxInt64 {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(f * float64(time.Second)), true
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// skipBOM drops a UTF-8 byte order mark, or the start of one, from the
// front of body.
func skipBOM(body []byte) []byte {
	for _, c := range []byte{0xEF, 0xBB, 0xBF} {
		if len(body) == 0 || body[0] != c {
			break
		}
		body = body[1:]
	}
	return body
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\v' || c == '\f' }

func trimSpace(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r < 0x80 && isSpace(byte(r)) })
}
