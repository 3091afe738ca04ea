package learn

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Candidate rules are generated from where a value was found on one page,
// in every way the project's processors can say "this place": through a
// label the page prints next to it, a stable attribute of the element or
// of an ancestor, its position, a JSON-LD property, a path into a
// script's JSON, a meta tag; then a regular expression or the email
// processor when the value is part of a longer text. Which of them also
// hold on the other teachers' pages is for induce to find out.

// Bounds on the anchors tried around one element.
const (
	labelLevels  = 2  // ancestors of the element whose preceding label is tried
	attrLevels   = 4  // ancestors whose id, class or attributes anchor a rule
	maxLabelLen  = 40 // a label is short
	maxLabelWord = 5
	contextWords = 3 // words of context a regular expression or a text anchor takes
)

// stableAttrs are the attributes that name what an element holds.
var stableAttrs = []string{"id", "class", "itemprop", "property", "name", "rel", "role"}

// candidates returns the rules that would take the value found at o from
// this page, each at most once. own holds the words of the teacher's own
// values: a label, an anchor or a context that contains one is about this
// record, not the page's template, and is not used.
func (d *doc) candidates(o occurrence, k kind, own words) []*rule {
	var out []*rule
	seen := map[string]bool{}
	add := func(r *rule) {
		if !seen[r.key] {
			seen[r.key] = true
			out = append(out, r)
		}
	}
	switch o.kind {
	case occLD:
		for _, r := range ldRules(o, k) {
			add(r)
		}
	case occBlob:
		for _, r := range d.blobRules(o, k) {
			add(r)
		}
	case occJSONDoc:
		add(newRule(rankBlob, 0, jsonpathStep(jsonPath(o.path))))
	case occComposite:
		for _, r := range d.compositeRules(o, k, own) {
			add(r)
		}
	case occElement, occAttr, occTextNode:
		el := o.node
		if o.kind == occTextNode {
			el = o.node.Parent
		}
		for x := el; x != nil && x.Type == html.ElementNode; x = x.Parent {
			if !xmlName.MatchString(x.Data) {
				// A tag XPath cannot name (a broken page's `<a"`):
				// no path reaches it.
				return out
			}
		}
		finishers := d.finishers(o, k, own)
		tail := ""
		switch o.kind {
		case occAttr:
			tail = "/@" + o.attr
			if el.DataAtom == atom.Meta && o.attr == "content" {
				// The meta processor says it best; an XPath to a meta
				// would only say it again, worse.
				for _, a := range []string{"property", "name", "itemprop"} {
					if v := strings.TrimSpace(attr(el, a)); v != "" {
						for _, f := range finishers {
							add(finish(rankMeta, 0, step{Type: "meta", Parameters: map[string]any{"name": v}}, f))
						}
					}
				}
				return out
			}
		case occTextNode:
			tail = "/text()"
			for _, sel := range d.textLabelSelectors(o.node, own) {
				for _, f := range finishers {
					add(finish(rankLabel, sel.cost, xpathStep(sel.expr), f))
				}
			}
		}
		for _, sel := range d.selectors(el, o, own) {
			for _, f := range finishers {
				add(finish(sel.rank, sel.cost, xpathStep(sel.expr+tail), f))
			}
		}
	}
	return out
}

// finisher is what follows the xpath: nothing (a trim) when the selected
// text is the value, the email processor for an address in a longer text,
// a regular expression for any other part of one.
type finisher struct {
	steps []step
	cost  int
	cut   bool // a regular expression takes the value out of the text
}

// finish makes a rule of a selecting step and a finisher.
func finish(r rank, cost int, sel step, f finisher) *rule {
	out := newRule(r, cost+f.cost, append([]step{sel}, f.steps...)...)
	out.cut = f.cut
	return out
}

