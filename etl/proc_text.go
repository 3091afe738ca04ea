package etl

import (
	"html"
	"strings"
	"unicode"
)

// Text processors change each value's text and keep the order. None takes
// parameters except trim's optional cutset.

// trimProc strips leading and trailing white space (or the characters of
// "cutset") and collapses inner runs of white space to one space, which is
// what text pulled from HTML almost always needs.
type trimProc struct{ cutset string }

// trimParams are the trim processor's parameters.
type trimParams struct {
	Cutset string `json:"cutset" doc:"Characters to strip from both ends."`
}

func init() {
	registerProc(procSpec{
		name:    "trim",
		group:   groupText,
		summary: "Strips white space at the ends and collapses inner runs to one space; with cutset, strips those characters from the ends instead.",
		example: `{"cutset": "@ "}`,
	}, func(p trimParams) (Processor, error) { return trimProc{cutset: p.Cutset}, nil })
	registerProc(procSpec{name: "lower", group: groupText, summary: "Converts each value to lower case. No parameters."},
		textFunc(strings.ToLower).build)
	registerProc(procSpec{name: "upper", group: groupText, summary: "Converts each value to upper case. No parameters."},
		textFunc(strings.ToUpper).build)
	registerProc(procSpec{name: "html-unescape", group: groupText, summary: "Decodes HTML entities (&amp; becomes &). No parameters."},
		textFunc(html.UnescapeString).build)
}

func (t trimProc) Process(in []Value, _ *Document) ([]Value, error) {
	return mapText(in, func(s string) (string, bool) {
		if t.cutset != "" {
			return strings.Trim(s, t.cutset), true
		}
		return collapseSpace(s), true
	}), nil
}

// collapseSpace trims s and turns every run of white space into one space.
func collapseSpace(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || r == '\u00a0' {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// textFunc is a parameterless processor applying one string function.
type textFunc func(string) string

func (f textFunc) Process(in []Value, _ *Document) ([]Value, error) {
	return mapText(in, func(s string) (string, bool) { return f(s), true }), nil
}

// build is the factory of a parameterless text function.
func (f textFunc) build(noParameters) (Processor, error) { return f, nil }
