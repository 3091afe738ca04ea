package learn

import (
	"regexp"
	"sort"
	"strings"
)

// A list-valued field (authors, tags, phone numbers) is compared as the
// set of its items, whatever separates them on either side: a record's
// "Ada Lovelace, Charles Babbage" is a page's "Ada Lovelace and Charles
// Babbage", its "Charles Babbage; Ada Lovelace" too. A list is learned
// two ways: a rule that yields every item as its own value (an element
// per author), or a rule that takes the whole list's text, then a split
// on the separators the teacher pages use. Either way the mapping field
// is of type list (every value kept), or, when asked, joined into one
// value with the separator the user gave.

// listSep is what separates the items of a list, in a record or on a
// page: a comma, a semicolon, a bar, a slash, an ampersand, a bullet, or
// the word "and" (after a comma too).
var listSep = regexp.MustCompile(`\s*(?:,\s*and\b|[,;|/&·•]|\band\b)\s*`)

// listItems splits a list value into its items, trimmed, empty ones
// dropped.
func listItems(v string) []string {
	var out []string
	for _, p := range listSep.Split(v, -1) {
		if p = collapse(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// listKey is what two lists are compared by: the set of their items,
// white space folded.
func listKey(items []string) string {
	keys := make([]string, 0, len(items))
	seen := map[string]bool{}
	for _, it := range items {
		if k := collapse(it); k != "" && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return strings.Join(keys, "\n")
}

// listy reports whether some of the values are lists of several items:
// a field worth trying as a list when it cannot be learned as one value.
func listy(values []string) bool {
	for _, v := range values {
		if len(listItems(v)) > 1 {
			return true
		}
	}
	return false
}

// listFinder matches a list of the value's items, in any order, with any
// separators: (A|B|C)(SEP(A|B|C))*; find keeps only a match whose items
// are the value's.
func listFinder(value string) *finder {
	items := listItems(value)
	alts := make([]string, len(items))
	sort.Slice(items, func(i, j int) bool { return len(items[i]) > len(items[j]) })
	for i, it := range items {
		ws := strings.Fields(it)
		for j, w := range ws {
			ws[j] = regexp.QuoteMeta(w)
		}
		alts[i] = strings.Join(ws, `\s+`)
	}
	one := `(?:` + strings.Join(alts, "|") + `)`
	f := &finder{list: listKey(items)}
	f.re, _ = regexp.Compile(`(?i)` + one + `(?:` + listSep.String() + one + `)*`)
	return f
}

// separators are the separators between the items of a list's text, as
// the split processor's pattern: the ones the text uses, and nothing
// else, so that "and" in "Johnson and Johnson" stays when pages separate
// authors with semicolons.
func separators(texts ...string) string {
	seen := map[string]bool{}
	var seps []string
	for _, t := range texts {
		for _, s := range listSep.FindAllString(t, -1) {
			s = strings.ToLower(collapse(s))
			if s != "" && !seen[s] {
				seen[s] = true
				seps = append(seps, s)
			}
		}
	}
	sort.Slice(seps, func(i, j int) bool {
		if len(seps[i]) != len(seps[j]) {
			return len(seps[i]) > len(seps[j])
		}
		return seps[i] < seps[j]
	})
	alts := make([]string, len(seps))
	for i, s := range seps {
		ws := strings.Fields(s)
		for j, w := range ws {
			ws[j] = regexp.QuoteMeta(w)
		}
		a := strings.Join(ws, `\s*`)
		if c := s[len(s)-1]; 'a' <= c && c <= 'z' {
			a += `\b`
		}
		if c := s[0]; 'a' <= c && c <= 'z' {
			a = `\b` + a
		}
		alts[i] = a
	}
	return `\s*(?:` + strings.Join(alts, "|") + `)\s*`
}

func splitStep(pattern string) step {
	return step{Type: "split", Parameters: map[string]any{"pattern": pattern}}
}

func joinStep(sep string) step {
	return step{Type: "join", Parameters: map[string]any{"separator": sep}}
}

// listCandidates are the rules a list's occurrence proposes: for the
// whole list's text, its rules followed by a split on the separators
// it shows; for one item, the rules that take the item (which, where
// each item has its element, take them all).
func (d *doc) listCandidates(o occurrence, own words) []*rule {
	if o.item {
		return d.candidates(o, kindString, own)
	}
	// A list found in JSON keeps no text here: split on any separator.
	sep := listSep.String()
	if o.loc != nil {
		sep = separators(o.text[o.loc[0]:o.loc[1]])
	}
	var out []*rule
	for _, r := range d.candidates(o, kindList, own) {
		lr := newRule(r.rank, r.cost, append(append([]step{}, r.steps...), splitStep(sep))...)
		lr.cut = r.cut
		out = append(out, lr)
	}
	return out
}

// locateList finds a list on the page: its whole text, and each item
// alone.
func (d *doc) locateList(value string) []occurrence {
	out := d.locate(kindList, value)
	for _, it := range listItems(value) {
		for _, o := range d.locate(kindString, it) {
			o.item = true
			out = append(out, o)
		}
	}
	return out
}
