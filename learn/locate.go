package learn

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// doc is a teacher page parsed for locating values: the HTML tree (the
// one etl works on: html.Parse's), its text index, and the JSON found in
// its scripts. A JSON response has only json.
//
// The text index is made once per page: the page's text (scripts and
// styles left out) with white space collapsed as the trim processor
// does, and each element's span in it. An element's text is a slice of
// it, so a page of 150 KB costs its text once rather than once per level
// of nesting, and a value is looked for in the whole text once: only
// the elements whose span holds a match are looked at.
type doc struct {
	page  *Page
	base  *url.URL
	root  *html.Node
	all   string                  // the page's collapsed text
	span  map[*html.Node][2]int32 // each element's [start, end) in all
	ld    []jsonBlock             // application/ld+json blocks
	blobs []jsonBlock             // JSON in other scripts
	json  any                     // the body of a JSON response
	// pieceIx indexes the short texts the page holds whole, per kind
	// of value, for finding a value in pieces (composite.go).
	pieceIx map[kind]map[string][]occurrence
	hay     string // the text and JSON strings, lower-cased, for a quick look first
	lower   string // all, lower-cased (made when asked)
	digits  string // the digits of all, and where each is (digitText)
	digitAt []int32
	attrs   string // attrText (made when asked)
}

// jsonBlock is a JSON value in a <script>.
type jsonBlock struct {
	script *html.Node
	data   any
	whole  bool   // the script's text is the JSON value and nothing else
	marker string // what the value is assigned to ("window.__STATE__"), when not whole
	open   byte   // '{' or '['
}

// parseDoc parses a page; a JSON response (by content type or by a body
// that is valid JSON) is kept as JSON.
func parseDoc(p *Page) *doc {
	d := &doc{page: p, span: map[*html.Node][2]int32{}}
	d.base, _ = url.Parse(p.URL)
	body := bytes.TrimSpace(p.Body)
	mt, _, _ := mime.ParseMediaType(p.ContentType)
	if strings.HasSuffix(mt, "json") || (len(body) > 0 && (body[0] == '{' || body[0] == '[') && json.Valid(body)) {
		if v, ok := decodeJSON(body); ok {
			d.json = v
			return d
		}
	}
	root, err := html.Parse(bytes.NewReader(p.Body))
	if err != nil {
		return d
	}
	d.root = root
	var ix textIndex
	ix.space = true
	d.collect(root, &ix)
	d.all = ix.b.String()
	return d
}

func decodeJSON(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	return v, true
}

// skipped are elements whose text is not page text.
func skipped(n *html.Node) bool {
	switch n.DataAtom {
	case atom.Script, atom.Style, atom.Template, atom.Noscript:
		return true
	}
	return false
}

