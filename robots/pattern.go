package robots

import "strings"

// pattern is the path of an Allow or Disallow rule, ready for matching:
// the literal runs between its wildcards, percent-decoded.
type pattern struct {
	// segs are the literal runs around each "*": "/a*b*" is
	// ["/a", "b", ""]. There is always at least one; the first is
	// anchored at the start of the path.
	segs []string
	// anchored is set by a final "$": the last run must end the path.
	anchored bool
	// octets is the pattern's length for precedence, see octetsOf.
	octets int
}

// compile turns a rule's value into a pattern. ok is false for a value
// that can never match anything: empty, or not starting with "/" or "*".
func compile(v string) (p pattern, ok bool) {
	if v == "" || v[0] != '/' && v[0] != '*' {
		return pattern{}, false
	}
	if strings.HasSuffix(v, "$") {
		p.anchored = true
		p.octets++
		v = v[:len(v)-1]
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '*':
			p.segs = append(p.segs, b.String())
			b.Reset()
			p.octets++
			continue
		case c == '%' && i+2 < len(v) && isHex(v[i+1]) && isHex(v[i+2]):
			c = unhex(v[i+1])<<4 | unhex(v[i+2])
			i += 2
		}
		b.WriteByte(c)
		p.octets += octetsOf(c)
	}
	p.segs = append(p.segs, b.String())
	return p, true
}

// match reports whether the pattern matches path, a decoded request
// target (see decode). Runs between wildcards are found leftmost, which
// leaves the most room for the runs after them, so the greedy walk is
// exact.
func (p *pattern) match(path string) bool {
	n := len(p.segs)
	first := p.segs[0]
	if n == 1 {
		if p.anchored {
			return path == first
		}
		return strings.HasPrefix(path, first)
	}
	if !strings.HasPrefix(path, first) {
		return false
	}
	pos := len(first)
	for _, s := range p.segs[1 : n-1] {
		j := strings.Index(path[pos:], s)
		if j < 0 {
			return false
		}
		pos += j + len(s)
	}
	last := p.segs[n-1]
	if p.anchored {
		return len(path)-pos >= len(last) && strings.HasSuffix(path, last)
	}
	return strings.Contains(path[pos:], last)
}

// decode percent-decodes a request target (or a rule's literal run): each
// "%xx" with two hex digits becomes its octet; anything else, a lone "%"
// included, stays as it is. Decoding both sides makes every spelling of a
// path compare equal, which is what RFC 9309's normalisation (encode what
// is outside ASCII or reserved, decode what is unreserved, hex digits in
// either case) amounts to.
func decode(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			c = unhex(s[i+1])<<4 | unhex(s[i+2])
			i += 2
		}
		b.WriteByte(c)
	}
	return b.String()
}

// octetsOf is what octet c of a decoded pattern counts towards the
// pattern's length: one for a character a URI carries as it is (RFC 3986
// unreserved and reserved characters), three for any other, which a URI
// carries percent-encoded. Equivalent spellings of a pattern ("/baz" and
// "/%62%61%7A", "/ツ" and "/%E3%83%84") so count the same, and an Allow and
// a Disallow of one path tie.
func octetsOf(c byte) int {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return 1
	case strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0:
		return 1
	}
	return 3
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}
