package etl

// The fast builder's tokenizer: it reads the page's bytes into tokens
// (fastToken), as html.Tokenizer would, names and entities included.

import (
	"bytes"
	"encoding/binary"
	"strings"

	"golang.org/x/net/html"
	a "golang.org/x/net/html/atom"
)

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f'
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// Byte classes of the tokenizer's inner loops, one table load per byte.
const (
	cSpace     = 1 << iota // HTML whitespace
	cNameEnd               // ends a tag name: whitespace, '/', '>'
	cKeyEnd                // ends an attribute name: that and '='
	cUnquotEnd             // ends an unquoted attribute value: whitespace, '>'
	cLetter                // an ASCII letter
	cMarkup                // after '<', starts markup: a letter, '/', '!', '?'
)

var byteClass = func() (t [256]uint8) {
	for _, c := range []byte(fastWhitespace) {
		t[c] |= cSpace | cNameEnd | cKeyEnd | cUnquotEnd
	}
	t['/'] |= cNameEnd | cKeyEnd
	t['>'] |= cNameEnd | cKeyEnd | cUnquotEnd
	t['='] |= cKeyEnd
	for c := 'a'; c <= 'z'; c++ {
		t[c] |= cLetter | cMarkup
		t[c-'a'+'A'] |= cLetter | cMarkup
	}
	t['/'] |= cMarkup
	t['!'] |= cMarkup
	t['?'] |= cMarkup
	return t
}()

// next reads the next token into p.tok, setting p.bail where the input
// leaves the supported subset.
func (p *fastParser) next() {
	// Every token sets its data (the data of a page that bails is never
	// read); the other fields are reset here, which costs less than the
	// whole token.
	p.tok.typ, p.tok.atom, p.tok.attr = tEOF, 0, nil
	b, n := p.b, len(p.b)
	if p.pos >= n {
		p.tok.data = ""
		return
	}
	if p.rawTag != "" {
		tag := p.rawTag
		p.rawTag = ""
		if p.readRaw(tag) {
			return
		}
		if p.bail {
			return
		}
	}
	start := p.pos
	i := start
	for {
		// Tags often follow one another: look before calling IndexByte.
		j := 0
		if b[i] != '<' {
			j = bytes.IndexByte(b[i:], '<')
		}
		if j < 0 {
			p.pos = n
			p.setText(start, n)
			return
		}
		i += j
		if i+1 >= n {
			// A '<' at the very end is text.
			p.pos = n
			p.setText(start, n)
			return
		}
		c := b[i+1]
		if byteClass[c]&cMarkup != 0 {
			break
		}
		i++
	}
	if i > start {
		p.pos = i
		p.setText(start, i)
		return
	}
	c := b[i+1]
	switch {
	case byteClass[c]&cLetter != 0:
		p.pos = i + 2
		p.readTag(true)
	case c == '/':
		if i+2 >= n || byteClass[b[i+2]]&cLetter == 0 {
			// "</>", "</" at the end and bogus comments like "</ x>"
			// are rare enough to leave to html.Parse.
			p.bail = true
			return
		}
		p.pos = i + 3
		p.readTag(false)
	case c == '!':
		p.pos = i + 2
		p.readMarkupDeclaration()
	default: // '?': a bogus comment up to '>', starting at the '?'
		p.pos = i + 1
		p.readUntilCloseAngle()
	}
}

func (p *fastParser) setText(i, j int) {
	p.tok.typ = tText
	p.tok.data = unescapeText(p.s[i:j])
}

// unescapeText is html.UnescapeString, which ranges over runes before
// looking for '&'.
func unescapeText(s string) string {
	if strings.IndexByte(s, '&') < 0 {
		return s
	}
	return html.UnescapeString(s)
}