// attrText is every attribute value of the page a value may be found
// in, white space collapsed, lower-cased, one a line: where a value is
// looked for before every attribute is.
func (d *doc) attrText() string {
	if d.attrs != "" || d.root == nil {
		return d.attrs
	}
	var b strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				if a.Key != "style" && a.Key != "id" && a.Key != "class" {
					b.WriteString(strings.ToLower(collapse(a.Val)))
					b.WriteByte('\n')
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(d.root)
	d.attrs = b.String() + "\n"
	return d.attrs
}

// findAll returns where f's value may be in the page's text. A value of
// words is looked for as a string (the text's white space is collapsed
// already), in the text lower-cased when case does not count.
func (d *doc) findAll(f *finder) [][]int {
	if f.year != "" || f.digits != "" {
		return d.findNear(f)
	}
	if f.lit == "" {
		return f.findAll(d.all)
	}
	text, lit := d.all, f.lit
	if f.fold {
		if d.lower == "" {
			d.lower = strings.ToLower(d.all)
		}
		text, lit = d.lower, strings.ToLower(f.lit)
		if len(text) != len(d.all) {
			// Lower-casing moved the offsets: the expression, then.
			return f.findAll(d.all)
		}
	}
	var out [][]int
	for from := 0; from <= len(text); {
		i := strings.Index(text[from:], lit)
		if i < 0 {
			break
		}
		out = append(out, []int{from + i, from + i + len(lit)})
		from += i + max(len(lit), 1)
	}
	if f.obf != nil {
		out = append(out, f.obf.FindAllStringIndex(d.all, -1)...)
	}
	return out
}

// nearWindow is how far around a date's year, or a number's digits,
// the rest of it may be.
const nearWindow = 40

// findNear finds a date, a phone number or a number in the page's text
// where its year or its digits are, trying f's expression only around
// them: a text of 150 KB is read once as a string, not by the
// expression.
func (d *doc) findNear(f *finder) [][]int {
	var spans [][2]int
	if f.year != "" {
		for from := 0; ; {
			i := strings.Index(d.all[from:], f.year)
			if i < 0 {
				break
			}
			spans = append(spans, [2]int{from + i - nearWindow, from + i + len(f.year) + nearWindow})
			from += i + len(f.year)
		}
	} else {
		digits, at := d.digitText()
		for from := 0; f.digits != ""; {
			i := strings.Index(digits[from:], f.digits)
			if i < 0 {
				break
			}
			spans = append(spans, [2]int{int(at[from+i]) - nearWindow, int(at[from+i+len(f.digits)-1]) + 1 + nearWindow})
			from += i + 1
		}
	}
	// Windows that overlap are one.
	var merged [][2]int
	for _, sp := range spans {
		sp = [2]int{max(sp[0], 0), min(sp[1], len(d.all))}
		if n := len(merged); n > 0 && sp[0] <= merged[n-1][1] {
			merged[n-1][1] = max(merged[n-1][1], sp[1])
			continue
		}
		merged = append(merged, sp)
	}
	var out [][]int
	for _, w := range merged {
		for _, m := range f.near.FindAllStringIndex(d.all[w[0]:w[1]], -1) {
			out = append(out, []int{w[0] + m[0], w[0] + m[1]})
		}
	}
	return out
}

// digitText is the digits of the page's text, in order, and where each
// is in it.
func (d *doc) digitText() (string, []int32) {
	if d.digitAt == nil {
		var b strings.Builder
		at := []int32{}
		for i := 0; i < len(d.all); i++ {
			if c := d.all[i]; '0' <= c && c <= '9' {
				b.WriteByte(c)
				at = append(at, int32(i))
			}
		}
		d.digits, d.digitAt = b.String(), at
	}
	return d.digits, d.digitAt
}

// textIndex builds the collapsed text of the page and the span of each
// element in it, reading the JSON of scripts on the way.
type textIndex struct {
	b     strings.Builder
	space bool // the text written so far ends in white space (or is empty)
}

// collect indexes the text of n and everything below it.
func (d *doc) collect(n *html.Node, ix *textIndex) {
	if n.Type == html.TextNode {
		for _, r := range n.Data {
			if unicode.IsSpace(r) {
				if !ix.space {
					ix.b.WriteByte(' ')
					ix.space = true
				}
				continue
			}
			ix.b.WriteRune(r)
			ix.space = false
		}
		return
	}
	if n.Type == html.ElementNode && n.DataAtom == atom.Script {
		d.script(n)
	}
	start := int32(ix.b.Len())
	if n.Type == html.ElementNode && skipped(n) {
		d.span[n] = [2]int32{start, start}
		return
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.TextNode || c.Type == html.ElementNode || c.Type == html.DocumentNode {
			d.collect(c, ix)
		}
	}
	if n.Type == html.ElementNode {
		d.span[n] = [2]int32{start, int32(ix.b.Len())}
	}
}

// textOf is the collapsed text of element n: what collapse gives of all
// the text below it.
func (d *doc) textOf(n *html.Node) string {
	sp, ok := d.span[n]
	if !ok {
		return ""
	}
	return strings.TrimSpace(d.all[sp[0]:sp[1]])
}

// rawText is the text of a script as the xpath processor gives it.
func rawText(n *html.Node) string {
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return b.String()
}

// maxBlobStarts bounds the places in one script where a JSON value is
// looked for.
const maxBlobStarts = 32

// script reads the JSON of a script element: a JSON-LD block, a script
// that is JSON, or JSON assigned to something in JavaScript.
func (d *doc) script(n *html.Node) {
	text := rawText(n)
	typ := strings.ToLower(strings.TrimSpace(attr(n, "type")))
	if typ == "application/ld+json" {
		if v, ok := decodeJSON([]byte(text)); ok {
			d.ld = append(d.ld, jsonBlock{script: n, data: v, whole: true})
		}
		return
	}
	trimmed := strings.TrimSpace(text)
	if v, ok := decodeJSON([]byte(trimmed)); ok && len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		d.blobs = append(d.blobs, jsonBlock{script: n, data: v, whole: true, open: trimmed[0]})
		return
	}
	starts := 0
	for i := 0; i < len(text) && starts < maxBlobStarts; i++ {
		c := text[i]
		if c != '{' && c != '[' {
			continue
		}
		marker := assignedTo(text[:i])
		if marker == "" {
			continue
		}
		starts++
		dec := json.NewDecoder(strings.NewReader(text[i:]))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			continue
		}
		d.blobs = append(d.blobs, jsonBlock{script: n, data: v, marker: marker, open: c})
		i += int(dec.InputOffset()) - 1
	}
}

