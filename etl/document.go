package etl

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/url"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Document is one fetched page, parsed once and shared by every mapping
// that runs on it. It is owned by one Extract call and is not shared across
// goroutines.
type Document struct {
	URL  *url.URL   // the page URL (nil when it did not parse)
	Base *url.URL   // where relative links resolve: URL, or <base href>
	Root *html.Node // the HTML tree; nil for a JSON document
	JSON any        // the decoded body of a JSON document
	Body string     // the raw body

	parseErr error // why the body could not be parsed, if it could not

	// shared: Body and the tree's strings lie in the caller's body, which
	// is only valid for the call (see extract).
	shared bool

	ar *arena // the tree's pooled memory, given back by release

	// lazily built, per document
	jsonld   []any
	jsonldOK bool
	scanned  bool                    // scan has run
	meta     map[string][]string     // <meta> contents by lower-cased name/property/itemprop
	ldTexts  []string                // bodies of application/ld+json scripts
	hrefs    []anchor                // a/area elements with an href, in document order
	prefix   string                  // normalized scheme://host of Base, for resolve
	prefixOK int8                    // 0 not computed, 1 usable, -1 not usable
	byTag    map[string][]*html.Node // elements by tag name, for xpathPlan
	plan     *scanPlan               // what scan collects
	strs     []byte                  // resolved links, see concat
}

// scanPlan is what scan collects: the elements of the tags the mappings'
// XPath plans look up, besides the hrefs, meta values and JSON-LD blocks
// it always indexes. A Set makes one; the fast parser collects it as it
// makes each element.
type scanPlan struct {
	tags  []string
	atoms []atom.Atom // the tags' atoms, 0 for a name without one
	mask  uint64      // a bit (scanBit) for each atom collect looks at
}

func newScanPlan(tags []string) *scanPlan {
	pl := &scanPlan{tags: tags,
		mask: scanBit(atom.A) | scanBit(atom.Area) | scanBit(atom.Meta) | scanBit(atom.Script)}
	for _, t := range tags {
		at := atom.Lookup([]byte(t))
		pl.atoms = append(pl.atoms, at)
		pl.mask |= scanBit(at)
	}
	return pl
}

// noPlan collects no tag's elements.
var noPlan = newScanPlan(nil)

// scanBit is an atom's bit in scanPlan.mask: an element whose bit is clear
// is of no atom the plan looks at.
func scanBit(t atom.Atom) uint64 { return 1 << (t >> 8 & 63) }

// scan indexes what several parts of extraction need (meta values,
// JSON-LD blocks, link hrefs, the plan's elements), so that each costs a
// lookup rather than another walk over the whole page. The fast parser
// has collected the elements as it made them; a tree from html.Parse is
// walked once.
func (d *Document) scan() {
	if d.scanned {
		return
	}
	d.scanned = true
	d.meta = map[string][]string{}
	if d.Root == nil {
		return
	}
	var lists [][]*html.Node
	var special []*html.Node
	if d.ar != nil {
		d.hrefs, special = d.ar.hrefs, d.ar.special
		lists = d.ar.tagLists[:len(d.plan.tags)]
	} else {
		lists = make([][]*html.Node, len(d.plan.tags))
		walk(d.Root, func(n *html.Node) bool {
			if n.Type != html.ElementNode {
				return true
			}
			for i, t := range d.plan.tags {
				if len(n.Data) == len(t) && n.Data == t {
					lists[i] = append(lists[i], n)
				}
			}
			noteElement(n, &d.hrefs, &special)
			return true
		})
	}
	for _, n := range special {
		d.scanSpecial(n)
	}
	if len(lists) > 0 && d.byTag == nil {
		d.byTag = make(map[string][]*html.Node, len(lists))
	}
	for i, t := range d.plan.tags {
		d.byTag[t] = lists[i]
	}
}

// anchor is an a or area element with an href: the raw href and the
// element, whose text (AnchorText) is read once the tree is whole.
type anchor struct {
	href string
	node *html.Node
}

// noteElement adds what scan takes from an element besides the plan's
// lists: an a or area element with an href to hrefs, a meta or script
// element to special, for scanSpecial to read once the tree is whole. The
// fast parser calls it as it makes each element, scan on a walked tree.
func noteElement(n *html.Node, hrefs *[]anchor, special *[]*html.Node) {
	switch n.DataAtom {
	case atom.A, atom.Area:
		if href, ok := hrefOf(n); ok {
			*hrefs = append(*hrefs, anchor{href, n})
		}
	case atom.Meta, atom.Script:
		*special = append(*special, n)
	}
}

// hrefOf returns the href of an a or area element.
func hrefOf(n *html.Node) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == "href" && a.Namespace == "" {
			return a.Val, true
		}
	}
	return "", false
}

// scanSpecial indexes a meta element's value or a script's JSON-LD text.
func (d *Document) scanSpecial(n *html.Node) {
	switch n.DataAtom {
	case atom.Meta:
		d.indexMeta(n)
	case atom.Script:
		for _, a := range n.Attr {
			if a.Key == "type" && strings.EqualFold(strings.TrimSpace(strings.SplitN(a.Val, ";", 2)[0]), "application/ld+json") {
				d.ldTexts = append(d.ldTexts, innerText(n))
				break
			}
		}
	}
}

