package etl

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"sync"

	"golang.org/x/net/html"
	a "golang.org/x/net/html/atom"
)

// parseHTML builds the tree of an HTML page: through the fast builder when
// the page stays within what it reproduces exactly, else through
// html.Parse. Either way the result is the tree html.Parse would build.
// The arena, when not nil, holds the tree's nodes and attributes and is
// given back with releaseArena once nothing refers to the tree any more.
// ParserStandard skips the fast builder.
func parseHTML(body []byte, s string, plan *scanPlan, parser HTMLParser) (*html.Node, *arena, error) {
	if parser != ParserStandard {
		if root, ar, ok := fastParseArena(body, s, plan); ok {
			return root, ar, nil
		}
	}
	root, err := html.Parse(bytes.NewReader(body))
	return root, nil, err
}

// arena is the reusable memory of one page's extraction: the tree's nodes
// and attributes, the names the tokenizer has looked up, and the scratch
// of link collection. A page's tree is thousands of nodes, most of a
// page's allocation; taking an arena from the pool and giving it back once
// the extraction is done spares the collector from allocating and
// scanning that memory for every page. Slots are overwritten, not cleared,
// when reused, so an idle arena still points into the last page's body;
// the pool drops idle arenas at the next collections, which bounds that.
type arena struct {
	// names caches atoms by nameSlot: a page names a few dozen tags and
	// attributes thousands of times, and the cache costs one compare
	// where atom.Lookup hashes the name. First, so that its 32-byte
	// entries sit in the (page-aligned) arena two to a cache line.
	names [256]nameEntry
	nodes []html.Node
	attrs []html.Attribute
	// What the parser collects for Document.scan: the a and area hrefs,
	// the meta and script elements, the plan tags' elements.
	hrefs    []anchor
	special  []*html.Node
	tagLists [][]*html.Node
	// Link collection (outLinks) of the page's document.
	seenRaw map[string]struct{}
	seen    stringSet
}

// lists returns n empty element lists that keep their memory from the
// arena's last page.
func (ar *arena) lists(n int) [][]*html.Node {
	for len(ar.tagLists) < n {
		ar.tagLists = append(ar.tagLists, nil)
	}
	l := ar.tagLists[:n]
	for i := range l {
		l[i] = l[i][:0]
	}
	return l
}

var arenas sync.Pool

// maxPooledSlab bounds the arenas kept (in nodes): one huge page must not
// pin its memory for the rest of the crawl.
const maxPooledSlab = 1 << 16

// takeArena returns an empty arena with room for at least n nodes.
func takeArena(n int) *arena {
	ar, _ := arenas.Get().(*arena)
	if ar == nil {
		ar = &arena{}
	}
	if cap(ar.nodes) < n {
		ar.nodes = make([]html.Node, 0, n)
	}
	ar.nodes, ar.attrs, ar.hrefs, ar.special = ar.nodes[:0], ar.attrs[:0], ar.hrefs[:0], ar.special[:0]
	return ar
}

// releaseArena keeps ar for the next page. Nothing may use the tree built
// in it afterwards.
func releaseArena(ar *arena) {
	if ar == nil || cap(ar.nodes) > maxPooledSlab || cap(ar.attrs) > maxPooledSlab || cap(ar.seen.slots) > maxPooledSlab {
		return
	}
	arenas.Put(ar)
}

// fastParse is a tree builder for the common shape of real pages, several
// times faster than html.Parse because it scans the bytes once, takes text
// and attribute values as substrings of s (the same bytes as body, already a
// string) and allocates nodes and attributes in an arena.
//
// It follows html.Parse's tokenizer and insertion modes rule for rule for
// what it supports (implied html/head/body, implied end tags, tables with
// their implied tbody, raw text and RCDATA, formatting elements including
// their reconstruction), and reports ok=false as soon as the page needs
// anything else — foster parenting, the adoption agency's furthest-block
// case, foreign content, templates, framesets, <plaintext>, NUL bytes,
// script escapes, a tag or comment cut off by the end of the page — so that
// the caller parses with html.Parse instead. FuzzFastParse holds it to
// producing the same rendering as html.Parse whenever ok is true.
func fastParse(body []byte, s string) (root *html.Node, ok bool) {
	root, _, ok = fastParseArena(body, s, nil)
	return root, ok
}

// fastParseArena is fastParse, also returning the arena that holds the
// tree, for releaseArena, and in it what plan (nil: noPlan) has the parser
// collect for Document.scan.
func fastParseArena(body []byte, s string, plan *scanPlan) (root *html.Node, ar *arena, ok bool) {
	if plan == nil {
		plan = noPlan
	}
	if len(body) != len(s) || bytes.IndexByte(body, 0) >= 0 {
		return nil, nil, false
	}
	if bytes.IndexByte(body, '\r') >= 0 {
		// The tokenizer turns \r\n and \r into \n wherever it takes text
		// (text, attribute values, comments); everywhere else a \r is
		// whitespace like \n, so normalizing up front is the same.
		body = normalizeNewlines(body)
		s = string(body)
	}
	// About one node per '<'; a new slab is started if that falls short.
	ar = takeArena(bytes.Count(body, []byte{'<'}) + 8)
	p := &fastParser{b: body, s: s, doc: &html.Node{Type: html.DocumentNode},
		nodes: ar.nodes, attrs: ar.attrs, names: &ar.names,
		plan: plan, lists: ar.lists(len(plan.tags)), hrefs: ar.hrefs, special: ar.special}
	p.run()
	ar.hrefs, ar.special = p.hrefs, p.special
	if !p.overflowed {
		ar.nodes = p.nodes
	}
	// The last attribute slab is the largest; the next page starts in it.
	ar.attrs = p.attrs
	if p.bail {
		releaseArena(ar)
		return nil, nil, false
	}
	for n, b := range p.textBuf {
		n.Data = string(b)
	}
	return p.doc, ar, true
}

func normalizeNewlines(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == '\r' {
			if i+1 < len(b) && b[i+1] == '\n' {
				i++
			}
			c = '\n'
		}
		out = append(out, c)
	}
	return out
}

// insertion modes (the subset fastParse supports)
const (
	imInitial = iota
	imBeforeHTML
	imBeforeHead
	imInHead
	imAfterHead
	imInBody
	imText
	imInTable
	imInCaption
	imInColumnGroup
	imInTableBody
	imInRow
	imInCell
	imAfterBody
	imAfterAfterBody
)