// assignedTo returns the name a value starting after before is assigned
// to ("window.__STATE__ = "), or "".
func assignedTo(before string) string {
	s := strings.TrimRight(before, " \t\r\n")
	if !strings.HasSuffix(s, "=") || strings.HasSuffix(s, "==") || strings.HasSuffix(s, "!=") {
		return ""
	}
	s = strings.TrimRight(s[:len(s)-1], " \t\r\n")
	i := len(s)
	for i > 0 {
		c := s[i-1]
		if c == '_' || c == '$' || c == '.' || '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'z' {
			i--
			continue
		}
		break
	}
	name := strings.TrimLeft(s[i:], ".0123456789")
	if name == "" {
		return ""
	}
	return name
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key && a.Namespace == "" {
			return a.Val
		}
	}
	return ""
}

// occKind is where a value was found.
type occKind int

const (
	occElement   occKind = iota // in an element's text (all of it, or part)
	occTextNode                 // in one text node of an element that has other content
	occAttr                     // in an attribute
	occLD                       // in a JSON-LD block
	occBlob                     // in JSON in a script
	occJSONDoc                  // in a JSON response
	occComposite                // in pieces (composite.go)
)

// occurrence is one place a known value appears on a page.
type occurrence struct {
	kind occKind
	node *html.Node // the element (occElement, occAttr), the text node (occTextNode), the script (occBlob)
	attr string     // occAttr: the attribute's name
	// text is the collapsed text the value was found in and loc where in
	// it; exact when the text is the value and nothing else.
	text       string
	loc        []int
	exact      bool
	obfuscated bool // an address written "name [at] host [dot] org"
	item       bool // one item of a list value
	// JSON: the path to the value, and for JSON-LD the typed objects
	// along it.
	path  []any // string keys, int indices
	block *jsonBlock
	typed []typedAt
	comp  *composite // occComposite: the pieces
}

// typedAt is an object with an @type at path[:depth].
type typedAt struct {
	depth int
	typ   string
}

// locate finds every place value (of kind k) appears on the page: the
// deepest elements whose text holds it, text nodes, attributes, JSON-LD
// and script JSON, or the JSON of a JSON response; a text the page
// shows nowhere whole, in pieces (composite.go).
func (d *doc) locate(k kind, value string) []occurrence {
	out := d.locateWhole(k, value)
	if len(out) == 0 && k.textual() {
		out = d.composites(k, value)
	}
	return out
}

// locateWhole finds the places that hold the whole value.
func (d *doc) locateWhole(k kind, value string) []occurrence {
	f := newFinder(k, value)
	var out []occurrence
	if d.json != nil {
		walkJSON(d.json, nil, nil, func(path []any, _ []typedAt, s string) {
			if k.same(s, value) {
				out = append(out, occurrence{kind: occJSONDoc, path: path, exact: true, text: s, loc: []int{0, len(s)}})
			}
		})
		return out
	}
	if d.root == nil {
		return nil
	}
	// Where the value is in the page's text: an element whose span holds
	// none of these does not show it.
	matches := d.findAll(f)
	attrs := k == kindURL || f.mayMatch(d.attrText())
	if len(matches) == 0 && !attrs {
		return d.locateJSON(k, value, out)
	}
	holds := func(n *html.Node) bool {
		sp := d.span[n]
		for _, m := range matches {
			if int(sp[0]) <= m[0] && m[1] <= int(sp[1]) {
				return true
			}
		}
		return false
	}
	var visit func(n *html.Node) bool // reports whether n's text holds the value
	visit = func(n *html.Node) bool {
		if n.Type == html.ElementNode && skipped(n) {
			return false
		}
		childHolds := false
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode || c.Type == html.DocumentNode {
				if visit(c) {
					childHolds = true
				}
			}
		}
		if n.Type != html.ElementNode {
			return childHolds
		}
		if attrs {
			out = append(out, d.attrOccurrences(n, k, value, f)...)
		}
		if childHolds {
			return true
		}
		if !holds(n) {
			return false
		}
		t := d.textOf(n)
		loc, obf := f.find(t)
		if loc == nil {
			return false
		}
		exact := k.same(t, value) || (!obf && loc[0] == 0 && loc[1] == len(t))
		out = append(out, occurrence{kind: occElement, node: n, text: t, loc: loc, exact: exact, obfuscated: obf})
		if !exact {
			// The value may sit in one text node among other content:
			// "<b>Email:</b> ada@…".
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				if c.Type != html.TextNode {
					continue
				}
				ct := collapse(c.Data)
				if l, o := f.find(ct); l != nil && ct != t {
					out = append(out, occurrence{kind: occTextNode, node: c, text: ct, loc: l, obfuscated: o,
						exact: k.same(ct, value) || (!o && l[0] == 0 && l[1] == len(ct))})
				}
			}
		}
		return true
	}
	visit(d.root)
	return d.locateJSON(k, value, out)
}

