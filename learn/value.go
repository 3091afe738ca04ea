package learn

import (
	"regexp"
	"sort"
	"strings"

	"backfill/etl"
)

// A field's kind says how its values are compared and which field type
// the learned mapping declares: Options.Types declares it, or the
// teachers' values decide it.
type kind int

const (
	kindString kind = iota // text, compared with white space folded and nothing else
	kindEmail
	kindURL
	kindList   // items compared as a set (list.go)
	kindDate   // compared as days, months or years (quantity.go)
	kindNumber // compared as numbers (quantity.go)
	kindPhone  // compared as its digits and a leading + (phone.go)
	kindKey    // the match key's text, compared as attribution compares it (case, accents and spacing folded)
)

// Types a field may be declared of (Options.Types), and the kind each is.
var declaredKinds = map[string]kind{
	"text": kindString, "email": kindEmail, "url": kindURL, "date": kindDate, "number": kindNumber, "phone": kindPhone,
}

// TypeNames lists the types a field may be declared of, sorted.
func TypeNames() []string {
	out := make([]string, 0, len(declaredKinds))
	for n := range declaredKinds {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

var emailValue = regexp.MustCompile(`(?i)^[a-z0-9][a-z0-9._%+\-]*@[a-z0-9](?:[a-z0-9.\-]*[a-z0-9])?\.[a-z]{2,24}$`)

// kindOf decides a field's kind from its known values: email when every
// value is an address, url when every value is an http(s) URL, then a
// date, a phone number or a number when every value reads as one.
func kindOf(values []string) kind {
	if len(values) == 0 {
		return kindString
	}
	email, url := true, true
	for _, v := range values {
		v = strings.TrimSpace(v)
		email = email && emailValue.MatchString(strings.TrimPrefix(strings.ToLower(v), "mailto:"))
		l := strings.ToLower(v)
		url = url && (strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://"))
	}
	switch {
	case email:
		return kindEmail
	case url:
		return kindURL
	case isDate(values):
		return kindDate
	case isPhone(values):
		return kindPhone
	case isNumber(values):
		return kindNumber
	}
	return kindString
}

// fieldType is the mapping field type of a kind ("" for a string).
func (k kind) fieldType() string {
	switch k {
	case kindEmail:
		return etl.TypeEmail
	case kindURL:
		return etl.TypeURL
	case kindList:
		return etl.TypeList
	}
	return ""
}

// typed reports whether the mapping's field type rewrites the page's
// text (an address lower-cased, a link resolved), so that a value is
// the page's when it is the same value, not the same text.
func (k kind) typed() bool { return k == kindEmail || k == kindURL }

// textual reports whether values of the kind are text a trim finishes.
func (k kind) textual() bool { return k == kindString || k == kindKey }

// key is what two values of the kind are compared by: addresses without
// mailto: and case, URLs normalized, dates, numbers and phone numbers as
// what they say, the match key as attribution compares it, and any other
// text with its white space folded.
func (k kind) key(v string) string {
	v = strings.TrimSpace(v)
	switch k {
	case kindEmail:
		return strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(v, "mailto:"), "MAILTO:"))
	case kindURL:
		if n, err := etl.NormalizeURL(v); err == nil {
			return n
		}
	case kindList:
		return listKey(listItems(v))
	case kindDate:
		if c := canonical(etl.TypeDate, v); c != "" {
			return c
		}
	case kindNumber:
		// Only a text that is a number: "Price: $1,234.50" holds one,
		// and a rule taking it all does not take the value.
		if numberish.MatchString(v) {
			if c := canonical(etl.TypeNumber, v); c != "" {
				return c
			}
		}
	case kindPhone:
		if c := phoneKey(v); c != "" {
			return c
		}
	case kindKey:
		return etl.MatchKey(v)
	}
	return collapse(v)
}

// same reports whether two values are the same value of the kind.
func (k kind) same(a, b string) bool { return k.key(a) == k.key(b) }

// exact reports whether a rule's values are the value: it alone, or for
// a list its items, each once.
func (k kind) exact(out []string, value string) bool {
	if k == kindList {
		return len(out) > 0 && listKey(out) == k.key(value)
	}
	return len(out) == 1 && k.same(out[0], value)
}

// first reports whether a rule's first value is the value (a list has
// no first item that stands for it).
func (k kind) first(out []string, value string) bool {
	if k == kindList {
		return k.exact(out, value)
	}
	return len(out) > 0 && k.same(out[0], value)
}

// shown is a rule's values as the report shows them.
func shown(out []string) string { return strings.Join(out, " | ") }

// finder locates a value in text: its words in order, separated by any
// white space, case ignored; for an address, also written with the usual
// obfuscations ("name [at] host [dot] org").
type finder struct {
	re    *regexp.Regexp
	obf   *regexp.Regexp // nil unless the value is an address
	list  string         // a list's key: a match must hold exactly its items
	group bool           // the value is re's first group, not the whole match
	// lit is the value's words with a space between them, when a match
	// is those words (found as a string in a page's collapsed text),
	// and fold whether case counts not.
	lit  string
	fold bool
	// year or digits, when set, is what any match holds: its year (a
	// date), or its digits in order, whatever stands between them (a
	// phone number, a number). A page's text is searched for them, and
	// near is tried only around where they are.
	year, digits string
	// near is re's value without the context around it, for finding
	// where in a page's text the value may be: the text of one element
	// runs into the next's there ("Ada+39 02 555 0102" of an <h1> and
	// a <p>), and the context is checked in the element's own text.
	near *regexp.Regexp
}

// groupFinder finds a value matching body with the context before and
// after it (regular expressions that take no group).
func groupFinder(before, body, after string) *finder {
	f := &finder{group: true}
	f.re, _ = regexp.Compile(before + `(` + body + `)` + after)
	f.near, _ = regexp.Compile(body)
	if f.re == nil || f.near == nil {
		return &finder{}
	}
	return f
}

func newFinder(k kind, v string) *finder {
	v = strings.TrimSpace(v)
	switch k {
	case kindList:
		return listFinder(v)
	case kindDate:
		return dateFinder(v)
	case kindNumber:
		return numberFinder(v)
	case kindPhone:
		return phoneFinder(v)
	}
	if k == kindEmail {
		v = strings.TrimPrefix(strings.TrimPrefix(v, "mailto:"), "MAILTO:")
	}
	words := strings.Fields(v)
	for i, w := range words {
		words[i] = regexp.QuoteMeta(w)
	}
	f := &finder{}
	// Text is the value only in its own case; a match key, an address
	// or a link is in any case.
	fold := `(?i)`
	if k == kindString {
		fold = ""
	}
	// A value that is not valid UTF-8 makes no expression, and is found
	// nowhere.
	f.re, _ = regexp.Compile(fold + strings.Join(words, `\s+`))
	if f.re != nil {
		f.lit, f.fold = strings.Join(strings.Fields(v), " "), fold != ""
	}
	if k == kindEmail && f.re != nil {
		if local, domain, ok := strings.Cut(v, "@"); ok {
			at := `\s*(?:\[\s*at\s*\]|\(\s*at\s*\)|\{\s*at\s*\}|<\s*at\s*>|\s+at\s+|@)\s*`
			dot := `\s*(?:\[\s*dot\s*\]|\(\s*dot\s*\)|\{\s*dot\s*\}|\s+dot\s+|\.)\s*`
			labels := strings.Split(domain, ".")
			for i, l := range labels {
				labels[i] = regexp.QuoteMeta(l)
			}
			f.obf, _ = regexp.Compile(`(?i)` + regexp.QuoteMeta(local) + at + strings.Join(labels, dot))
		}
	}
	return f
}

// mayMatch reports whether the value may be in s, a lower-cased text.
func (f *finder) mayMatch(s string) bool {
	switch {
	case f.lit != "":
		return strings.Contains(s, strings.ToLower(f.lit)) || f.obf != nil && f.obf.MatchString(s)
	case f.near != nil:
		return f.near.MatchString(s)
	case f.re != nil:
		return f.re.MatchString(s)
	}
	return false
}

// findAll returns every place the value may be in s: the matches of
// its expressions (a list's not yet checked for its items).
func (f *finder) findAll(s string) [][]int {
	if f.re == nil {
		return nil
	}
	if f.near != nil {
		return f.near.FindAllStringIndex(s, -1)
	}
	out := f.re.FindAllStringIndex(s, -1)
	if f.obf != nil {
		out = append(out, f.obf.FindAllStringIndex(s, -1)...)
	}
	return out
}

// find returns where the value is in s ([start, end) byte offsets), and
// whether it is written obfuscated there.
func (f *finder) find(s string) (loc []int, obfuscated bool) {
	if f.re == nil {
		return nil, false
	}
	if f.list != "" {
		for _, loc := range f.re.FindAllStringIndex(s, -1) {
			if listKey(listItems(s[loc[0]:loc[1]])) == f.list {
				return loc, false
			}
		}
		return nil, false
	}
	if f.group {
		if m := f.re.FindStringSubmatchIndex(s); m != nil {
			return m[2:4], false
		}
		return nil, false
	}
	if loc := f.re.FindStringIndex(s); loc != nil {
		return loc, false
	}
	if f.obf != nil {
		if loc := f.obf.FindStringIndex(s); loc != nil {
			return loc, true
		}
	}
	return nil, false
}

// collapse trims s and turns runs of white space into one space, as the
// trim processor does.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }
