package etl

// The fast builder's "in body" and "text" insertion modes, after
// html.Parse's.

import (
	"golang.org/x/net/html"
	a "golang.org/x/net/html/atom"
)

// inBodyIM is the "in body" insertion mode. Like every mode it reports
// whether the token was consumed; false: parse it again, in the mode it
// switched to.
func (p *fastParser) inBodyIM() bool {
	switch p.tok.typ {
	case tText:
		p.inBodyText()
	case tStart:
		return p.inBodyStartTag()
	case tEnd:
		return p.inBodyEndTag()
	case tComment:
		p.addComment()
	}
	return true
}

// inBodyText adds a text token in body.
func (p *fastParser) inBodyText() {
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
		return
	}
	p.reconstructActiveFormattingElements()
	p.addText(d)
}

// inBodyStartTag is a start tag in body: the document's structure,
// blocks, headings, lists, forms and formatting elements here, the rest
// in inBodyStartTagOther, in html.Parse's order.
func (p *fastParser) inBodyStartTag() bool {
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
	default:
		return p.inBodyStartTagOther()
	}
	return true
}

// inBodyStartTagOther is a start tag in body from tables on: void
// elements, form controls, raw text and ruby, and any other element.
func (p *fastParser) inBodyStartTagOther() bool {
	switch p.tok.atom {
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
	return true
}

// inBodyEndTag is an end tag in body.
func (p *fastParser) inBodyEndTag() bool {
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