func (d *doc) finishers(o occurrence, k kind, own words) []finisher {
	switch {
	case o.exact && k.textual():
		return []finisher{{steps: []step{trimStep()}}}
	case o.exact:
		return []finisher{{}}
	case k == kindEmail:
		return []finisher{{steps: []step{{Type: "email"}}, cost: 1}}
	}
	var out []finisher
	for _, p := range regexVariants(o.text, o.loc, k, own) {
		out = append(out, finisher{steps: []step{trimStep(), regexStep(p)}, cost: 2, cut: true})
	}
	return out
}

// regexVariants are regular expressions that take text[loc[0]:loc[1]]
// out of text (collapsed): anchored on the words before it (or the
// start) and on what follows (punctuation, a word, or the end). Only
// those that give back exactly the value on this text are kept.
func regexVariants(text string, loc []int, k kind, own words) []string {
	prefix, value, suffix := text[:loc[0]], text[loc[0]:loc[1]], text[loc[1]:]
	var lefts []string
	if strings.TrimSpace(prefix) == "" {
		lefts = append(lefts, "^")
	} else {
		words := strings.Fields(prefix)
		// Words apart stay apart: "as a" must not take "an" of "as an".
		gap := `\s*`
		if strings.TrimRight(prefix, " ") != prefix {
			gap = `\s+`
		}
		for n := 1; n <= contextWords && n <= len(words); n++ {
			lit := strings.Join(words[len(words)-n:], " ")
			if own.in(lit) {
				break
			}
			// A word of context starts at a word boundary: "in" must
			// not match the end of "Quinn".
			b := ""
			if r, _ := utf8.DecodeRuneInString(lit); unicode.IsLetter(r) || unicode.IsDigit(r) {
				b = `\b`
			}
			lefts = append(lefts, b+regexp.QuoteMeta(lit)+gap)
		}
		if len(words) <= contextWords && !own.in(prefix) {
			lefts = append(lefts, "^"+regexp.QuoteMeta(strings.Join(words, " "))+gap)
		}
	}
	var rights []string
	if strings.TrimSpace(suffix) == "" {
		rights = append(rights, "$")
	} else {
		s := strings.TrimLeft(suffix, " ")
		if r, size := utf8.DecodeRuneInString(s); unicode.IsPunct(r) || unicode.IsSymbol(r) {
			rights = append(rights, regexp.QuoteMeta(s[:size]))
			if size == len(s) {
				rights = append(rights, regexp.QuoteMeta(s[:size])+"$")
			}
		}
		words := strings.Fields(suffix)
		gap := `\s*`
		if strings.TrimLeft(suffix, " ") != suffix {
			gap = `\s+`
		}
		for n := 1; n <= 2 && n <= len(words); n++ {
			lit := strings.Join(words[:n], " ")
			if own.in(lit) {
				break
			}
			// A word of context ends at a word boundary: "in" must not
			// match the middle of "engineer".
			b := ""
			if r, _ := utf8.DecodeLastRuneInString(lit); unicode.IsLetter(r) || unicode.IsDigit(r) {
				b = `\b`
			}
			rights = append(rights, gap+regexp.QuoteMeta(lit)+b)
		}
	}
	var out []string
	for _, l := range lefts {
		for _, r := range rights {
			group := `(.+?)`
			if r == "$" {
				group = `(.+)`
			}
			p := l + group + r
			re, err := regexp.Compile(p)
			if err != nil {
				continue
			}
			if m := re.FindStringSubmatch(text); m != nil && k.same(m[1], value) {
				out = append(out, p)
			}
		}
	}
	return out
}

// selector is an XPath to an element, with its rank and cost.
type selector struct {
	expr string
	rank rank
	cost int
}

