package learn

import (
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// A value no single place of the page holds may be held in pieces: a
// location as JSON-LD addressLocality and addressCountry, a name as a
// script blob's first and last name. The teacher's value says how the
// pieces join: "Medellín, Colombia" is "Medellín", ", " and "Colombia".
// When the whole value is nowhere on a page, its pieces (two or three,
// split where the value has white space or punctuation) are looked for
// as whole texts or JSON values; a rule then takes each piece and the
// concat processor joins them with the teacher's own separators.

// Bounds on the search for pieces.
const (
	maxPieceGaps = 8   // a value with more gaps between words is prose, not pieces
	maxPieceLen  = 120 // a piece is a short text
	pieceCombos  = 4   // rules tried per piece when the pieces come from different places
)

// composite is a value found in pieces: the places of each piece and
// what joins them.
type composite struct {
	parts [][]occurrence // per piece, where it is
	seps  []string       // between pieces, as the value writes them
}

// split is one way to cut a value into pieces.
type split struct {
	parts, seps []string
}

// splits are the ways to cut value into two or three pieces at its gaps
// (runs of white space and punctuation), two pieces first.
func splits(value string) []split {
	var gaps [][2]int
	start := -1
	for i, r := range value {
		gap := !unicode.IsLetter(r) && !unicode.IsDigit(r)
		switch {
		case gap && start < 0:
			start = i
		case !gap && start >= 0:
			if start > 0 {
				gaps = append(gaps, [2]int{start, i})
			}
			start = -1
		}
	}
	if len(gaps) == 0 || len(gaps) > maxPieceGaps {
		return nil
	}
	cut := func(at ...[2]int) split {
		var s split
		from := 0
		for _, g := range at {
			s.parts = append(s.parts, value[from:g[0]])
			s.seps = append(s.seps, value[g[0]:g[1]])
			from = g[1]
		}
		s.parts = append(s.parts, value[from:])
		return s
	}
	var out []split
	for _, g := range gaps {
		out = append(out, cut(g))
	}
	for i := range gaps {
		for j := i + 1; j < len(gaps); j++ {
			out = append(out, cut(gaps[i], gaps[j]))
		}
	}
	return out
}

// pieces indexes, by their key under kind k, the short texts a page
// holds whole: every JSON value, the text of every element that no
// child holds alone, and meta contents. Made once per page and kind.
func (d *doc) pieces(k kind) map[string][]occurrence {
	if ix, ok := d.pieceIx[k]; ok {
		return ix
	}
	ix := map[string][]occurrence{}
	add := func(o occurrence) {
		if key := k.key(o.text); key != "" {
			ix[key] = append(ix[key], o)
		}
	}
	leaf := func(kind occKind, b *jsonBlock, node *html.Node) func([]any, []typedAt, string) {
		return func(path []any, typed []typedAt, s string) {
			if len(s) <= maxPieceLen {
				add(occurrence{kind: kind, node: node, path: path, typed: typed, block: b, exact: true, text: s, loc: []int{0, len(s)}})
			}
		}
	}
	if d.json != nil {
		walkJSON(d.json, nil, nil, leaf(occJSONDoc, nil, nil))
	}
	for i := range d.ld {
		walkJSON(d.ld[i].data, nil, nil, leaf(occLD, &d.ld[i], d.ld[i].script))
	}
	for i := range d.blobs {
		walkJSON(d.blobs[i].data, nil, nil, leaf(occBlob, &d.blobs[i], d.blobs[i].script))
	}
	if d.root != nil {
		d.elementPieces(d.root, add)
	}
	if d.pieceIx == nil {
		d.pieceIx = map[kind]map[string][]occurrence{}
	}
	d.pieceIx[k] = ix
	return ix
}

// elementPieces adds the elements below n whose short text no child
// element holds alone, and the content of meta tags.
func (d *doc) elementPieces(n *html.Node, add func(occurrence)) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode || skipped(c) {
			continue
		}
		d.elementPieces(c, add)
		if c.DataAtom == atom.Meta {
			if v := strings.TrimSpace(attr(c, "content")); v != "" && len(v) <= maxPieceLen && xmlName.MatchString(c.Data) {
				add(occurrence{kind: occAttr, node: c, attr: "content", text: v, loc: []int{0, len(v)}, exact: true})
			}
			continue
		}
		t := d.textOf(c)
		if t == "" || len(t) > maxPieceLen || !xmlName.MatchString(c.Data) {
			continue
		}
		whole := true
		for g := c.FirstChild; g != nil && whole; g = g.NextSibling {
			whole = g.Type != html.ElementNode || d.textOf(g) != t
		}
		if whole {
			add(occurrence{kind: occElement, node: c, text: t, loc: []int{0, len(t)}, exact: true})
		}
	}
}

