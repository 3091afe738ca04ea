package etl

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// dateProc reads each value as a date in one of the common formats
// (ISO 8601, RFC 1123, "2 January 2006", "Jan 2, 2006", "02.01.2006",
// "01/02/2006", …) and writes it as ISO 8601: "2006-01-02" for a day,
// "2006-01-02T15:04:05Z07:00" when there is a time, "2006-01" or "2006"
// when that is all there is. "layout" (a Go time layout) adds a format
// tried first; "order" ("mdy" or "dmy") settles 01/02/2006, which is
// otherwise month first unless the first number exceeds 12. Values that
// are not dates are dropped.
type dateProc struct{ opts dateOpts }

type dateOpts struct {
	layout string
	order  string
}

// dateParams are the date processor's parameters.
type dateParams struct {
	Layout string `json:"layout" doc:"Go time layout tried first, e.g. 02|01|2006."`
	Order  string `json:"order" enum:"mdy|dmy" doc:"How to read 01/02/2006: month first (mdy) or day first (dmy)."`
}

func init() {
	registerProc(procSpec{
		name:    "date",
		group:   groupTyped,
		summary: "Common date formats to ISO 8601 (\"March 3rd, 2020\" becomes 2020-03-03; with a time, RFC 3339).",
		doc:     "`\"March 2020\"` becomes `2020-03`. Without `order`, `01/02/2006` is month first unless the first number exceeds 12; dotted dates are day first.",
		example: `{"layout": "02|01|2006"}`,
	}, func(p dateParams) (Processor, error) {
		if p.Order != "" && p.Order != "mdy" && p.Order != "dmy" {
			return nil, fmt.Errorf(`parameter "order" must be "mdy" or "dmy", got %q`, p.Order)
		}
		if p.Layout != "" {
			// A layout without any date element parses nothing useful.
			if !strings.ContainsAny(p.Layout, "0126") {
				return nil, errors.New(`parameter "layout" has no date elements (use Go layout 2006-01-02)`)
			}
		}
		return dateProc{opts: dateOpts{layout: p.Layout, order: p.Order}}, nil
	})
}

func (d dateProc) Process(in []Value, _ *Document) ([]Value, error) {
	return mapText(in, func(s string) (string, bool) { return parseDate(s, &d.opts) }), nil
}

type dateLayout struct {
	layout string
	out    string // output layout
}

var dateLayouts = []dateLayout{
	{time.RFC3339Nano, time.RFC3339},
	{"2006-01-02T15:04:05Z0700", time.RFC3339},
	{"2006-01-02T15:04Z07:00", time.RFC3339},
	{"2006-01-02T15:04:05", "2006-01-02T15:04:05"},
	{"2006-01-02T15:04", "2006-01-02T15:04:05"},
	{"2006-01-02 15:04:05Z07:00", time.RFC3339},
	{"2006-01-02 15:04:05", "2006-01-02T15:04:05"},
	{"2006-01-02 15:04", "2006-01-02T15:04:05"},
	{"2006-01-02", "2006-01-02"},
	{"2006/01/02", "2006-01-02"},
	{"2006.01.02", "2006-01-02"},
	{"20060102", "2006-01-02"},
	{time.RFC1123, time.RFC3339},
	{time.RFC1123Z, time.RFC3339},
	{time.RFC850, time.RFC3339},
	{time.ANSIC, "2006-01-02T15:04:05"},
	{"Mon, 2 Jan 2006 15:04:05 MST", time.RFC3339},
	{"Mon, 2 Jan 2006 15:04:05 -0700", time.RFC3339},
	{"2 January 2006", "2006-01-02"},
	{"2 Jan 2006", "2006-01-02"},
	{"2 Jan. 2006", "2006-01-02"},
	{"January 2 2006", "2006-01-02"},
	{"Jan 2 2006", "2006-01-02"},
	{"Jan. 2 2006", "2006-01-02"},
	{"Monday January 2 2006", "2006-01-02"},
	{"Monday 2 January 2006", "2006-01-02"},
	{"Mon Jan 2 2006", "2006-01-02"},
	{"Mon 2 Jan 2006", "2006-01-02"},
	{"2006-01", "2006-01"},
	{"January 2006", "2006-01"},
	{"Jan 2006", "2006-01"},
	{"2006", "2006"},
}

