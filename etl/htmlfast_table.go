package etl

// The fast builder's table insertion modes (table, caption, column group,
// table body, row, cell), after html.Parse's.

import (
	"strings"

	a "golang.org/x/net/html/atom"
)

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
