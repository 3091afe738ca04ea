package learn

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"backfill/etl"
)

// Numbers and dates are compared as values, not strings: a record's
// "1995-05-04" is a page's "4 May 1995", its "1234.5" a page's "1,234.50".
// Both sides are read as etl reads a field of type date or number, so a
// value learning finds is one a crawl reads alike. The learned field
// keeps the page's own text (no type): what a crawl fills is what the
// page says, as for any text.

// canonical reads v as etl reads a field of type typ (etl.TypeDate,
// etl.TypeNumber): "" when it is not one. Answers are kept: the same few
// values are compared many times.
func canonical(typ, v string) string {
	key := typ + "\x00" + v
	canonMu.Lock()
	c, ok := canonCache[key]
	canonMu.Unlock()
	if ok {
		return c
	}
	c = readAs(typ, v)
	canonMu.Lock()
	if len(canonCache) > maxCanon {
		clear(canonCache)
	}
	canonCache[key] = c
	canonMu.Unlock()
	return c
}

const maxCanon = 1 << 16

var (
	canonMu    sync.Mutex
	canonCache = map[string]string{}
	readers    = map[string]*etl.Set{}
)

// readAs runs v through a one-field mapping of type typ.
func readAs(typ, v string) string {
	canonMu.Lock()
	set := readers[typ]
	canonMu.Unlock()
	if set == nil {
		m := fmt.Sprintf(`{"name": "read", "fields": [{"name": "v", "type": %q, "processors": [{"type": "xpath", "parameters": {"expression": "//p"}}]}]}`, typ)
		s, err := etl.Load(map[string][]byte{"read.json": []byte(m)})
		if err != nil {
			return ""
		}
		canonMu.Lock()
		readers[typ], set = s, s
		canonMu.Unlock()
	}
	var b strings.Builder
	b.WriteString("<p>")
	for _, r := range v {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '&':
			b.WriteString("&amp;")
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString("</p>")
	for _, fv := range set.Extract("http://value.invalid/", []byte(b.String()), "text/html").Fields {
		if len(fv.Values) > 0 {
			return fv.Values[0]
		}
	}
	return ""
}

var (
	plainDigits = regexp.MustCompile(`^[+-]?\d+$`)
	hasDigit    = regexp.MustCompile(`\d`)
	numberish   = regexp.MustCompile(`^[+-]?\d[\d.,'’\x{00a0}\x{202f} ]*$`)
)

// isDate reports whether every value reads as a date (a bare number,
// a year or a code, does not count).
func isDate(values []string) bool {
	for _, v := range values {
		v = strings.TrimSpace(v)
		if plainDigits.MatchString(v) || !hasDigit.MatchString(v) || canonical(etl.TypeDate, v) == "" {
			return false
		}
	}
	return len(values) > 0
}

// isNumber reports whether every value is a number, some written with a
// decimal or grouping mark (a bare integer, a code with its leading
// zeros, stays text).
func isNumber(values []string) bool {
	marked := false
	for _, v := range values {
		v = strings.TrimSpace(v)
		if !numberish.MatchString(v) || canonical(etl.TypeNumber, v) == "" {
			return false
		}
		marked = marked || !plainDigits.MatchString(v)
	}
	return marked
}

// dateLayouts are the ways a page may write a day, a month or a year:
// the record's value is found in the layouts of its own precision
// ("2010-06" as "June 2010", never as a day of June).
var dateLayouts = map[int][]string{
	len("2006-01-02"): {"2006-01-02", "2 January 2006", "02 January 2006", "January 2, 2006", "January 2 2006",
		"Jan 2, 2006", "Jan 2 2006", "2 Jan 2006", "02 Jan 2006", "02.01.2006", "2.1.2006", "01/02/2006", "02/01/2006", "2006/01/02"},
	len("2006-01"): {"2006-01", "January 2006", "Jan 2006", "Jan. 2006", "01/2006", "1/2006", "2006/01"},
	len("2006"):    {"2006"},
}

// dateFinder matches the date v (a day, a month or a year) in any of
// dateLayouts of its precision.
func dateFinder(v string) *finder {
	c := canonical(etl.TypeDate, v)
	layouts := dateLayouts[len(c)]
	day, err := time.Parse("2006-01-02"[:len(c)], c)
	if err != nil || layouts == nil {
		return &finder{}
	}
	seen := map[string]bool{}
	var alts []string
	for _, l := range layouts {
		s := day.Format(l)
		if seen[s] {
			continue
		}
		seen[s] = true
		ws := strings.Fields(s)
		for i, w := range ws {
			ws[i] = regexp.QuoteMeta(w)
		}
		alts = append(alts, strings.Join(ws, `\s+`))
	}
	// Not a part of a longer date: "2010-06" is not in "2010-06-03".
	const before, after = `(?:^|[^0-9\-/.]|[^0-9][\-/.])`, `(?:$|[^0-9\-/.]|[\-/.](?:$|[^0-9]))`
	f := groupFinder(`(?i)`+before, `(?i:`+strings.Join(alts, "|")+`)`, after)
	f.year = c[:4]
	return f
}

// numberFinder matches the number v written with any grouping marks, and
// any zeros after its decimals.
func numberFinder(v string) *finder {
	c := canonical(etl.TypeNumber, v)
	if c == "" {
		return &finder{}
	}
	neg := strings.HasPrefix(c, "-")
	c = strings.TrimPrefix(c, "-")
	whole, frac, _ := strings.Cut(c, ".")
	digits := strings.Split(whole, "")
	p := strings.Join(digits, `[,.'’\x{00a0}\x{202f} ]?`)
	if frac != "" {
		p += `[.,]` + frac + `0*`
	} else {
		p += `(?:[.,]0+)?`
	}
	if neg {
		p = `[-−]` + p
	}
	f := groupFinder(`(?:^|[^0-9])`, p, `(?:[^0-9]|$)`)
	f.digits = strings.TrimLeft(strings.ReplaceAll(whole+frac, ".", ""), "0")
	return f
}