// tokens
const (
	tEOF = iota
	tText
	tStart
	tEnd
	tComment
	tDoctype
)

type fastToken struct {
	typ  int
	atom a.Atom
	data string // tag name, text, comment or doctype
	attr []html.Attribute
}

// fastMarker marks a scope in the list of active formatting elements.
var fastMarker = &html.Node{Type: html.RawNode}

const fastWhitespace = " \t\r\n\f"

type fastParser struct {
	b   []byte
	s   string
	pos int

	rawTag string // the next text is raw text (or RCDATA) up to </rawTag

	tok  fastToken
	doc  *html.Node
	oe   []*html.Node
	afe  []*html.Node
	head *html.Node
	form *html.Node

	im, originalIM  int
	hasOriginalIM   bool
	quirks          bool
	fosterParenting bool
	bail            bool

	nodes      []html.Node
	overflowed bool // nodes is no longer the arena's slab
	attrs      []html.Attribute
	names      *[256]nameEntry // the arena's name cache
	plan       *scanPlan       // what collect collects, into:
	lists      [][]*html.Node
	hrefs      []anchor
	special    []*html.Node
	low        []byte
	textBuf    map[*html.Node][]byte
}

func (p *fastParser) run() {
	for !p.bail {
		p.next()
		if p.bail {
			return
		}
		// Most tokens are taken in body at the first try.
		if p.im != imInBody || !p.inBodyIM() {
			p.parseCurrentToken()
		}
		if p.tok.typ == tEOF {
			return
		}
	}
}

func (p *fastParser) parseCurrentToken() {
	for n := 0; !p.bail; n++ {
		if n > 16 { // every reprocessing chain is short; a loop is a bug
			p.bail = true
			return
		}
		if p.step() {
			return
		}
	}
}

func (p *fastParser) step() bool {
	switch p.im {
	case imInitial:
		return p.initialIM()
	case imBeforeHTML:
		return p.beforeHTMLIM()
	case imBeforeHead:
		return p.beforeHeadIM()
	case imInHead:
		return p.inHeadIM()
	case imAfterHead:
		return p.afterHeadIM()
	case imInBody:
		return p.inBodyIM()
	case imText:
		return p.textIM()
	case imInTable:
		return p.inTableIM()
	case imInCaption:
		return p.inCaptionIM()
	case imInColumnGroup:
		return p.inColumnGroupIM()
	case imInTableBody:
		return p.inTableBodyIM()
	case imInRow:
		return p.inRowIM()
	case imInCell:
		return p.inCellIM()
	case imAfterBody:
		return p.afterBodyIM()
	case imAfterAfterBody:
		return p.afterAfterBodyIM()
	}
	p.bail = true
	return true
}

// ---- tokenizer ----

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

// ---- tree ----

func (p *fastParser) newNode(t html.NodeType, at a.Atom, data string, attr []html.Attribute) *html.Node {
	if len(p.nodes) == cap(p.nodes) {
		p.overflowed = true
		p.nodes = make([]html.Node, 0, 256)
	}
	p.nodes = p.nodes[:len(p.nodes)+1]
	n := &p.nodes[len(p.nodes)-1]
	// Every field: the slot may hold a node of the arena's last page. One
	// by one, not as a composite literal, which the compiler builds on
	// the stack and copies in 16-byte moves that stall on the field
	// stores just made.
	n.Parent, n.FirstChild, n.LastChild, n.PrevSibling, n.NextSibling = nil, nil, nil, nil, nil
	n.Type, n.DataAtom, n.Data, n.Namespace, n.Attr = t, at, data, "", attr
	return n
}

func appendChild(parent, c *html.Node) {
	c.Parent = parent
	if last := parent.LastChild; last != nil {
		last.NextSibling = c
		c.PrevSibling = last
	} else {
		parent.FirstChild = c
	}
	parent.LastChild = c
}

func (p *fastParser) top() *html.Node {
	if len(p.oe) > 0 {
		return p.oe[len(p.oe)-1]
	}
	return p.doc
}

func (p *fastParser) pop() *html.Node {
	n := p.oe[len(p.oe)-1]
	p.oe = p.oe[:len(p.oe)-1]
	return n
}

func (p *fastParser) shouldFosterParent() bool {
	if p.fosterParenting {
		switch p.top().DataAtom {
		case a.Table, a.Tbody, a.Tfoot, a.Thead, a.Tr:
			return true
		}
	}
	return false
}

func (p *fastParser) addChild(n *html.Node) {
	if p.shouldFosterParent() {
		p.bail = true // foster parenting is left to html.Parse
		return
	}
	p.appendToTop(n)
}

// appendToTop appends n to the current node and, if an element, opens
// it. The caller has ruled out foster parenting.
func (p *fastParser) appendToTop(n *html.Node) {
	appendChild(p.top(), n)
	if n.Type == html.ElementNode {
		if p.plan.mask&scanBit(n.DataAtom) != 0 {
			p.collect(n)
		}
		p.oe = append(p.oe, n)
		if len(p.oe) > 512 { // html.Parse gives up here
			p.bail = true
		}
	}
}

// collect indexes a new element for Document.scan while it is at hand:
// its place in the plan's lists, its href, or itself if a meta or script
// (whose content and text come later). Its atom says its name: every
// element the fast parser makes has the atom of its name, or none. The
// order of making is document order: every element is appended as the
// last child of the current node, and the fast parser leaves every case
// that moves a node (foster parenting, the adoption agency's furthest
// block) to html.Parse; checkFastParse holds it to that.
func (p *fastParser) collect(n *html.Node) {
	for i, at := range p.plan.atoms {
		if n.DataAtom == at && (at != 0 || n.Data == p.plan.tags[i]) {
			p.lists[i] = append(p.lists[i], n)
		}
	}
	noteElement(n, &p.hrefs, &p.special)
}

func (p *fastParser) addText(text string) {
	if text == "" {
		return
	}
	if p.shouldFosterParent() {
		p.bail = true
		return
	}
	t := p.top()
	if last := t.LastChild; last != nil && last.Type == html.TextNode {
		if p.textBuf == nil {
			p.textBuf = map[*html.Node][]byte{}
		}
		b, ok := p.textBuf[last]
		if !ok {
			b = []byte(last.Data)
		}
		p.textBuf[last] = append(b, text...)
		return
	}
	p.appendToTop(p.newNode(html.TextNode, 0, text, nil)) // not fostered: checked above
}