// composites finds value in pieces on the page (see above): the first
// split, fewest pieces first, whose every piece the page holds whole,
// the pieces of one JSON block or all in the HTML. nil when none.
func (d *doc) composites(k kind, value string) []occurrence {
	value = collapse(value)
	var ix map[string][]occurrence
	for _, sp := range splits(value) {
		if !d.mayHold(sp.parts) {
			continue
		}
		if ix == nil {
			ix = d.pieces(k)
		}
		c := &composite{seps: sp.seps}
		for _, p := range sp.parts {
			occs := ix[k.key(p)]
			if len(occs) == 0 {
				c = nil
				break
			}
			c.parts = append(c.parts, occs)
		}
		if c == nil {
			continue
		}
		var out []occurrence
		for _, c := range c.together() {
			out = append(out, occurrence{kind: occComposite, comp: c, text: value, loc: []int{0, len(value)}, exact: true})
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// mayHold reports whether every part is somewhere in the page's text or
// its JSON, case aside: most pages a search reads hold no piece of a
// teacher's value, and are not indexed for it.
func (d *doc) mayHold(parts []string) bool {
	if d.hay == "" {
		var b strings.Builder
		b.WriteString(strings.ToLower(d.all))
		leaf := func(_ []any, _ []typedAt, s string) {
			b.WriteByte('\n')
			b.WriteString(strings.ToLower(collapse(s)))
		}
		if d.json != nil {
			walkJSON(d.json, nil, nil, leaf)
		}
		for _, bl := range append(append([]jsonBlock{}, d.ld...), d.blobs...) {
			walkJSON(bl.data, nil, nil, leaf)
		}
		d.hay = b.String() + "\n"
	}
	for _, p := range parts {
		if !strings.Contains(d.hay, strings.ToLower(collapse(p))) {
			return false
		}
	}
	return true
}

// together narrows the pieces' places to those of one source: per JSON
// block whose every piece is there, one composite of those places; and
// one of the places in the HTML, when every piece has one.
func (c *composite) together() []*composite {
	type source struct {
		block *jsonBlock
		json  bool // the JSON of a JSON response
	}
	var order []source
	by := map[source]*composite{}
	for i, occs := range c.parts {
		for _, o := range occs {
			s := source{block: o.block, json: o.kind == occJSONDoc}
			if by[s] == nil {
				by[s] = &composite{parts: make([][]occurrence, len(c.parts)), seps: c.seps}
				order = append(order, s)
			}
			by[s].parts[i] = append(by[s].parts[i], o)
		}
	}
	var out []*composite
	for _, s := range order {
		whole := true
		for _, p := range by[s].parts {
			whole = whole && len(p) > 0
		}
		if whole {
			out = append(out, by[s])
		}
	}
	return out
}

// compositeRules are the rules that take a value found in pieces: in
// JSON, the object holding every piece and a concat of the paths from
// it; anywhere, a concat of the best rules of each piece from the page.
func (d *doc) compositeRules(o occurrence, k kind, own words) []*rule {
	c := o.comp
	var out []*rule
	if first := c.parts[0][0]; first.kind == occLD || first.kind == occBlob || first.kind == occJSONDoc {
		out = append(out, d.sharedObjectRules(c)...)
	}
	per := make([][]*rule, len(c.parts))
	for i, occs := range c.parts {
		for _, po := range occs {
			per[i] = append(per[i], d.candidates(po, kindString, own)...)
		}
		sortRules(per[i])
		if len(per[i]) == 0 {
			return out
		}
	}
	for _, parts := range combos(per) {
		worst, cost, cut := rank(0), len(parts), false
		var chains [][]step
		for _, r := range parts {
			worst = max(worst, r.rank)
			cost += r.cost
			cut = cut || r.cut
			chains = append(chains, r.steps)
		}
		cr := newRule(worst, cost, concatStep(chains, c.seps))
		cr.cut = cut
		out = append(out, cr)
	}
	return out
}

// combos picks, from each piece's rules (in preference order), the
// rules of a concat: for each kind of rule every piece has, the best of
// that kind; and the best of each, whatever its kind.
func combos(per [][]*rule) [][]*rule {
	var out [][]*rule
	best := make([]*rule, len(per))
	for i, rs := range per {
		best[i] = rs[0]
	}
	out = append(out, best)
	for r := rank(0); r < ranks && len(out) < pieceCombos; r++ {
		pick := make([]*rule, len(per))
		for i, rs := range per {
			for _, x := range rs {
				if x.rank == r {
					pick[i] = x
					break
				}
			}
			if pick[i] == nil {
				pick = nil
				break
			}
		}
		if pick != nil && !sameRules(pick, best) {
			out = append(out, pick)
		}
	}
	return out
}

func sameRules(a, b []*rule) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sharedObjectRules select the JSON object holding every piece, then
// concat the pieces' paths from it: jsonld of the object's @type (or a
// typed object above it), or the blob's script and a path to it.
func (d *doc) sharedObjectRules(c *composite) []*rule {
	var out []*rule
	for _, first := range c.parts[0] {
		prefix := first.path
		for _, occs := range c.parts[1:] {
			prefix = commonPrefix(prefix, occs[0].path)
		}
		// The pieces are values of one object, not one value's parts.
		if len(prefix) == len(first.path) {
			continue
		}
		rel := func(depth int) [][]step {
			chains := make([][]step, len(c.parts))
			for i, occs := range c.parts {
				chains[i] = []step{jsonpathStep(jsonPath(occs[0].path[depth:]))}
			}
			return chains
		}
		switch first.kind {
		case occLD:
			for _, t := range first.typed {
				if t.depth <= len(prefix) {
					sel := step{Type: "jsonld", Parameters: map[string]any{"type": t.typ}}
					out = append(out, newRule(rankLD, len(first.path)-t.depth, sel, concatStep(rel(t.depth), c.seps)))
				}
			}
		case occBlob:
			for _, r := range d.blobRules(occurrence{kind: occBlob, block: first.block, path: prefix}, kindURL) {
				steps := append([]step{}, r.steps...)
				if len(prefix) == 0 {
					steps = steps[:len(steps)-1] // the jsonpath to the root
				}
				out = append(out, newRule(rankBlob, r.cost, append(steps, concatStep(rel(len(prefix)), c.seps))...))
			}
		case occJSONDoc:
			var steps []step
			if len(prefix) > 0 {
				steps = append(steps, jsonpathStep(jsonPath(prefix)))
			}
			out = append(out, newRule(rankBlob, len(prefix), append(steps, concatStep(rel(len(prefix)), c.seps))...))
		}
		break
	}
	return out
}

func commonPrefix(a, b []any) []any {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return a[:n]
}

func jsonpathStep(expr string) step {
	return step{Type: "jsonpath", Parameters: map[string]any{"expression": expr}}
}

// concatStep joins the values of chains with seps: one separator when
// they are all alike.
func concatStep(chains [][]step, seps []string) step {
	p := map[string]any{"parts": chains}
	same := true
	for _, s := range seps {
		same = same && s == seps[0]
	}
	if same {
		p["separator"] = seps[0]
	} else {
		p["separators"] = seps
	}
	return step{Type: "concat", Parameters: p}
}

// concatString writes a concat step for reports: its parts' chains with
// the separators between them.
func concatString(s step) string {
	chains, _ := s.Parameters["parts"].([][]step)
	seps, _ := s.Parameters["separators"].([]string)
	var b strings.Builder
	b.WriteString("concat(")
	for i, c := range chains {
		if i > 0 {
			sep, _ := s.Parameters["separator"].(string)
			if seps != nil {
				sep = seps[i-1]
			}
			fmt.Fprintf(&b, " + %q + ", sep)
		}
		b.WriteString((&rule{steps: c}).String())
	}
	b.WriteString(")")
	return b.String()
}
