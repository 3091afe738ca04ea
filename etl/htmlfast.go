package etl

import (
	"bytes"
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