func (p *fastParser) addComment() {
	p.addChild(p.newNode(html.CommentNode, 0, p.tok.data, nil))
}

func (p *fastParser) addElement() {
	p.addChild(p.newNode(html.ElementNode, p.tok.atom, p.tok.data, p.tok.attr))
}

func attrCompare(x, y html.Attribute) int {
	if c := strings.Compare(x.Namespace, y.Namespace); c != 0 {
		return c
	}
	if c := strings.Compare(x.Key, y.Key); c != 0 {
		return c
	}
	return strings.Compare(x.Val, y.Val)
}

func (p *fastParser) addFormattingElement() {
	tagAtom, attr := p.tok.atom, p.tok.attr
	p.addElement()
	if p.bail {
		return
	}
	if len(attr) > 1 {
		slices.SortFunc(attr, attrCompare)
	}
	identical := 0
	for i := len(p.afe) - 1; i >= 0; i-- {
		n := p.afe[i]
		if n == fastMarker {
			break
		}
		if n.Type != html.ElementNode || n.Namespace != "" || n.DataAtom != tagAtom {
			continue
		}
		if !slices.Equal(n.Attr, attr) {
			continue
		}
		identical++
		if identical >= 3 {
			p.afe = removeNode(p.afe, n)
		}
	}
	top := p.top()
	if len(top.Attr) > 1 {
		slices.SortFunc(top.Attr, attrCompare)
	}
	p.afe = append(p.afe, top)
}

func removeNode(s []*html.Node, n *html.Node) []*html.Node {
	i := indexNode(s, n)
	if i < 0 {
		return s
	}
	copy(s[i:], s[i+1:])
	s[len(s)-1] = nil
	return s[:len(s)-1]
}

func indexNode(s []*html.Node, n *html.Node) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == n {
			return i
		}
	}
	return -1
}

func (p *fastParser) clearActiveFormattingElements() {
	for len(p.afe) > 0 {
		n := p.afe[len(p.afe)-1]
		p.afe = p.afe[:len(p.afe)-1]
		if len(p.afe) == 0 || n == fastMarker {
			return
		}
	}
}

func (p *fastParser) reconstructActiveFormattingElements() {
	if len(p.afe) == 0 {
		return
	}
	n := p.afe[len(p.afe)-1]
	if n == fastMarker || indexNode(p.oe, n) != -1 {
		return
	}
	i := len(p.afe) - 1
	for n != fastMarker && indexNode(p.oe, n) == -1 {
		if i == 0 {
			i = -1
			break
		}
		i--
		n = p.afe[i]
	}
	for {
		i++
		old := p.afe[i]
		attr := make([]html.Attribute, len(old.Attr))
		copy(attr, old.Attr)
		clone := p.newNode(old.Type, old.DataAtom, old.Data, attr)
		p.addChild(clone)
		if p.bail {
			return
		}
		p.afe[i] = clone
		if i == len(p.afe)-1 {
			break
		}
	}
}

type fastScope int

const (
	defaultScope fastScope = iota
	listItemScope
	buttonScope
	tableScope
	tableRowScope
	tableBodyScope
)

func (p *fastParser) indexOfElementInScope(s fastScope, match ...a.Atom) int {
	for i := len(p.oe) - 1; i >= 0; i-- {
		t := p.oe[i].DataAtom
		if len(match) == 1 && t == match[0] || len(match) > 1 && slices.Contains(match, t) {
			return i
		}
		if scopeBoundaries&(1<<(t>>8&63)) == 0 {
			continue // no scope ends at this element
		}
		switch s {
		case listItemScope:
			if t == a.Ol || t == a.Ul {
				return -1
			}
		case buttonScope:
			if t == a.Button {
				return -1
			}
		case tableScope:
			if t == a.Html || t == a.Table || t == a.Template {
				return -1
			}
		}
		switch s {
		case defaultScope, listItemScope, buttonScope:
			switch t {
			case a.Applet, a.Caption, a.Html, a.Table, a.Td, a.Th, a.Marquee, a.Object, a.Template, a.Select:
				return -1
			}
		}
	}
	return -1
}

// scopeBoundaries has a bit for every element at which some scope ends
// (by a hash of its atom), so that most elements of the stack are passed
// over with one test.
var scopeBoundaries = func() (m uint64) {
	for _, t := range []a.Atom{a.Ol, a.Ul, a.Button, a.Html, a.Table, a.Template,
		a.Applet, a.Caption, a.Td, a.Th, a.Marquee, a.Object, a.Select} {
		m |= 1 << (t >> 8 & 63)
	}
	return m
}()

func (p *fastParser) elementInScope(s fastScope, match ...a.Atom) bool {
	return p.indexOfElementInScope(s, match...) != -1
}

func (p *fastParser) popUntil(s fastScope, match ...a.Atom) bool {
	if i := p.indexOfElementInScope(s, match...); i != -1 {
		p.oe = p.oe[:i]
		return true
	}
	return false
}

func (p *fastParser) clearStackToContext(s fastScope) {
	for i := len(p.oe) - 1; i >= 0; i-- {
		t := p.oe[i].DataAtom
		switch s {
		case tableScope:
			if t == a.Html || t == a.Table || t == a.Template {
				p.oe = p.oe[:i+1]
				return
			}
		case tableRowScope:
			if t == a.Html || t == a.Tr || t == a.Template {
				p.oe = p.oe[:i+1]
				return
			}
		case tableBodyScope:
			if t == a.Html || t == a.Tbody || t == a.Tfoot || t == a.Thead || t == a.Template {
				p.oe = p.oe[:i+1]
				return
			}
		}
	}
}

// closesTopByPop reports whether the end tag in body closes the current
// element and nothing else, which most end tags do: for the tags below,
// when the current element is theirs, each rule of the tEnd case in
// inBodyIM comes to popping it. The element is in scope (it is the
// current node), no implied end tag is above it, and a formatting element
// that is also the last active one has no furthest block.
func (p *fastParser) closesTopByPop() bool {
	top := p.top()
	if top.DataAtom != p.tok.atom {
		return false
	}
	switch p.tok.atom {
	case a.Address, a.Article, a.Aside, a.Blockquote, a.Button, a.Center, a.Details, a.Dialog, a.Dir, a.Div, a.Dl, a.Fieldset, a.Figcaption, a.Figure, a.Footer, a.Header, a.Hgroup, a.Listing, a.Main, a.Menu, a.Nav, a.Ol, a.Pre, a.Search, a.Section, a.Select, a.Summary, a.Ul,
		a.P, a.Li, a.Dd, a.Dt, a.H1, a.H2, a.H3, a.H4, a.H5, a.H6:
		return true
	case a.A, a.B, a.Big, a.Code, a.Em, a.Font, a.I, a.Nobr, a.S, a.Small, a.Strike, a.Strong, a.Tt, a.U:
		if k := len(p.afe) - 1; k >= 0 && p.afe[k] == top {
			p.afe = p.afe[:k]
			return true
		}
	}
	return false
}

func (p *fastParser) generateImpliedEndTags(except string) {
	i := len(p.oe) - 1
	for ; i >= 0; i-- {
		n := p.oe[i]
		switch n.DataAtom {
		case a.Dd, a.Dt, a.Li, a.Optgroup, a.Option, a.P, a.Rb, a.Rp, a.Rt, a.Rtc:
			if except != "" && n.Data == except {
				p.oe = p.oe[:i+1]
				return
			}
			continue
		}
		break
	}
	p.oe = p.oe[:i+1]
}

func (p *fastParser) containsAtom(t a.Atom) bool {
	for _, n := range p.oe {
		if n.DataAtom == t {
			return true
		}
	}
	return false
}

func (p *fastParser) parseImpliedToken(typ int, at a.Atom) {
	real := p.tok
	p.tok = fastToken{typ: typ, atom: at, data: at.String()}
	p.parseCurrentToken()
	p.tok = real
}

func (p *fastParser) setOriginalIM() {
	if p.hasOriginalIM {
		p.bail = true
		return
	}
	p.originalIM, p.hasOriginalIM = p.im, true
}

func (p *fastParser) parseGenericRawTextElement() {
	p.addElement()
	p.setOriginalIM()
	p.im = imText
}

func (p *fastParser) resetInsertionMode() {
	for i := len(p.oe) - 1; i >= 0; i-- {
		n := p.oe[i]
		last := i == 0
		switch n.DataAtom {
		case a.Td, a.Th:
			p.im = imInCell
		case a.Tr:
			p.im = imInRow
		case a.Tbody, a.Thead, a.Tfoot:
			p.im = imInTableBody
		case a.Caption:
			p.im = imInCaption
		case a.Colgroup:
			p.im = imInColumnGroup
		case a.Table:
			p.im = imInTable
		case a.Template, a.Frameset:
			p.bail = true
		case a.Head:
			p.im = imInHead
		case a.Body:
			p.im = imInBody
		case a.Html:
			if p.head == nil {
				p.im = imBeforeHead
			} else {
				p.im = imAfterHead
			}
		default:
			if last {
				p.im = imInBody
				return
			}
			continue
		}
		return
	}
}

func isSpecial(n *html.Node) bool {
	switch n.DataAtom {
	case a.Address, a.Applet, a.Area, a.Article, a.Aside, a.Base, a.Basefont, a.Bgsound, a.Blockquote, a.Body, a.Br,
		a.Button, a.Caption, a.Center, a.Col, a.Colgroup, a.Dd, a.Details, a.Dir, a.Div, a.Dl, a.Dt, a.Embed,
		a.Fieldset, a.Figcaption, a.Figure, a.Footer, a.Form, a.Frame, a.Frameset, a.H1, a.H2, a.H3, a.H4, a.H5,
		a.H6, a.Head, a.Header, a.Hgroup, a.Hr, a.Html, a.Iframe, a.Img, a.Input, a.Keygen, a.Li, a.Link,
		a.Listing, a.Main, a.Marquee, a.Menu, a.Meta, a.Nav, a.Noembed, a.Noframes, a.Noscript, a.Object, a.Ol,
		a.P, a.Param, a.Plaintext, a.Pre, a.Script, a.Section, a.Select, a.Source, a.Style, a.Summary, a.Table,
		a.Tbody, a.Td, a.Template, a.Textarea, a.Tfoot, a.Th, a.Thead, a.Title, a.Tr, a.Track, a.Ul, a.Wbr, a.Xmp:
		return true
	}
	return false
}

func copyAttributes(dst *html.Node, src []html.Attribute) {
	if len(src) == 0 {
		return
	}
	have := map[string]bool{}
	for _, t := range dst.Attr {
		have[t.Key] = true
	}
	for _, t := range src {
		if !have[t.Key] {
			dst.Attr = append(dst.Attr, t)
			have[t.Key] = true
		}
	}
}

// ---- insertion modes, after html.Parse's ----

func (p *fastParser) initialIM() bool {
	switch p.tok.typ {
	case tText:
		p.tok.data = strings.TrimLeft(p.tok.data, fastWhitespace)
		if p.tok.data == "" {
			return true
		}
	case tComment:
		appendChild(p.doc, p.newNode(html.CommentNode, 0, p.tok.data, nil))
		return true
	case tDoctype:
		n, quirks, ok := fastDoctype(p.tok.data)
		if !ok {
			p.bail = true
			return true
		}
		appendChild(p.doc, n)
		p.quirks = quirks
		p.im = imBeforeHTML
		return true
	}
	p.quirks = true
	p.im = imBeforeHTML
	return false
}

// fastDoctype builds the doctype node; for anything but the plain
// "<!DOCTYPE html>" it asks html.Parse, on a tiny probe page, for the node
// and for whether the doctype puts the page in quirks mode (the one place
// quirks changes the tree: a <table> does not close an open <p>).
func fastDoctype(data string) (*html.Node, bool, bool) {
	if data == "html" {
		return &html.Node{Type: html.DoctypeNode, Data: "html"}, false, true
	}
	if strings.ContainsAny(data, "<>&") {
		return nil, false, false
	}
	probe, err := html.Parse(strings.NewReader("<!DOCTYPE " + data + "><p><table></table>"))
	if err != nil || probe.FirstChild == nil || probe.FirstChild.Type != html.DoctypeNode {
		return nil, false, false
	}
	dt := probe.FirstChild
	quirks := false
	for n := probe.FirstChild; n != nil; n = nextWithin(n, nil, true) {
		if n.Type == html.ElementNode && n.DataAtom == a.Table {
			quirks = n.Parent != nil && n.Parent.DataAtom == a.P
			break
		}
	}
	return &html.Node{Type: html.DoctypeNode, Data: dt.Data, Attr: dt.Attr}, quirks, true
}

func (p *fastParser) beforeHTMLIM() bool {
	switch p.tok.typ {
	case tDoctype:
		return true
	case tText:
		p.tok.data = strings.TrimLeft(p.tok.data, fastWhitespace)
		if p.tok.data == "" {
			return true
		}
	case tStart:
		if p.tok.atom == a.Html {
			p.addElement()
			p.im = imBeforeHead
			return true
		}
	case tEnd:
		switch p.tok.atom {
		case a.Head, a.Body, a.Html, a.Br:
			p.parseImpliedToken(tStart, a.Html)
			return false
		default:
			return true
		}
	case tComment:
		appendChild(p.doc, p.newNode(html.CommentNode, 0, p.tok.data, nil))
		return true
	}
	p.parseImpliedToken(tStart, a.Html)
	return false
}

func (p *fastParser) beforeHeadIM() bool {
	switch p.tok.typ {
	case tText:
		p.tok.data = strings.TrimLeft(p.tok.data, fastWhitespace)
		if p.tok.data == "" {
			return true
		}
	case tStart:
		switch p.tok.atom {
		case a.Head:
			p.addElement()
			p.head = p.top()
			p.im = imInHead
			return true
		case a.Html:
			return p.inBodyIM()
		}
	case tEnd:
		switch p.tok.atom {
		case a.Head, a.Body, a.Html, a.Br:
			p.parseImpliedToken(tStart, a.Head)
			return false
		default:
			return true
		}
	case tComment:
		p.addComment()
		return true
	case tDoctype:
		return true
	}
	p.parseImpliedToken(tStart, a.Head)
	return false
}

// keepLeadingSpace inserts the text token's leading whitespace as text
// and leaves the rest as the token; true when nothing is left.
func (p *fastParser) keepLeadingSpace() bool {
	s := strings.TrimLeft(p.tok.data, fastWhitespace)
	if len(s) == len(p.tok.data) {
		return false
	}
	p.addText(p.tok.data[:len(p.tok.data)-len(s)])
	p.tok.data = s
	return s == ""
}

func (p *fastParser) inHeadIM() bool {
	switch p.tok.typ {
	case tText:
		if p.keepLeadingSpace() {
			return true
		}
	case tStart:
		switch p.tok.atom {
		case a.Html:
			return p.inBodyIM()
		case a.Base, a.Basefont, a.Bgsound, a.Link, a.Meta:
			p.addElement()
			if !p.bail {
				p.pop()
			}
			return true
		case a.Noscript, a.Noframes, a.Style:
			p.parseGenericRawTextElement()
			return true
		case a.Script, a.Title:
			p.addElement()
			p.setOriginalIM()
			p.im = imText
			return true
		case a.Head:
			return true
		case a.Template:
			p.bail = true
			return true
		}
	case tEnd:
		switch p.tok.atom {
		case a.Head:
			p.pop()
			p.im = imAfterHead
			return true
		case a.Body, a.Html, a.Br:
			p.parseImpliedToken(tEnd, a.Head)
			return false
		default: // including </template> with no template open
			return true
		}
	case tComment:
		p.addComment()
		return true
	case tDoctype:
		return true
	}
	p.parseImpliedToken(tEnd, a.Head)
	return false
}

func (p *fastParser) afterHeadIM() bool {
	switch p.tok.typ {
	case tText:
		if p.keepLeadingSpace() {
			return true
		}
	case tStart:
		switch p.tok.atom {
		case a.Html:
			return p.inBodyIM()
		case a.Body:
			p.addElement()
			p.im = imInBody
			return true
		case a.Frameset, a.Template:
			p.bail = true
			return true
		case a.Base, a.Basefont, a.Bgsound, a.Link, a.Meta, a.Noframes, a.Script, a.Style, a.Title:
			p.oe = append(p.oe, p.head)
			r := p.inHeadIM()
			p.oe = removeNode(p.oe, p.head)
			return r
		case a.Head:
			return true
		}
	case tEnd:
		switch p.tok.atom {
		case a.Body, a.Html, a.Br:
		default: // including </template>, ignored in head too
			return true
		}
	case tComment:
		p.addComment()
		return true
	case tDoctype:
		return true
	}
	p.parseImpliedToken(tStart, a.Body)
	return p.tok.typ == tEOF
}

func (p *fastParser) inBodyIM() bool {
	switch p.tok.typ {
	case tText:
		d := p.tok.data
		if n := p.top(); n.DataAtom == a.Pre || n.DataAtom == a.Listing {
			if n.FirstChild == nil {
				if d != "" && d[0] == '\r' {
					d = d[1:]
				}
				if d != "" && d[0] == '\n' {
					d = d[1:]
				}
			}
		}
		if d == "" {
			return true
		}
		p.reconstructActiveFormattingElements()
		p.addText(d)
	case tStart:
		switch p.tok.atom {
		case a.Html:
			copyAttributes(p.oe[0], p.tok.attr)
		case a.Base, a.Basefont, a.Bgsound, a.Link, a.Meta, a.Noframes, a.Script, a.Style, a.Template, a.Title:
			return p.inHeadIM()
		case a.Body:
			if len(p.oe) >= 2 {
				if body := p.oe[1]; body.Type == html.ElementNode && body.DataAtom == a.Body {
					copyAttributes(body, p.tok.attr)
				}
			}
		case a.Frameset, a.Plaintext, a.Nobr, a.Math, a.Svg:
			p.bail = true
		case a.Address, a.Article, a.Aside, a.Blockquote, a.Center, a.Details, a.Dialog, a.Dir, a.Div, a.Dl, a.Fieldset, a.Figcaption, a.Figure, a.Footer, a.Header, a.Hgroup, a.Main, a.Menu, a.Nav, a.Ol, a.P, a.Search, a.Section, a.Summary, a.Ul:
			p.popUntil(buttonScope, a.P)
			p.addElement()
		case a.H1, a.H2, a.H3, a.H4, a.H5, a.H6:
			p.popUntil(buttonScope, a.P)
			switch p.top().DataAtom {
			case a.H1, a.H2, a.H3, a.H4, a.H5, a.H6:
				p.pop()
			}
			p.addElement()
		case a.Pre, a.Listing:
			p.popUntil(buttonScope, a.P)
			p.addElement()
		case a.Form:
			if p.form != nil {
				return true
			}
			p.popUntil(buttonScope, a.P)
			p.addElement()
			if !p.bail {
				p.form = p.top()
			}
		case a.Li, a.Dd, a.Dt:
			for i := len(p.oe) - 1; i >= 0; i-- {
				node := p.oe[i]
				if p.tok.atom == a.Li && node.DataAtom == a.Li ||
					p.tok.atom != a.Li && (node.DataAtom == a.Dd || node.DataAtom == a.Dt) {
					p.oe = p.oe[:i]
				} else if node.DataAtom == a.Address || node.DataAtom == a.Div || node.DataAtom == a.P || !isSpecial(node) {
					continue
				}
				break
			}
			p.popUntil(buttonScope, a.P)
			p.addElement()
		case a.Button:
			if p.elementInScope(defaultScope, a.Button) {
				p.generateImpliedEndTags("")
				p.popUntil(defaultScope, a.Button)
			}
			p.reconstructActiveFormattingElements()
			p.addElement()
		case a.A:
			for i := len(p.afe) - 1; i >= 0 && p.afe[i] != fastMarker; i-- {
				if n := p.afe[i]; n.Type == html.ElementNode && n.DataAtom == a.A {
					// An <a> inside an <a>: the adoption agency.
					p.bail = true
					return true
				}
			}
			p.reconstructActiveFormattingElements()
			p.addFormattingElement()
		case a.B, a.Big, a.Code, a.Em, a.Font, a.I, a.S, a.Small, a.Strike, a.Strong, a.Tt, a.U:
			p.reconstructActiveFormattingElements()
			p.addFormattingElement()
		case a.Applet, a.Marquee, a.Object:
			p.reconstructActiveFormattingElements()
			p.addElement()
			p.afe = append(p.afe, fastMarker)
		case a.Table:
			if !p.quirks {
				p.popUntil(buttonScope, a.P)
			}
			p.addElement()
			p.im = imInTable
			return true
		case a.Area, a.Br, a.Embed, a.Img, a.Keygen, a.Wbr:
			p.reconstructActiveFormattingElements()
			p.addElement()
			if !p.bail {
				p.pop()
			}
		case a.Input:
			p.popUntil(defaultScope, a.Select)
			p.reconstructActiveFormattingElements()
			p.addElement()
			if !p.bail {
				p.pop()
			}
		case a.Param, a.Source, a.Track:
			p.addElement()
			if !p.bail {
				p.pop()
			}
		case a.Hr:
			if p.elementInScope(buttonScope, a.P) {
				p.generateImpliedEndTags("p")
				p.popUntil(defaultScope, a.P)
			}
			if p.elementInScope(defaultScope, a.Select) {
				p.generateImpliedEndTags("")
			}
			p.addElement()
			if !p.bail {
				p.pop()
			}
		case a.Image:
			p.tok.atom, p.tok.data = a.Img, a.Img.String()
			return false
		case a.Textarea:
			p.addElement()
			p.setOriginalIM()
			p.im = imText
		case a.Xmp:
			p.popUntil(buttonScope, a.P)
			p.reconstructActiveFormattingElements()
			p.parseGenericRawTextElement()
		case a.Iframe, a.Noembed, a.Noscript:
			p.parseGenericRawTextElement()
		case a.Select:
			if p.popUntil(defaultScope, a.Select) {
				return true
			}
			p.reconstructActiveFormattingElements()
			p.addElement()
		case a.Option:
			if p.elementInScope(defaultScope, a.Select) {
				p.generateImpliedEndTags("optgroup")
			} else if p.top().DataAtom == a.Option {
				p.pop()
			}
			p.reconstructActiveFormattingElements()
			p.addElement()
		case a.Optgroup:
			if p.elementInScope(defaultScope, a.Select) {
				p.generateImpliedEndTags("")
			} else if p.top().DataAtom == a.Option {
				p.pop()
			}
			p.reconstructActiveFormattingElements()
			p.addElement()
		case a.Rb, a.Rtc:
			if p.elementInScope(defaultScope, a.Ruby) {
				p.generateImpliedEndTags("")
			}
			p.addElement()
		case a.Rp, a.Rt:
			if p.elementInScope(defaultScope, a.Ruby) {
				p.generateImpliedEndTags("rtc")
			}
			p.addElement()
		case a.Caption, a.Col, a.Colgroup, a.Frame, a.Head, a.Tbody, a.Td, a.Tfoot, a.Th, a.Thead, a.Tr:
			// Ignore the token.
		default:
			p.reconstructActiveFormattingElements()
			p.addElement()
		}
	case tEnd:
		if p.closesTopByPop() {
			p.pop()
			return true
		}
		switch p.tok.atom {
		case a.Body:
			if p.elementInScope(defaultScope, a.Body) {
				p.im = imAfterBody
			}
		case a.Html:
			if p.elementInScope(defaultScope, a.Body) {
				p.parseImpliedToken(tEnd, a.Body)
				return false
			}
			return true
		case a.Address, a.Article, a.Aside, a.Blockquote, a.Button, a.Center, a.Details, a.Dialog, a.Dir, a.Div, a.Dl, a.Fieldset, a.Figcaption, a.Figure, a.Footer, a.Header, a.Hgroup, a.Listing, a.Main, a.Menu, a.Nav, a.Ol, a.Pre, a.Search, a.Section, a.Select, a.Summary, a.Ul:
			if !p.elementInScope(defaultScope, p.tok.atom) {
				return true
			}
			p.generateImpliedEndTags("")
			p.popUntil(defaultScope, p.tok.atom)
		case a.Form:
			node := p.form
			p.form = nil
			i := p.indexOfElementInScope(defaultScope, a.Form)
			if node == nil || i == -1 || p.oe[i] != node {
				return true
			}
			p.generateImpliedEndTags("")
			p.oe = removeNode(p.oe, node)
		case a.P:
			if !p.elementInScope(buttonScope, a.P) {
				p.parseImpliedToken(tStart, a.P)
			}
			p.popUntil(buttonScope, a.P)
		case a.Li:
			p.popUntil(listItemScope, a.Li)
		case a.Dd, a.Dt:
			p.popUntil(defaultScope, p.tok.atom)
		case a.H1, a.H2, a.H3, a.H4, a.H5, a.H6:
			p.popUntil(defaultScope, a.H1, a.H2, a.H3, a.H4, a.H5, a.H6)
		case a.A, a.B, a.Big, a.Code, a.Em, a.Font, a.I, a.Nobr, a.S, a.Small, a.Strike, a.Strong, a.Tt, a.U:
			p.inBodyEndTagFormatting(p.tok.atom, p.tok.data)
		case a.Applet, a.Marquee, a.Object:
			if p.popUntil(defaultScope, p.tok.atom) {
				p.clearActiveFormattingElements()
			}
		case a.Br:
			p.tok.typ = tStart
			return false
		case a.Template:
			return true // no template is ever open here
		default:
			p.inBodyEndTagOther(p.tok.atom, p.tok.data)
		}
	case tComment:
		p.addComment()
	}
	return true
}

// inBodyEndTagFormatting is the adoption agency algorithm up to the point
// where it needs a furthest block, which is left to html.Parse.
func (p *fastParser) inBodyEndTagFormatting(tagAtom a.Atom, tagName string) {
	if cur := p.top(); cur.Data == tagName && indexNode(p.afe, cur) == -1 {
		p.pop()
		return
	}
	var fe *html.Node
	for j := len(p.afe) - 1; j >= 0; j-- {
		if p.afe[j] == fastMarker {
			break
		}
		if p.afe[j].DataAtom == tagAtom {
			fe = p.afe[j]
			break
		}
	}
	if fe == nil {
		p.inBodyEndTagOther(tagAtom, tagName)
		return
	}
	feIndex := indexNode(p.oe, fe)
	if feIndex == -1 {
		p.afe = removeNode(p.afe, fe)
		return
	}
	if !p.elementInScope(defaultScope, tagAtom) {
		return
	}
	for _, e := range p.oe[feIndex:] {
		if isSpecial(e) {
			p.bail = true
			return
		}
	}
	e := p.pop()
	for e != fe {
		e = p.pop()
	}
	p.afe = removeNode(p.afe, e)
}

func (p *fastParser) inBodyEndTagOther(tagAtom a.Atom, tagName string) {
	for i := len(p.oe) - 1; i >= 0; i-- {
		if p.oe[i].DataAtom == tagAtom && (tagAtom != 0 || p.oe[i].Data == tagName) {
			p.oe = p.oe[:i]
			break
		}
		if isSpecial(p.oe[i]) {
			break
		}
	}
}

func (p *fastParser) textIM() bool {
	switch p.tok.typ {
	case tEOF:
		p.pop()
	case tText:
		d := p.tok.data
		if n := p.top(); n.DataAtom == a.Textarea && n.FirstChild == nil {
			if d != "" && d[0] == '\r' {
				d = d[1:]
			}
			if d != "" && d[0] == '\n' {
				d = d[1:]
			}
		}
		if d == "" {
			return true
		}
		p.addText(d)
		return true
	case tEnd:
		p.pop()
	}
	p.im, p.hasOriginalIM = p.originalIM, false
	return p.tok.typ == tEnd
}

func (p *fastParser) fosterInBody() bool {
	p.fosterParenting = true
	r := p.inBodyIM()
	p.fosterParenting = false
	return r
}

func (p *fastParser) inTableIM() bool {
	switch p.tok.typ {
	case tText:
		switch p.top().DataAtom {
		case a.Table, a.Tbody, a.Tfoot, a.Thead, a.Tr:
			if strings.Trim(p.tok.data, fastWhitespace) == "" {
				p.addText(p.tok.data)
				return true
			}
		}
	case tStart:
		switch p.tok.atom {
		case a.Caption:
			p.clearStackToContext(tableScope)
			p.afe = append(p.afe, fastMarker)
			p.addElement()
			p.im = imInCaption
			return true
		case a.Colgroup:
			p.clearStackToContext(tableScope)
			p.addElement()
			p.im = imInColumnGroup
			return true
		case a.Col:
			p.parseImpliedToken(tStart, a.Colgroup)
			return false
		case a.Tbody, a.Tfoot, a.Thead:
			p.clearStackToContext(tableScope)
			p.addElement()
			p.im = imInTableBody
			return true
		case a.Td, a.Th, a.Tr:
			p.parseImpliedToken(tStart, a.Tbody)
			return false
		case a.Table:
			if p.popUntil(tableScope, a.Table) {
				p.resetInsertionMode()
				return false
			}
			return true
		case a.Style, a.Script, a.Template:
			return p.inHeadIM()
		case a.Input:
			for _, t := range p.tok.attr {
				if t.Key == "type" && strings.EqualFold(t.Val, "hidden") {
					p.addElement()
					if !p.bail {
						p.pop()
					}
					return true
				}
			}
		case a.Form:
			if p.form != nil {
				return true
			}
			p.addElement()
			if !p.bail {
				p.form = p.pop()
			}
			return true // html.Parse goes on to ignore it in body
		}
	case tEnd:
		switch p.tok.atom {
		case a.Table:
			if p.popUntil(tableScope, a.Table) {
				p.resetInsertionMode()
			}
			return true
		case a.Body, a.Caption, a.Col, a.Colgroup, a.Html, a.Tbody, a.Td, a.Tfoot, a.Th, a.Thead, a.Tr:
			return true
		case a.Template:
			return true
		}
	case tComment:
		p.addComment()
		return true
	case tDoctype:
		return true
	case tEOF:
		return p.inBodyIM()
	}
	return p.fosterInBody()
}

func (p *fastParser) inCaptionIM() bool {
	switch p.tok.typ {
	case tStart:
		switch p.tok.atom {
		case a.Caption, a.Col, a.Colgroup, a.Tbody, a.Td, a.Tfoot, a.Thead, a.Tr:
			if !p.popUntil(tableScope, a.Caption) {
				return true
			}
			p.clearActiveFormattingElements()
			p.im = imInTable
			return false
		}
	case tEnd:
		switch p.tok.atom {
		case a.Caption:
			if p.popUntil(tableScope, a.Caption) {
				p.clearActiveFormattingElements()
				p.im = imInTable
			}
			return true
		case a.Table:
			if !p.popUntil(tableScope, a.Caption) {
				return true
			}
			p.clearActiveFormattingElements()
			p.im = imInTable
			return false
		case a.Body, a.Col, a.Colgroup, a.Html, a.Tbody, a.Td, a.Tfoot, a.Th, a.Thead, a.Tr:
			return true
		}
	}
	return p.inBodyIM()
}

