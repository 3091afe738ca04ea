package etl

import (
	"regexp"
	"slices"
	"strings"

	"github.com/antchfx/htmlquery"
	"github.com/antchfx/xpath"
	"golang.org/x/net/html"
)

// xpathPlan answers the commonest shape of mapping expressions,
// //tag[@attr='value'] optionally followed by a downward path such as
// /text(), /@href or //a/@href, from a per-document index of elements by
// tag name instead of walking the whole tree through the XPath library
// once per expression. Only the downward rest, if any, runs through the
// library, from each matching element.
//
// It gives up (ok=false, and the caller evaluates the whole expression as
// usual) when its answer could differ: when the context is not the whole
// document, or when one match lies inside another, since then evaluating
// the rest per match would not give document order without duplicates.
type xpathPlan struct {
	tag, attr, value string
	rest             string // "" or a relative expression: "./text()", ".//a/@href"
}

// planShape is //tag[@attr='v' or "v"] followed by child and descendant
// steps. A step is @attr, @*, text() or node(), or a name or * with
// predicates comparing an attribute, the text or normalize-space() to a
// literal, testing contains(@attr, literal), or a position; a step after
// the first may take the following-sibling or preceding-sibling axis.
// None of these reaches outside a match's subtree (the siblings of a
// node below the match are below it too), and predicates see the same
// context either way, so evaluating the rest from each match gives what
// the whole expression gives.
var planShape = regexp.MustCompile(`^//(` + planName + `)\[\s*@(` + planAttr + `)\s*=\s*(?:'([^']*)'|"([^"]*)")\s*\]((?:` + planStep + `)*)$`)

const (
	planName = `[A-Za-z][A-Za-z0-9_-]*`
	planAttr = `[A-Za-z_][A-Za-z0-9_:.-]*`
	planLit  = `(?:'[^']*'|"[^"]*")`
	planPred = `\[\s*(?:@` + planAttr + `\s*=\s*` + planLit +
		`|(?:text\(\)|normalize-space\(\s*\.?\s*\))\s*=\s*` + planLit +
		`|contains\(\s*@` + planAttr + `\s*,\s*` + planLit + `\s*\)` +
		`|[1-9][0-9]{0,3})\s*\]`
	planStep = `/{1,2}(?:@` + planAttr + `|@\*|text\(\)|node\(\)` +
		`|(?:(?:following|preceding)-sibling::)?(?:[A-Za-z_][A-Za-z0-9_.-]*|\*)(?:` + planPred + `)*)`
)

// planFirstSibling finds a sibling axis on the rest's first step, which
// would leave the match's subtree.
var planFirstSibling = regexp.MustCompile(`^/{1,2}(?:following|preceding)-sibling::`)

// newXPathPlan returns the plan for expr, or nil when expr has another
// shape.
func newXPathPlan(expr string) *xpathPlan {
	m := planShape.FindStringSubmatch(strings.TrimSpace(expr))
	if m == nil {
		return nil
	}
	p := &xpathPlan{tag: m[1], attr: m[2], value: m[3] + m[4]}
	if planFirstSibling.MatchString(m[5]) {
		return nil
	}
	if m[5] != "" {
		p.rest = "." + m[5]
		if _, err := compileXPath(p.rest); err != nil {
			return nil
		}
	}
	return p
}

// eval runs the plan on the document. rest is the compiled p.rest (nil
// when there is none); first stops at the first value.
func (p *xpathPlan) eval(doc *Document, rest *xpath.Expr, value func(*htmlquery.NodeNavigator) Value, first bool) (out []Value, ok bool) {
	var matches []*html.Node
	for _, n := range doc.elementsByTag(p.tag) {
		for _, at := range n.Attr {
			// Keys are unique but for foreign attributes (xlink:href
			// and href); like the library, any one equal matches.
			if at.Key == p.attr && at.Val == p.value {
				matches = append(matches, n)
				break
			}
		}
	}
	if p.rest == "" {
		for _, n := range matches {
			out = append(out, value(htmlquery.CreateXPathNavigator(n)))
			if first {
				break
			}
		}
		return out, true
	}
	if rest == nil {
		return nil, false
	}
	// Matches come in document order, so if none so far nests in another,
	// a match inside an earlier one is inside the one just before it.
	for i := 1; i < len(matches); i++ {
		for a := matches[i].Parent; a != nil; a = a.Parent {
			if a == matches[i-1] {
				return nil, false
			}
		}
	}
	for _, n := range matches {
		it, isNodes := rest.Evaluate(htmlquery.CreateXPathNavigator(n)).(*xpath.NodeIterator)
		if !isNodes {
			return nil, false
		}
		for it.MoveNext() {
			nav, isNav := it.Current().(*htmlquery.NodeNavigator)
			if !isNav {
				continue
			}
			out = append(out, value(nav))
			if first {
				return out, true
			}
		}
	}
	return out, true
}

// elementsByTag returns the document's elements named tag, in document
// order. Each tag asked for costs one walk of the tree per document (a
// page's mappings ask for a few tags, and walking for one name is cheaper
// than indexing every element by name).
func (d *Document) elementsByTag(tag string) []*html.Node {
	if list, ok := d.byTag[tag]; ok {
		return list
	}
	if !d.scanned && slices.Contains(d.plan.tags, tag) {
		d.scan() // collects every plan tag at once
		return d.byTag[tag]
	}
	if d.byTag == nil {
		d.byTag = map[string][]*html.Node{}
	}
	var list []*html.Node
	if d.Root != nil {
		walk(d.Root, func(n *html.Node) bool {
			if n.Type == html.ElementNode && len(n.Data) == len(tag) && n.Data == tag {
				list = append(list, n)
			}
			return true
		})
	}
	d.byTag[tag] = list
	return list
}