// selectors are the XPaths to el: by a label before it (or before one of
// its ancestors), by a stable attribute of it or an ancestor, by its
// position; and, when the value is part of el's text, by the words its
// text starts with or that come before the value.
func (d *doc) selectors(el *html.Node, o occurrence, own words) []selector {
	var out []selector
	out = append(out, d.labelSelectors(el, o, own)...)
	if o.kind == occElement && !o.exact {
		out = append(out, textAnchors(el, o, own)...)
	}
	for up, x := 0, el; up <= attrLevels && x != nil && x.Type == html.ElementNode && x.DataAtom != atom.Body && x.DataAtom != atom.Html; up, x = up+1, x.Parent {
		rel := relPath(x, el)
		for _, a := range stableAttrs {
			v := attr(x, a)
			if strings.TrimSpace(v) == "" || (a == "name" && x.DataAtom == atom.Meta) || own.in(v) {
				continue
			}
			r := rankAttr
			if a == "itemprop" || a == "property" {
				r = rankMicrodata
				if scope := itemScope(x); scope != nil {
					out = append(out, selector{expr: fmt.Sprintf("//%s[@itemtype=%s]//%s[@%s=%s]%s", scope.Data, xq(attr(scope, "itemtype")), x.Data, a, xq(v), rel), rank: r, cost: up + 1})
				}
			}
			out = append(out, selector{expr: fmt.Sprintf("//%s[@%s=%s]%s", x.Data, a, xq(v), rel), rank: r, cost: up})
		}
	}
	out = append(out, selector{expr: structuralPath(el), rank: rankStructural})
	return out
}

// labelSelectors anchor el on a short text just before it or before an
// ancestor (a <dt> before its <dd>, a <th> before its <td>, a "Location:"
// span): //dt[normalize-space()='Location']/following-sibling::dd[1],
// also scoped to the label's nearest container with an id or a class.
func (d *doc) labelSelectors(el *html.Node, o occurrence, own words) []selector {
	var out []selector
	value := o.text[o.loc[0]:o.loc[1]]
	for up, x := 0, el; up <= labelLevels && x != nil && x.Type == html.ElementNode && x.DataAtom != atom.Body; up, x = up+1, x.Parent {
		l := prevElement(x)
		if l == nil {
			continue
		}
		lt := d.textOf(l)
		if !xmlName.MatchString(l.Data) || !d.isLabel(l) || strings.Contains(lt, value) || own.in(lt) {
			continue
		}
		base := fmt.Sprintf("%s[normalize-space()=%s]/following-sibling::%s[1]%s", l.Data, xq(lt), x.Data, relPath(x, el))
		out = append(out, selector{expr: "//" + base, rank: rankLabel, cost: up})
		if c, a := container(l); c != nil {
			out = append(out, selector{expr: fmt.Sprintf("//%s[@%s=%s]//%s", c.Data, a, xq(attr(c, a)), base), rank: rankLabel, cost: up + 1})
		}
	}
	return out
}

// textLabelSelectors anchor a text node on the label element before it:
// <b>Email:</b> ada@… → //b[normalize-space()='Email:']/following-sibling::text()[1].
func (d *doc) textLabelSelectors(t *html.Node, own words) []selector {
	var l *html.Node
	for p := t.PrevSibling; p != nil; p = p.PrevSibling {
		if p.Type == html.ElementNode {
			l = p
			break
		}
		if p.Type == html.TextNode && strings.TrimSpace(p.Data) != "" {
			return nil
		}
	}
	if l == nil || !xmlName.MatchString(l.Data) || !d.isLabel(l) || own.in(d.textOf(l)) {
		return nil
	}
	base := fmt.Sprintf("%s[normalize-space()=%s]/following-sibling::text()[1]", l.Data, xq(d.textOf(l)))
	out := []selector{{expr: "//" + base, rank: rankLabel}}
	if c, a := container(l); c != nil {
		out = append(out, selector{expr: fmt.Sprintf("//%s[@%s=%s]//%s", c.Data, a, xq(attr(c, a)), base), rank: rankLabel, cost: 1})
	}
	return out
}

