package etl

import (
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Recognising a page whose content JavaScript writes: its HTML is a shell
// that a browser fills in. The signs, any one of which is enough:
//
//   - an empty application root: an element that frameworks mount into
//     (id root, app, __next, __nuxt, ___gatsby, app-root, or Angular's
//     <app-root>) holding no more than a placeholder's worth of text, in a
//     page with a script;
//   - a <noscript> that asks for JavaScript ("enable JavaScript", "requires
//     JavaScript", ...);
//   - almost no text in the body, with a script present.
//
// Scripts count when a browser would run them: data blocks such as JSON-LD
// (<script type="application/ld+json">) or templates are not scripts.

const (
	// jsShellText is the most visible text (bytes, runs of space counted
	// once) that an application root or a whole body may hold and still
	// count as empty: enough for "Loading…" or a short notice, less than
	// the shortest profile.
	jsShellText = 64
)

// appRootIDs are the ids of the elements frameworks mount pages into.
var appRootIDs = []string{"root", "app", "__next", "__nuxt", "___gatsby", "app-root", "svelte", "main-app"}

// noscriptAsks are phrases of a <noscript> that asks for JavaScript, in
// lower case; the notice must also name JavaScript.
var noscriptAsks = []string{"enable", "turn on", "switch on", "activate", "allow", "require", "need", "without", "must", "not supported", "doesn't work", "does not work", "won't work", "will not work"}

// JSOnly reports whether the parsed page (html.Parse's tree, or Document's
// Root) looks like a shell whose content JavaScript writes in. A nil root
// is not such a page.
func JSOnly(root *html.Node) bool {
	if root == nil {
		return false
	}
	var (
		scripts, asks bool
		body          *html.Node
		emptyRoot     bool
	)
	n := root
	for {
		descend := n.Type == html.DocumentNode
		if n.Type == html.ElementNode {
			switch n.DataAtom {
			case atom.Script:
				scripts = scripts || runnable(n)
			case atom.Noscript:
				asks = asks || asksForJavaScript(n)
			case atom.Style, atom.Template:
			case atom.Body:
				if body == nil {
					body = n
				}
				descend = true
			default:
				if !emptyRoot && isAppRoot(n) && emptyOfText(n) {
					emptyRoot = true
				}
				descend = true
			}
		}
		if n = nextWithin(n, root, descend); n == nil {
			break
		}
	}
	switch {
	case asks:
		return true
	case !scripts:
		return false
	}
	return emptyRoot || body == nil || emptyOfText(body)
}

// emptyOfText reports whether n holds at most jsShellText of visible text.
func emptyOfText(n *html.Node) bool {
	var m textMeter
	m.addTree(n)
	return m.n <= jsShellText
}

// runnable reports whether a browser runs the script element: no type, a
// JavaScript type, or a module.
func runnable(n *html.Node) bool {
	typ, ok := attr(n, "type")
	if !ok {
		return true
	}
	typ = strings.ToLower(strings.TrimSpace(typ))
	if i := strings.IndexByte(typ, ';'); i >= 0 {
		typ = strings.TrimSpace(typ[:i])
	}
	switch typ {
	case "", "module", "text/javascript", "application/javascript", "text/ecmascript", "application/ecmascript",
		"application/x-javascript", "text/x-javascript", "text/jscript", "text/livescript":
		return true
	}
	return false
}

// isAppRoot reports an element frameworks mount a page into.
func isAppRoot(n *html.Node) bool {
	if n.Data == "app-root" {
		return true
	}
	id, ok := attr(n, "id")
	return ok && contains(appRootIDs, strings.TrimSpace(id))
}

// asksForJavaScript reports a <noscript> whose text asks for JavaScript.
// With scripting on, as html.Parse has it, its content is one text node.
func asksForJavaScript(n *html.Node) bool {
	var b strings.Builder
	for c := n.FirstChild; c != nil && b.Len() < 4096; c = c.NextSibling {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		} else {
			b.WriteString(VisibleText(c))
		}
	}
	t := strings.ToLower(b.String())
	if !strings.Contains(t, "javascript") && !strings.Contains(t, "java script") {
		return false
	}
	for _, p := range noscriptAsks {
		if strings.Contains(t, p) {
			return true
		}
	}
	return false
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// textMeter counts visible text in bytes, a run of white space as one,
// and stops counting past jsShellText.
type textMeter struct {
	n     int
	space bool // the last byte counted was a space
}

func (m *textMeter) add(s string) {
	for i := 0; i < len(s) && m.n <= jsShellText; i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r', '\f':
			if m.n > 0 && !m.space {
				m.n++
				m.space = true
			}
		default:
			m.n++
			m.space = false
		}
	}
}

// addTree counts the visible text under n (see VisibleText for what is
// hidden), walking by the tree's links.
func (m *textMeter) addTree(top *html.Node) {
	n := top
	for m.n <= jsShellText {
		descend := false
		switch n.Type {
		case html.TextNode:
			m.add(n.Data)
		case html.ElementNode:
			descend = n == top || !hiddenElement(n)
		case html.DocumentNode:
			descend = true
		}
		if n = nextWithin(n, top, descend); n == nil {
			return
		}
	}
}

// nextWithin is the node after n in document order within top (the whole
// tree when top is nil), entering n's children only when descend; nil past
// the end. Walking by the tree's own
// links needs no stack, so deeply nested pages cannot exhaust one and the
// walk allocates nothing.
func nextWithin(n, top *html.Node, descend bool) *html.Node {
	if descend && n.FirstChild != nil {
		return n.FirstChild
	}
	for n != top && n.NextSibling == nil {
		n = n.Parent
	}
	if n == top {
		return nil
	}
	return n.NextSibling
}
