package etl

// The fast builder's document-level insertion modes, after html.Parse's:
// before and in the head, and after the body.

import (
	"strings"

	"golang.org/x/net/html"
	a "golang.org/x/net/html/atom"
)

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