func (d *Document) indexMeta(n *html.Node) {
	var keys []string
	content, has := "", false
	for _, a := range n.Attr {
		switch a.Key {
		case "name", "property", "itemprop":
			if k := strings.ToLower(strings.TrimSpace(a.Val)); k != "" && !contains(keys, k) {
				keys = append(keys, k)
			}
		case "content":
			content, has = a.Val, true
		}
	}
	if has && strings.TrimSpace(content) != "" {
		for _, k := range keys {
			d.meta[k] = append(d.meta[k], content)
		}
	}
}

// isJSONType reports whether a Content-Type names JSON.
func isJSONType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(strings.SplitN(contentType, ";", 2)[0]))
	}
	return mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json")
}

// NewDocument parses body as HTML, or as JSON when contentType says so (or
// when the body is valid JSON whatever the content type). A body that fails to
// parse still yields a Document; the error is reported on every field.
func NewDocument(pageURL string, body []byte, contentType string) *Document {
	return newDocument(pageURL, string(body), body, contentType, nil, ParserFast)
}

// newDocument is NewDocument on body whose text is text, either a copy of
// body or body's own memory (Extract, which copies out what it returns).
// plan is what scan collects, nil for noPlan; parser is how HTML is parsed.
func newDocument(pageURL, text string, body []byte, contentType string, plan *scanPlan, parser HTMLParser) *Document {
	if plan == nil {
		plan = noPlan
	}
	d := &Document{Body: text, plan: plan}
	if u, err := url.Parse(strings.TrimSpace(pageURL)); err == nil && u.IsAbs() {
		d.URL = u
		d.Base = u
	}
	trimmed := bytes.TrimSpace(body)
	asJSON := isJSONType(contentType)
	// Servers send JSON under any content type; no HTML page starts with
	// a brace or bracket, so a body that does and is valid JSON is JSON.
	if !asJSON && len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') && json.Valid(trimmed) {
		asJSON = true
	}
	if asJSON {
		v, err := decodeJSON(body)
		if err != nil {
			d.parseErr = err
			return d
		}
		d.JSON = v
		return d
	}
	root, ar, err := parseHTML(body, d.Body, plan, parser)
	if err != nil {
		d.parseErr = err
		return d
	}
	d.Root, d.ar = root, ar
	if d.URL != nil {
		if href, ok := findBaseHref(root); ok {
			if b, err := d.URL.Parse(cleanHref(href)); err == nil && (b.Scheme == "http" || b.Scheme == "https") {
				d.Base = b
			}
		}
	}
	return d
}

// decodeJSON decodes a JSON body keeping integers exact.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return normalizeJSON(v), nil
}

// normalizeJSON turns json.Number into int64 when exact, else float64, the
// shapes the jsonpath library understands.
func normalizeJSON(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		if f, err := t.Float64(); err == nil {
			return f
		}
		return t.String()
	case map[string]any:
		for k, e := range t {
			t[k] = normalizeJSON(e)
		}
	case []any:
		for i, e := range t {
			t[i] = normalizeJSON(e)
		}
	}
	return v
}

// findBaseHref returns the href of the first <base> element in <head>.
func findBaseHref(root *html.Node) (string, bool) {
	var found string
	ok := false
	walk(root, func(n *html.Node) bool {
		if n.Type == html.ElementNode && n.DataAtom == atom.Base {
			for _, a := range n.Attr {
				if a.Key == "href" && a.Namespace == "" {
					found, ok = a.Val, true
					return false
				}
			}
		}
		if n.Type == html.ElementNode && n.DataAtom == atom.Body {
			return false
		}
		return true
	})
	return found, ok
}

// walk visits the tree in document order without recursion; visit returns
// false to stop the whole walk.
func walk(root *html.Node, visit func(*html.Node) bool) {
	n := root
	for n != nil {
		if !visit(n) {
			return
		}
		if n.FirstChild != nil {
			n = n.FirstChild
			continue
		}
		for n != nil && n != root && n.NextSibling == nil {
			n = n.Parent
		}
		if n == nil || n == root {
			return
		}
		n = n.NextSibling
	}
}

// innerText concatenates the text nodes under n, skipping comments.
func innerText(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	walk(n, func(c *html.Node) bool {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
		return true
	})
	return b.String()
}

// docValue is the value the first processor of a chain receives.
func (d *Document) docValue() []Value {
	v := Value{Text: d.Body, doc: true, JSON: d.JSON}
	if d.Root != nil {
		v.Node = d.Root
	}
	return []Value{v}
}

// linkSets returns outLinks' two sets, the arena's when the document has
// one: the raw hrefs', empty, and the resolved links', which outLinks
// resets for its number of links.
func (d *Document) linkSets() (raw map[string]struct{}, resolved *stringSet) {
	if d.ar == nil {
		return map[string]struct{}{}, &stringSet{}
	}
	if d.ar.seenRaw == nil {
		d.ar.seenRaw = map[string]struct{}{}
	}
	clear(d.ar.seenRaw)
	return d.ar.seenRaw, &d.ar.seen
}

// release gives the tree's nodes back for the next page. The document and
// every node of its tree must not be used afterwards; strings taken from
// it stay valid.
func (d *Document) release() {
	if d.ar != nil && d.scanned {
		d.ar.hrefs = d.hrefs[:0]
	}
	releaseArena(d.ar)
	d.ar, d.Root, d.hrefs = nil, nil, nil
}