// layoutShapes are dateLayouts' shapes, in order.
var layoutShapes = func() []dateShape {
	out := make([]dateShape, len(dateLayouts))
	for i, l := range dateLayouts {
		out[i] = shapeOf(l.layout)
	}
	return out
}()

var (
	ordinalRe = regexp.MustCompile(`(?i)\b(\d{1,2})(st|nd|rd|th)\b`)
	numDateRe = regexp.MustCompile(`^(\d{1,2})[./\-](\d{1,2})[./\-](\d{4}|\d{2})$`)
)

// parseDate reads s as a date and writes it as ISO 8601.
func parseDate(s string, o *dateOpts) (string, bool) {
	s = collapseSpace(s)
	if s == "" || len(s) > 100 {
		return "", false
	}
	if o != nil && o.layout != "" {
		if t, err := time.Parse(o.layout, s); err == nil {
			return formatDate(t, o.layout), true
		}
	}
	if m := numDateRe.FindStringSubmatch(s); m != nil {
		a, b, y := atoi(m[1]), atoi(m[2]), atoi(m[3])
		if len(m[3]) == 2 {
			y += 2000
			if y > time.Now().Year()+10 {
				y -= 100
			}
		}
		order := ""
		if o != nil {
			order = o.order
		}
		if order == "" {
			order = "mdy"
			if a > 12 || strings.Contains(s, ".") {
				order = "dmy"
			}
		}
		mo, d := a, b
		if order == "dmy" {
			mo, d = b, a
		}
		t := time.Date(y, time.Month(mo), d, 0, 0, 0, 0, time.UTC)
		if mo < 1 || mo > 12 || t.Day() != d {
			return "", false
		}
		return t.Format("2006-01-02"), true
	}
	clean := ordinalRe.ReplaceAllString(s, "$1")
	clean = strings.ReplaceAll(clean, ",", "")
	clean = strings.Join(strings.Fields(clean), " ")
	srcs := [2]string{s, clean}
	shapes := [2]dateShape{shapeOf(s), shapeOf(clean)}
	for k, l := range dateLayouts {
		for i, src := range srcs {
			// A layout cannot read a value of another shape: time.Parse
			// would fail, and its errors cost allocations.
			if v := shapes[i]; v.digitFirst != layoutShapes[k].digitFirst || v.named && !layoutShapes[k].named {
				continue
			}
			if t, err := time.Parse(l.layout, src); err == nil {
				return t.Format(l.out), true
			}
		}
	}
	return "", false
}

// dateShape is what tells a date layout from the values it cannot read:
// whether it starts with a digit, and whether it has a name (of a month, a
// day or a zone), that is a letter other than the 'T' and 'Z' a numeric
// layout takes, or a byte beyond ASCII.
type dateShape struct{ digitFirst, named bool }

func shapeOf(s string) dateShape {
	sh := dateShape{digitFirst: s != "" && '0' <= s[0] && s[0] <= '9'}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c|0x20 && c|0x20 <= 'z' && c != 'T' && c != 'Z' || c >= 0x80 {
			sh.named = true
			break
		}
	}
	return sh
}

// formatDate writes t with the precision its layout had.
func formatDate(t time.Time, layout string) string {
	zoned := strings.Contains(layout, "Z07") || strings.Contains(layout, "-07") || strings.Contains(layout, "MST")
	l := strings.NewReplacer("2006", "", "January", "", "Jan", "", "Monday", "", "Mon", "",
		"MST", "", "Z07:00", "", "-07:00", "", "-0700", "", "Z0700", "", "-07", "").Replace(layout)
	switch {
	case strings.Contains(l, "15") || strings.Contains(l, "03") || strings.Contains(l, "04"):
		if zoned {
			return t.Format(time.RFC3339)
		}
		return t.Format("2006-01-02T15:04:05")
	case strings.Contains(l, "2"):
		return t.Format("2006-01-02")
	case strings.Contains(l, "1") || strings.Contains(layout, "Jan"):
		return t.Format("2006-01")
	case strings.Contains(layout, "2006"):
		return t.Format("2006")
	}
	return t.Format("2006-01-02")
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
