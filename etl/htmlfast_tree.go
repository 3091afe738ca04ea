package etl

// The fast builder's tree: nodes made in the arena, the stack of open
// elements, the active formatting elements and the scopes, after
// html.Parse's.

import (
	"slices"
	"strings"

	"golang.org/x/net/html"
	a "golang.org/x/net/html/atom"
)

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