// textAnchors select el by the words its text starts with, or by the
// words just before the value: //p[starts-with(normalize-space(), 'You
// can write')], //p[contains(normalize-space(), 'is based in')].
func textAnchors(el *html.Node, o occurrence, own words) []selector {
	var out []selector
	value := o.text[o.loc[0]:o.loc[1]]
	ws := strings.Fields(o.text[:o.loc[0]])
	for n := 1; n <= contextWords && n <= len(ws); n++ {
		start := strings.Join(ws[:n], " ")
		if own.in(start) || strings.Contains(start, value) {
			break
		}
		out = append(out, selector{expr: fmt.Sprintf("//%s[starts-with(normalize-space(), %s)]", el.Data, xq(start)), rank: rankLabel, cost: 1})
	}
	for n := 1; n <= contextWords && n < len(ws); n++ {
		before := strings.Join(ws[len(ws)-n:], " ")
		if own.in(before) {
			break
		}
		out = append(out, selector{expr: fmt.Sprintf("//%s[contains(normalize-space(), %s)]", el.Data, xq(before)), rank: rankLabel, cost: 2})
	}
	return out
}

// itemScope is the microdata item n is a property of: its nearest
// ancestor with an itemtype (nil when none, or when XPath cannot name it).
func itemScope(n *html.Node) *html.Node {
	for c := n.Parent; c != nil && c.Type == html.ElementNode; c = c.Parent {
		if strings.TrimSpace(attr(c, "itemtype")) != "" {
			if !xmlName.MatchString(c.Data) {
				return nil
			}
			return c
		}
	}
	return nil
}

// container is the nearest ancestor of n (below body) with an id or a
// class, and which of the two it has.
func container(n *html.Node) (*html.Node, string) {
	for c := n.Parent; c != nil && c.Type == html.ElementNode && c.DataAtom != atom.Body && c.DataAtom != atom.Html && xmlName.MatchString(c.Data); c = c.Parent {
		for _, a := range []string{"id", "class"} {
			if strings.TrimSpace(attr(c, a)) != "" {
				return c, a
			}
		}
	}
	return nil, ""
}

// isLabel reports whether element l reads like a label: a short text of
// a few words, with a letter, that is l's own (its text is not spread
// over several child elements, as a table row's over its cells is).
func (d *doc) isLabel(l *html.Node) bool {
	t := d.textOf(l)
	if t == "" || len(t) > maxLabelLen || len(strings.Fields(t)) > maxLabelWord || strings.IndexFunc(t, unicode.IsLetter) < 0 {
		return false
	}
	holders := 0
	for c := l.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && d.textOf(c) != "" {
			holders++
		}
	}
	return holders <= 1
}

// words is a set of lower-cased words: a teacher's own values'.
type words map[string]bool

// wordsOf splits values into their words (letters and digits) of two
// runes or more. Of an address only the part before the @ counts, and of
// a URL only its host's name: "mail" or "www" or "com" say nothing about
// a record, and "E-mail:" is a label.
func wordsOf(values ...string) words {
	w := words{}
	for _, v := range values {
		switch l := strings.ToLower(strings.TrimSpace(v)); {
		case kindOf([]string{l}) == kindEmail:
			v, _, _ = strings.Cut(strings.TrimPrefix(l, "mailto:"), "@")
		case kindOf([]string{l}) == kindURL:
			if u, err := url.Parse(l); err == nil {
				h := strings.TrimPrefix(u.Hostname(), "www.")
				if i := strings.LastIndexByte(h, '.'); i > 0 {
					h = h[:i]
				}
				v = h
			}
		}
		for _, f := range strings.FieldsFunc(strings.ToLower(v), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			if utf8.RuneCountInString(f) >= 2 {
				w[f] = true
			}
		}
	}
	return w
}

// in reports whether s has one of the words.
func (w words) in(s string) bool {
	for f := range wordsOf(s) {
		if w[f] {
			return true
		}
	}
	return false
}

func prevElement(n *html.Node) *html.Node {
	for p := n.PrevSibling; p != nil; p = p.PrevSibling {
		if p.Type == html.ElementNode {
			return p
		}
	}
	return nil
}

// relPath is the path of tag steps from x down to el ("" when x is el).
func relPath(x, el *html.Node) string {
	var steps []string
	for n := el; n != nil && n != x; n = n.Parent {
		steps = append(steps, "/"+n.Data)
	}
	var b strings.Builder
	for i := len(steps) - 1; i >= 0; i-- {
		b.WriteString(steps[i])
	}
	return b.String()
}