func (p *fastParser) inColumnGroupIM() bool {
	switch p.tok.typ {
	case tText:
		if p.keepLeadingSpace() {
			return true
		}
	case tComment:
		p.addComment()
		return true
	case tDoctype:
		return true
	case tStart:
		switch p.tok.atom {
		case a.Html:
			return p.inBodyIM()
		case a.Col:
			p.addElement()
			if !p.bail {
				p.pop()
			}
			return true
		case a.Template:
			p.bail = true
			return true
		}
	case tEnd:
		switch p.tok.atom {
		case a.Colgroup:
			if p.top().DataAtom == a.Colgroup {
				p.pop()
				p.im = imInTable
			}
			return true
		case a.Col, a.Template:
			return true
		}
	case tEOF:
		return p.inBodyIM()
	}
	if p.top().DataAtom != a.Colgroup {
		return true
	}
	p.pop()
	p.im = imInTable
	return false
}

func (p *fastParser) inTableBodyIM() bool {
	switch p.tok.typ {
	case tStart:
		switch p.tok.atom {
		case a.Tr:
			p.clearStackToContext(tableBodyScope)
			p.addElement()
			p.im = imInRow
			return true
		case a.Td, a.Th:
			p.parseImpliedToken(tStart, a.Tr)
			return false
		case a.Caption, a.Col, a.Colgroup, a.Tbody, a.Tfoot, a.Thead:
			if p.popUntil(tableScope, a.Tbody, a.Thead, a.Tfoot) {
				p.im = imInTable
				return false
			}
			return true
		}
	case tEnd:
		switch p.tok.atom {
		case a.Tbody, a.Tfoot, a.Thead:
			if p.elementInScope(tableScope, p.tok.atom) {
				p.clearStackToContext(tableBodyScope)
				p.pop()
				p.im = imInTable
			}
			return true
		case a.Table:
			if p.popUntil(tableScope, a.Tbody, a.Thead, a.Tfoot) {
				p.im = imInTable
				return false
			}
			return true
		case a.Body, a.Caption, a.Col, a.Colgroup, a.Html, a.Td, a.Th, a.Tr:
			return true
		}
	case tComment:
		p.addComment()
		return true
	}
	return p.inTableIM()
}

func (p *fastParser) inRowIM() bool {
	switch p.tok.typ {
	case tStart:
		switch p.tok.atom {
		case a.Td, a.Th:
			p.clearStackToContext(tableRowScope)
			p.addElement()
			p.afe = append(p.afe, fastMarker)
			p.im = imInCell
			return true
		case a.Caption, a.Col, a.Colgroup, a.Tbody, a.Tfoot, a.Thead, a.Tr:
			if p.elementInScope(tableScope, a.Tr) {
				p.clearStackToContext(tableRowScope)
				p.pop()
				p.im = imInTableBody
				return false
			}
			return true
		}
	case tEnd:
		switch p.tok.atom {
		case a.Tr:
			if p.elementInScope(tableScope, a.Tr) {
				p.clearStackToContext(tableRowScope)
				p.pop()
				p.im = imInTableBody
			}
			return true
		case a.Table:
			if p.elementInScope(tableScope, a.Tr) {
				p.clearStackToContext(tableRowScope)
				p.pop()
				p.im = imInTableBody
				return false
			}
			return true
		case a.Tbody, a.Tfoot, a.Thead:
			if p.elementInScope(tableScope, p.tok.atom) && p.elementInScope(tableScope, a.Tr) {
				p.clearStackToContext(tableRowScope)
				p.pop()
				p.im = imInTableBody
				return false
			}
			return true
		case a.Body, a.Caption, a.Col, a.Colgroup, a.Html, a.Td, a.Th:
			return true
		}
	}
	return p.inTableIM()
}

func (p *fastParser) inCellIM() bool {
	switch p.tok.typ {
	case tStart:
		switch p.tok.atom {
		case a.Caption, a.Col, a.Colgroup, a.Tbody, a.Td, a.Tfoot, a.Th, a.Thead, a.Tr:
			if p.popUntil(tableScope, a.Td, a.Th) {
				p.clearActiveFormattingElements()
				p.im = imInRow
				return false
			}
			return true
		}
	case tEnd:
		switch p.tok.atom {
		case a.Td, a.Th:
			if !p.popUntil(tableScope, p.tok.atom) {
				return true
			}
			p.clearActiveFormattingElements()
			p.im = imInRow
			return true
		case a.Body, a.Caption, a.Col, a.Colgroup, a.Html:
			return true
		case a.Table, a.Tbody, a.Tfoot, a.Thead, a.Tr:
			if !p.elementInScope(tableScope, p.tok.atom) {
				return true
			}
			if p.popUntil(tableScope, a.Td, a.Th) {
				p.clearActiveFormattingElements()
			}
			p.im = imInRow
			return false
		}
	}
	return p.inBodyIM()
}

func (p *fastParser) afterBodyIM() bool {
	switch p.tok.typ {
	case tEOF:
		return true
	case tText:
		if strings.TrimLeft(p.tok.data, fastWhitespace) == "" {
			return p.inBodyIM()
		}
	case tStart:
		if p.tok.atom == a.Html {
			return p.inBodyIM()
		}
	case tEnd:
		if p.tok.atom == a.Html {
			p.im = imAfterAfterBody
			return true
		}
	case tComment:
		if len(p.oe) < 1 || p.oe[0].DataAtom != a.Html {
			p.bail = true
			return true
		}
		appendChild(p.oe[0], p.newNode(html.CommentNode, 0, p.tok.data, nil))
		return true
	}
	p.im = imInBody
	return false
}

func (p *fastParser) afterAfterBodyIM() bool {
	switch p.tok.typ {
	case tEOF:
		return true
	case tText:
		if strings.TrimLeft(p.tok.data, fastWhitespace) == "" {
			return p.inBodyIM()
		}
	case tStart:
		if p.tok.atom == a.Html {
			return p.inBodyIM()
		}
	case tComment:
		appendChild(p.doc, p.newNode(html.CommentNode, 0, p.tok.data, nil))
		return true
	case tDoctype:
		return p.inBodyIM()
	}
	p.im = imInBody
	return false
}