// locateJSON adds the places in the page's JSON-LD and script JSON
// that hold the value.
func (d *doc) locateJSON(k kind, value string, out []occurrence) []occurrence {
	for i := range d.ld {
		b := &d.ld[i]
		walkJSON(b.data, nil, nil, func(path []any, typed []typedAt, s string) {
			if k.same(s, value) {
				out = append(out, occurrence{kind: occLD, node: b.script, path: path, typed: typed, block: b, exact: true, text: s, loc: []int{0, len(s)}})
			}
		})
	}
	for i := range d.blobs {
		b := &d.blobs[i]
		walkJSON(b.data, nil, nil, func(path []any, _ []typedAt, s string) {
			if k.same(s, value) {
				out = append(out, occurrence{kind: occBlob, node: b.script, path: path, block: b, exact: true, text: s, loc: []int{0, len(s)}})
			}
		})
	}
	return out
}

var xmlName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)

// attrOccurrences finds the value in n's attributes: equal to it (an
// href resolved against the page, a mailto: address), or inside one.
func (d *doc) attrOccurrences(n *html.Node, k kind, value string, f *finder) []occurrence {
	var out []occurrence
	for _, a := range n.Attr {
		if a.Namespace != "" || a.Key == "style" || a.Key == "id" || a.Key == "class" || !xmlName.MatchString(a.Key) {
			// An attribute whose name XPath cannot say (HTML allows
			// "0=…") has no rule to take it.
			continue
		}
		v := strings.TrimSpace(a.Val)
		exact := k.same(v, value)
		if !exact && k == kindURL && d.base != nil {
			if u, err := d.base.Parse(v); err == nil {
				exact = k.same(u.String(), value)
			}
		}
		if exact {
			out = append(out, occurrence{kind: occAttr, node: n, attr: a.Key, text: v, loc: []int{0, len(v)}, exact: true})
			continue
		}
		t := collapse(v)
		if loc, obf := f.find(t); loc != nil {
			out = append(out, occurrence{kind: occAttr, node: n, attr: a.Key, text: t, loc: loc, obfuscated: obf})
		}
	}
	return out
}

// walkJSON calls leaf for every string and number in v with its path and
// the @typed objects along it.
func walkJSON(v any, path []any, typed []typedAt, leaf func(path []any, typed []typedAt, s string)) {
	if len(path) > 32 {
		return
	}
	switch t := v.(type) {
	case map[string]any:
		if ty := ldTypeName(t["@type"]); ty != "" {
			typed = append(typed[:len(typed):len(typed)], typedAt{depth: len(path), typ: ty})
		}
		for key, e := range t {
			walkJSON(e, append(path[:len(path):len(path)], key), typed, leaf)
		}
	case []any:
		for i, e := range t {
			walkJSON(e, append(path[:len(path):len(path)], i), typed, leaf)
		}
	case string:
		leaf(path, typed, t)
	case json.Number:
		leaf(path, typed, t.String())
	}
}

// ldTypeName is the first type name of an @type value, without its
// vocabulary prefix.
func ldTypeName(v any) string {
	switch t := v.(type) {
	case string:
		if i := strings.LastIndexAny(t, "/:#"); i >= 0 {
			return t[i+1:]
		}
		return t
	case []any:
		if len(t) > 0 {
			return ldTypeName(t[0])
		}
	}
	return ""
}

// jsonPath writes a path in the jsonpath processor's syntax.
func jsonPath(path []any) string {
	var b strings.Builder
	b.WriteString("$")
	for _, p := range path {
		switch t := p.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(t) + "]")
		case string:
			if isIdent(t) {
				b.WriteString("." + t)
			} else {
				b.WriteString("['" + strings.ReplaceAll(strings.ReplaceAll(t, `\`, `\\`), "'", `\'`) + "']")
			}
		}
	}
	return b.String()
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}
