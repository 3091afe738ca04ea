package robots

import "strings"

// pattern is the path of an Allow or Disallow rule, ready for matching:
// the literal runs between its wildcards, in canonical form (see canon).
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
	var c canon
	for i, run := range strings.Split(v, "*") {
		if i > 0 {
			p.octets++
		}
		p.segs = append(p.segs, c.run(run, true))
	}
	p.octets += c.octets
	return p, true
}

// match reports whether the pattern matches path, a request target in
// canonical form (see canonical). Runs between wildcards are found leftmost,
// which leaves the most room for the runs after them, so the greedy walk
// is exact.
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

// canon writes rules and request targets in one canonical form, so that
// spellings of a path that RFC 9309 holds equal compare equal octet by
// octet, and spellings it keeps apart stay apart:
//
//   - "%xx" with two hex digits is read as the octet it encodes. An octet
//     outside ASCII, "%" itself and an unreserved character (letters,
//     digits, "-", ".", "_", "~") stay encoded, as "%XX" with upper-case
//     digits; so do "/" and "?" in the path, where decoding them would
//     move a segment or start the query ("/a%2Fb" is not "/a/b",
//     "/q%3Fx" is not "/q?x"). Any other ASCII octet is decoded ("%2A"
//     is a literal "*", "%3A%2F%2F" in a query is "://").
//   - Octets outside ASCII written raw in a rule are encoded; in a target
//     they stay raw, since a target is sent encoded and a raw one names
//     no path a rule can spell.
//
// An unreserved character stays encoded here because a rule that encodes
// one matches only targets that do too; a target that encodes one also
// matches a rule spelling it plainly (see plain).
type canon struct {
	b      strings.Builder
	query  bool // a raw "?" was written: the rest is the query
	octets int  // precedence length of what was written, see octetsOf
}

// write appends s in canonical form; rule says s is (a run of) a rule.
func (c *canon) write(s string, rule bool) {
	for i := 0; i < len(s); i++ {
		o := s[i]
		switch {
		case o == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			o = unhex(s[i+1])<<4 | unhex(s[i+2])
			i += 2
			if o >= 0x80 || o == '%' || isUnreserved(o) || !c.query && (o == '/' || o == '?') {
				c.encoded(o)
				continue
			}
		case o >= 0x80 && rule:
			c.encoded(o)
			continue
		case o == '?':
			c.query = true
		}
		c.b.WriteByte(o)
		c.octets += octetsOf(o)
	}
}

func (c *canon) encoded(o byte) {
	const digits = "0123456789ABCDEF"
	c.b.WriteByte('%')
	c.b.WriteByte(digits[o>>4])
	c.b.WriteByte(digits[o&15])
	c.octets += 3
}

// take returns what was written since the last take.
func (c *canon) take() string {
	s := c.b.String()
	c.b.Reset()
	return s
}

// run is s in canonical form, as write and take give it, without copying
// s when it is canonical already: no "%", and for a rule no octet outside
// ASCII (the common case, and the cost of every page's check).
func (c *canon) run(s string, rule bool) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' || rule && s[i] >= 0x80 {
			c.write(s, rule)
			return c.take()
		}
	}
	for i := 0; i < len(s); i++ {
		c.query = c.query || s[i] == '?'
		c.octets += octetsOf(s[i])
	}
	return s
}

// canonical is request target s in canonical form.
func canonical(s string) string {
	var c canon
	return c.run(s, false)
}

// plain decodes the unreserved characters a canonical target encodes:
// "/%61dmin" is "/admin". A target is matched in both forms, so that a
// rule spelling a character plainly matches either spelling of it.
func plain(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		o := s[i]
		if o == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			if d := unhex(s[i+1])<<4 | unhex(s[i+2]); isUnreserved(d) {
				o = d
				i += 2
			}
		}
		b.WriteByte(o)
	}
	return b.String()
}

// octetsOf is what octet c of a canonical pattern counts towards the
// pattern's length: one for a character a URI carries as it is (RFC 3986
// unreserved and reserved characters), three for any other, which a URI
// carries percent-encoded (an encoded octet counts its three characters).
// Equivalent spellings of a pattern ("/ツ" and "/%E3%83%84", "/%2A" and
// "/*" read literally) so count the same, and an Allow and a Disallow of
// one path tie.
func octetsOf(c byte) int {
	switch {
	case isUnreserved(c):
		return 1
	case strings.IndexByte(":/?#[]@!$&'()*+,;=", c) >= 0:
		return 1
	}
	return 3
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
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
