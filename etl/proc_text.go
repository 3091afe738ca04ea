package etl

import (
	"encoding/json"
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

func init() {
	register("trim", func(raw json.RawMessage) (Processor, error) {
		var p struct {
			Cutset string `json:"cutset"`
		}
		if err := decodeParams(raw, &p); err != nil {
			return nil, err
		}
		return trimProc{cutset: p.Cutset}, nil
	})
	register("lower", noParams(func(s string) string { return strings.ToLower(s) }))
	register("upper", noParams(func(s string) string { return strings.ToUpper(s) }))
	register("html-unescape", noParams(html.UnescapeString))
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

func noParams(f func(string) string) Factory {
	return func(raw json.RawMessage) (Processor, error) {
		var p struct{}
		if err := decodeParams(raw, &p); err != nil {
			return nil, err
		}
		return textFunc(f), nil
	}
}