// readRaw reads raw text or RCDATA up to the end tag </tag; it reports
// whether it produced a (non-empty) text token.
func (p *fastParser) readRaw(tag string) bool {
	b, n := p.b, len(p.b)
	i := p.pos
	end := -1
	for {
		j := bytes.Index(b[i:], []byte("</"))
		if j < 0 {
			break
		}
		k := i + j + 2
		if k+len(tag) < n && asciiEqualFold(b[k:k+len(tag)], tag) {
			switch b[k+len(tag)] {
			case ' ', '\n', '\r', '\t', '\f', '/', '>':
				end = i + j
			}
		}
		if end >= 0 {
			break
		}
		i = i + j + 2
	}
	if end < 0 {
		// Raw text running to the end of the page.
		p.bail = true
		return false
	}
	if tag == "plaintext" || tag == "script" && bytes.Contains(b[p.pos:end], []byte("<!--")) {
		// Script escapes change where a script ends.
		p.bail = true
		return false
	}
	if end == p.pos {
		return false
	}
	p.tok.typ = tText
	p.tok.data = p.s[p.pos:end]
	if tag == "title" || tag == "textarea" {
		p.tok.data = html.UnescapeString(p.tok.data)
	}
	p.pos = end
	return true
}

func asciiEqualFold(b []byte, lower string) bool {
	for i := range len(lower) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func (p *fastParser) skipWhiteSpace() bool {
	for p.pos < len(p.b) && byteClass[p.b[p.pos]]&cSpace != 0 {
		p.pos++
	}
	if p.pos >= len(p.b) {
		p.bail = true
		return false
	}
	return true
}

// readTag reads a tag whose first name byte is at p.pos-1.
func (p *fastParser) readTag(start bool) { p.pos = p.readTagAt(p.pos, start) }

// scanTo returns the position of the first byte from pos on that is in
// class, or -1 when the page ends first.
func (p *fastParser) scanTo(pos int, class uint8) int {
	for ; pos < len(p.b); pos++ {
		if byteClass[p.b[pos]]&class != 0 {
			return pos
		}
	}
	return -1
}

// skipSpace skips whitespace from pos; at the end of the page the tag is
// cut off, which is left to html.Parse.
func (p *fastParser) skipSpace(pos int) (int, bool) {
	for pos < len(p.b) && byteClass[p.b[pos]]&cSpace != 0 {
		pos++
	}
	if pos >= len(p.b) {
		p.bail = true
		return pos, false
	}
	return pos, true
}

// readTagAt is readTag on a local position, returned at the end: its
// loops run per byte, and a field would be stored on every step.
func (p *fastParser) readTagAt(pos int, start bool) int {
	b, n := p.b, len(p.b)
	ok := false
	nameStart, nameEnd := pos-1, p.scanTo(pos, cNameEnd)
	if nameEnd < 0 {
		p.bail = true
		return pos
	}
	pos = nameEnd
	if pos, ok = p.skipSpace(pos); !ok {
		return pos
	}
	// The tag's attributes go straight to the end of the arena's slab.
	base := len(p.attrs)
	for b[pos] != '>' {
		// attribute key
		ks := pos
		ke := -1
		for pos < n {
			c := b[pos]
			// A '=' that starts a name is part of it.
			if byteClass[c]&cKeyEnd == 0 || c == '=' && pos == ks {
				pos++
				continue
			}
			ke = pos
			break
		}
		if ke < 0 {
			p.bail = true
			return pos
		}
		// attribute value
		vs, ve := pos, pos
		if pos, ok = p.skipSpace(pos); !ok {
			return pos
		}
		c := b[pos]
		pos++
		switch {
		case c == '/':
		case c != '=':
			pos--
		default:
			if pos, ok = p.skipSpace(pos); !ok {
				return pos
			}
			q := b[pos]
			pos++
			switch q {
			case '>':
				pos--
			case '"', '\'':
				j := bytes.IndexByte(b[pos:], q)
				if j < 0 {
					p.bail = true
					return pos
				}
				vs, ve = pos, pos+j
				pos += j + 1
			default:
				vs, ve = pos-1, p.scanTo(pos, cUnquotEnd)
				if ve < 0 {
					p.bail = true
					return pos
				}
				pos = ve
			}
		}
		if start && ke > ks {
			key := p.cachedName(ks, ke)
			dup := false
			for _, at := range p.attrs[base:] {
				if at.Key == key {
					dup = true
					break
				}
			}
			if !dup {
				if len(p.attrs) == cap(p.attrs) {
					// A new slab, with the tag's attributes so far.
					na := make([]html.Attribute, 0, max(256, 2*cap(p.attrs)))
					p.attrs, base = append(na, p.attrs[base:]...), 0
				}
				// Field by field, as in newNode.
				p.attrs = p.attrs[:len(p.attrs)+1]
				at := &p.attrs[len(p.attrs)-1]
				at.Namespace, at.Key, at.Val = "", key, unescapeAttr(p.s[vs:ve])
			}
		}
		if pos, ok = p.skipSpace(pos); !ok {
			return pos
		}
	}
	pos++ // the '>'
	if e := p.cached(nameStart, nameEnd); e != nil {
		p.tok.atom, p.tok.data = e.at, e.s
	} else {
		p.tok.atom, p.tok.data = p.name(nameStart, nameEnd)
	}
	if !start {
		p.tok.typ = tEnd
		return pos
	}
	p.tok.typ = tStart
	if len(p.attrs) > base {
		p.tok.attr = p.attrs[base:len(p.attrs):len(p.attrs)]
	}
	switch p.tok.atom {
	case a.Iframe, a.Noembed, a.Noframes, a.Noscript, a.Plaintext, a.Script, a.Style, a.Textarea, a.Title, a.Xmp:
		p.rawTag = p.tok.data
	}
	return pos
}

// cached returns the name cache's entry for the name in b[i:j] if it holds
// it: the usual case, kept small enough to inline.
func (p *fastParser) cached(i, j int) *nameEntry {
	n := j - i
	if uint(n-1) >= 8 || i+8 > len(p.b) {
		return nil
	}
	w := binary.LittleEndian.Uint64(p.b[i:]) & nameMask[n]
	// The page has no NUL byte, so w says the length too.
	e := &p.names[uint8(n*37+int(p.b[i])*7+int(p.b[j-1]))]
	if e.w != w {
		return nil
	}
	return e
}

// cachedName is name's string, through cached first.
func (p *fastParser) cachedName(i, j int) string {
	if e := p.cached(i, j); e != nil {
		return e.s
	}
	_, s := p.name(i, j)
	return s
}

// name returns the lower-cased name in b[i:j] with its atom, sharing the
// atom's string or the input where it can, and caches it. Callers try
// cached first.
func (p *fastParser) name(i, j int) (a.Atom, string) {
	raw := p.b[i:j]
	// A name cached finds has missed it; a longer one is compared here.
	var w uint64
	slot := nameSlot(raw)
	if n := j - i; n <= 8 && i+8 <= len(p.b) {
		w = binary.LittleEndian.Uint64(p.b[i:]) & nameMask[n]
	} else if e := &p.names[slot]; int(e.n) == n && e.w == 0 && e.at != 0 && e.s == string(raw) {
		return e.at, e.s
	}
	upper := false
	for _, c := range raw {
		if 'A' <= c && c <= 'Z' {
			upper = true
			break
		}
	}
	if upper {
		p.low = append(p.low[:0], raw...)
		for k, c := range p.low {
			if 'A' <= c && c <= 'Z' {
				p.low[k] = c + 'a' - 'A'
			}
		}
		raw = p.low
	}
	if at := a.Lookup(raw); at != 0 {
		if !upper {
			p.names[slot] = nameEntry{w: w, n: int32(len(raw)), at: at, s: at.String()}
		}
		return at, at.String()
	}
	if upper {
		return 0, string(raw)
	}
	return 0, p.s[i:j]
}

// nameEntry is a cached name: its atom and string, and the name itself,
// as a word when it is 1 to 8 bytes long (w, little-endian, zero-padded)
// or as the string.
type nameEntry struct {
	w  uint64
	at a.Atom
	n  int32 // 32 bytes in all: two entries to a cache line
	s  string
}

// nameMask[n] keeps the first n bytes of a little-endian word.
var nameMask = [9]uint64{0, 0xff, 0xffff, 0xffffff, 0xffffffff, 0xffffffffff, 0xffffffffffff, 0xffffffffffffff, 0xffffffffffffffff}

// nameSlot is where name caches a name: its length and first and last
// bytes tell apart the names a page uses most.
func nameSlot(b []byte) uint8 {
	if len(b) == 0 {
		return 0
	}
	return uint8(len(b)*37 + int(b[0])*7 + int(b[len(b)-1]))
}

// unescapeAttr unescapes an attribute value the way the tokenizer does for
// attributes, which differs from text for named references only: in an
// attribute one without a semicolon followed by '=' stays as it is, and so
// does a name that is not exactly an entity (text would decode an entity
// that is a prefix of it). Such ampersands are escaped first so that
// unescaping as text leaves them alone.
func unescapeAttr(v string) string {
	if strings.IndexByte(v, '&') < 0 {
		return v
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(v); i++ {
		if v[i] != '&' {
			continue
		}
		j := i + 1
		for j < len(v) && (isLetter(v[j]) || '0' <= v[j] && v[j] <= '9') {
			j++
		}
		if j == i+1 {
			continue // numeric or not a reference: the same as text
		}
		semi := j < len(v) && v[j] == ';'
		if semi {
			j++
		}
		if !semi && j < len(v) && v[j] == '=' || !exactEntity(v[i+1:j]) {
			b.WriteString(v[last:i])
			b.WriteString("&amp;")
			last = i + 1
		}
	}
	if last == 0 {
		return html.UnescapeString(v)
	}
	b.WriteString(v[last:])
	return html.UnescapeString(b.String())
}

// exactEntity reports whether name (with its semicolon, if any) is itself
// a named character reference. Decoding as text a name that only starts
// with an entity leaves the rest of the name, whose last byte is the
// name's last byte; no entity decodes to a string ending that way except
// "semi;".
func exactEntity(name string) bool {
	r := html.UnescapeString("&" + name)
	if r == "&"+name || r == "" {
		return false
	}
	return r[len(r)-1] != name[len(name)-1] || name == "semi;"
}

// readMarkupDeclaration reads after "<!": a comment, a doctype or a bogus
// comment.
func (p *fastParser) readMarkupDeclaration() {
	b, n := p.b, len(p.b)
	if p.pos+2 > n {
		p.bail = true
		return
	}
	if b[p.pos] == '-' && b[p.pos+1] == '-' {
		p.pos += 2
		rest := b[p.pos:]
		if len(rest) > 0 && rest[0] == '>' || len(rest) > 1 && rest[0] == '-' && rest[1] == '>' {
			p.bail = true
			return
		}
		j := bytes.Index(rest, []byte("-->"))
		if j < 0 || bytes.Contains(rest[:j+2], []byte("--!")) {
			p.bail = true
			return
		}
		p.tok.typ = tComment
		p.tok.data = html.UnescapeString(p.s[p.pos : p.pos+j])
		p.pos += j + 3
		return
	}
	if p.pos+7 <= n && asciiEqualFold(b[p.pos:p.pos+7], "doctype") {
		p.pos += 7
		if !p.skipWhiteSpace() {
			return
		}
		j := bytes.IndexByte(b[p.pos:], '>')
		if j < 0 {
			p.bail = true
			return
		}
		p.tok.typ = tDoctype
		p.tok.data = html.UnescapeString(p.s[p.pos : p.pos+j])
		p.pos += j + 1
		return
	}
	p.readUntilCloseAngle()
}

func (p *fastParser) readUntilCloseAngle() {
	j := bytes.IndexByte(p.b[p.pos:], '>')
	if j < 0 {
		p.bail = true
		return
	}
	p.tok.typ = tComment
	p.tok.data = html.UnescapeString(p.s[p.pos : p.pos+j])
	p.pos += j + 1
}