// structuralPath is el's absolute position: /html/body/div[2]/p[3].
func structuralPath(el *html.Node) string {
	var steps []string
	for n := el; n != nil && n.Type == html.ElementNode; n = n.Parent {
		s := n.Data
		same, pos := 0, 0
		for c := n.Parent.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && c.Data == n.Data {
				same++
				if c == n {
					pos = same
				}
			}
		}
		if same > 1 {
			s += fmt.Sprintf("[%d]", pos)
		}
		steps = append(steps, s)
	}
	var b strings.Builder
	for i := len(steps) - 1; i >= 0; i-- {
		b.WriteString("/" + steps[i])
	}
	return b.String()
}

// xq writes s as an XPath string literal.
func xq(s string) string {
	if !strings.Contains(s, "'") {
		return "'" + s + "'"
	}
	if !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	parts := strings.Split(s, "'")
	for i, p := range parts {
		parts[i] = "'" + p + "'"
	}
	return "concat(" + strings.Join(parts, `, "'", `) + ")"
}

// ldRules are the jsonld processor calls that reach a JSON-LD value:
// one per typed object along its path, with the property path from there.
func ldRules(o occurrence, k kind) []*rule {
	var out []*rule
	for _, t := range o.typed {
		var props []string
		ok := true
		for i, p := range o.path[t.depth:] {
			switch v := p.(type) {
			case int:
				// ldGet looks through an array to its first element; a
				// value in a final array is expanded.
				if v != 0 && i != len(o.path[t.depth:])-1 {
					ok = false
				}
			case string:
				if strings.Contains(v, ".") || v == "@type" {
					ok = false
				}
				if v != "@value" && v != "@id" {
					props = append(props, v)
				}
			}
		}
		if !ok || len(props) == 0 {
			continue
		}
		steps := []step{{Type: "jsonld", Parameters: map[string]any{"type": t.typ, "property": strings.Join(props, ".")}}}
		if k.textual() {
			steps = append(steps, trimStep())
		}
		out = append(out, newRule(rankLD, len(props), steps...))
	}
	return out
}

// blobRules take a value out of JSON in a script: select the script (by
// id, by type, by what the JSON is assigned to), cut the JSON out of the
// JavaScript around it, and follow the path.
func (d *doc) blobRules(o occurrence, k kind) []*rule {
	b := o.block
	var sels []string
	if id := attr(b.script, "id"); id != "" {
		sels = append(sels, fmt.Sprintf("//script[@id=%s]", xq(id)))
	}
	if t := strings.TrimSpace(attr(b.script, "type")); t != "" && !strings.Contains(strings.ToLower(t), "javascript") {
		sels = append(sels, fmt.Sprintf("//script[@type=%s]", xq(t)))
	}
	if b.marker != "" {
		sels = append(sels, fmt.Sprintf("//script[contains(., %s)]", xq(b.marker)))
	}
	path := step{Type: "jsonpath", Parameters: map[string]any{"expression": jsonPath(o.path)}}
	var cuts [][]step
	if b.whole {
		cuts = [][]step{nil}
	} else {
		open, close := `\{`, `\}`
		if b.open == '[' {
			open, close = `\[`, `\]`
		}
		m := regexp.QuoteMeta(b.marker)
		cuts = [][]step{
			{regexStep(`(?s)` + m + `\s*=\s*(` + open + `.*` + close + `)\s*;`)},
			{regexStep(`(?s)` + m + `\s*=\s*(` + open + `.*` + close + `)`)},
		}
	}
	var out []*rule
	for i, sel := range sels {
		for j, cut := range cuts {
			steps := append(append([]step{xpathStep(sel)}, cut...), path)
			if k.textual() {
				steps = append(steps, trimStep())
			}
			out = append(out, newRule(rankBlob, i+j, steps...))
		}
	}
	return out
}
