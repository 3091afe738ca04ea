package etl

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/antchfx/htmlquery"
	"github.com/antchfx/xpath"
	"golang.org/x/net/html"
)

// xpathProc selects nodes from the document (first in a chain) or relative
// to the nodes the previous xpath selected; text from earlier steps is
// parsed as an HTML fragment. Elements yield their text, or their inner or
// outer HTML; attributes (…/@href) and text nodes yield their value; an
// expression with a scalar result (count(), string(), …) yields it.
//
// Parameters: expression (required), first (bool: only the first node),
// html ("inner" or "outer").
type xpathProc struct {
	expr  string
	first bool
	html  string
	// A compiled expression carries iteration state, so concurrent workers
	// each take their own copy from the pool.
	pool sync.Pool
	// plan answers //tag[@attr='value']… from a per-document index;
	// restPool holds compiled copies of the part after the predicate.
	plan     *xpathPlan
	restPool sync.Pool
}

// xpathParams are the xpath processor's parameters.
type xpathParams struct {
	Expression string `json:"expression" required:"true" pattern:"\\S" doc:"XPath 1.0 expression, e.g. //h1 or //a[@rel='me']/@href."`
	First      bool   `json:"first" doc:"Only the first selected node."`
	HTML       string `json:"html" enum:"inner|outer" doc:"Yield the inner or outer HTML of elements instead of their text."`
}

func init() {
	registerProc(procSpec{
		name:    "xpath",
		group:   groupSelect,
		summary: "Selects nodes of the page (or, after another xpath, relative to each selected node; after text, parses it as HTML). Elements yield their text, attributes and text nodes their value, scalar expressions their result.",
		doc: "After another xpath it runs relative to each selected node (`./a/@href`); after text, it parses the text as HTML. " +
			"Scalar expressions such as `count(//li)` or `normalize-space(//h1)` yield their result.",
		example: `{"expression": "//div[@class='card']//h2", "first": true}`,
	}, newXPath)
}

func newXPath(p xpathParams) (Processor, error) {
	if strings.TrimSpace(p.Expression) == "" {
		return nil, errors.New(`parameter "expression" is required`)
	}
	switch p.HTML {
	case "", "inner", "outer":
	default:
		return nil, fmt.Errorf(`parameter "html" must be "inner" or "outer", got %q`, p.HTML)
	}
	if _, err := compileXPath(p.Expression); err != nil {
		return nil, err
	}
	x := &xpathProc{expr: p.Expression, first: p.First, html: p.HTML}
	x.pool.New = func() any {
		e, _ := compileXPath(x.expr)
		return e
	}
	if x.plan = newXPathPlan(p.Expression); x.plan != nil && x.plan.rest != "" {
		x.restPool.New = func() any {
			e, _ := compileXPath(x.plan.rest)
			return e
		}
	}
	return x, nil
}

// compileXPath compiles an expression, turning a panic inside the XPath
// library into an error.
func compileXPath(s string) (e *xpath.Expr, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, err = nil, fmt.Errorf("invalid XPath %q: %v", s, r)
		}
	}()
	e, err = xpath.Compile(s)
	if err != nil {
		return nil, fmt.Errorf("invalid XPath %q: %v", s, err)
	}
	return e, nil
}

func (x *xpathProc) Process(in []Value, doc *Document) ([]Value, error) {
	e, _ := x.pool.Get().(*xpath.Expr)
	if e == nil {
		return nil, fmt.Errorf("xpath %q: cannot compile", x.expr)
	}
	defer x.pool.Put(e)
	var out []Value
	for _, v := range in {
		if x.plan != nil && v.doc && v.Node != nil && v.Node == doc.Root {
			if got, ok := x.evalPlan(doc); ok {
				out = append(out, got...)
				if x.first && len(out) > 0 {
					return out[:1], nil
				}
				continue
			}
		}
		ctx := v.Node
		if ctx == nil {
			if v.doc {
				if doc.parseErr != nil {
					return nil, fmt.Errorf("document did not parse: %v", doc.parseErr)
				}
				return nil, errors.New("xpath needs an HTML document, this one is JSON (use jsonpath)")
			}
			frag, err := html.Parse(strings.NewReader(v.Text))
			if err != nil {
				return nil, fmt.Errorf("parse HTML from previous step: %v", err)
			}
			ctx = frag
		}
		got, err := x.eval(e, ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
		if x.first && len(out) > 0 {
			return out[:1], nil
		}
	}
	return out, nil
}

func (x *xpathProc) eval(e *xpath.Expr, ctx *html.Node) (out []Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("xpath %q: %v", x.expr, r)
		}
	}()
	switch r := e.Evaluate(htmlquery.CreateXPathNavigator(ctx)).(type) {
	case *xpath.NodeIterator:
		for r.MoveNext() {
			nav, ok := r.Current().(*htmlquery.NodeNavigator)
			if !ok {
				continue
			}
			out = append(out, x.nodeValue(nav))
			if x.first {
				break
			}
		}
	case string:
		out = append(out, Value{Text: r})
	case float64:
		out = append(out, Value{Text: strconv.FormatFloat(r, 'f', -1, 64)})
	case bool:
		out = append(out, Value{Text: strconv.FormatBool(r)})
	}
	return out, nil
}

// evalPlan answers from the document's index; ok is false when the plan
// cannot, and the expression is evaluated as usual.
func (x *xpathProc) evalPlan(doc *Document) (out []Value, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			out, ok = nil, false
		}
	}()
	var rest *xpath.Expr
	if x.plan.rest != "" {
		rest, _ = x.restPool.Get().(*xpath.Expr)
		if rest == nil {
			return nil, false
		}
		defer x.restPool.Put(rest)
	}
	return x.plan.eval(doc, rest, x.nodeValue, x.first)
}

func (x *xpathProc) nodeValue(nav *htmlquery.NodeNavigator) Value {
	n := nav.Current()
	switch nav.NodeType() {
	case xpath.AttributeNode, xpath.TextNode, xpath.CommentNode:
		return Value{Text: nav.Value()}
	}
	v := Value{Node: n}
	switch x.html {
	case "inner":
		v.Text = renderHTML(n, false)
	case "outer":
		v.Text = renderHTML(n, true)
	default:
		v.Text = innerText(n)
	}
	return v
}

// renderHTML serializes a node (outer) or its children (inner).
func renderHTML(n *html.Node, outer bool) string {
	var b strings.Builder
	if outer && n.Type != html.DocumentNode {
		_ = html.Render(&b, n)
		return b.String()
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		_ = html.Render(&b, c)
	}
	return b.String()
}
