package etl

import (
	"encoding/json"
	"errors"
	"strings"
)

// List processors reshape the list of values rather than each value.

func init() {
	register("split", newSplit)
	register("join", newJoin)
	register("first", func(raw json.RawMessage) (Processor, error) { return newPick(raw, "first") })
	register("last", func(raw json.RawMessage) (Processor, error) { return newPick(raw, "last") })
	register("nth", func(raw json.RawMessage) (Processor, error) { return newPick(raw, "nth") })
	register("default", newDefault)
	register("unique", func(raw json.RawMessage) (Processor, error) {
		var p struct{}
		if err := decodeParams(raw, &p); err != nil {
			return nil, err
		}
		return uniqueProc{}, nil
	})
}

// splitProc splits each value on "separator" (a plain string) or
// "pattern" (a regex), dropping empty pieces and trimming the rest.
type splitProc struct {
	sep string
	re  *pattern
}

func newSplit(raw json.RawMessage) (Processor, error) {
	var p struct {
		Separator string `json:"separator"`
		Pattern   string `json:"pattern"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	switch {
	case p.Separator != "" && p.Pattern != "":
		return nil, errors.New(`give "separator" or "pattern", not both`)
	case p.Pattern != "":
		re, err := compilePattern(p.Pattern)
		if err != nil {
			return nil, err
		}
		return splitProc{re: re}, nil
	case p.Separator != "":
		return splitProc{sep: p.Separator}, nil
	}
	return nil, errors.New(`parameter "separator" or "pattern" is required`)
}

func (s splitProc) Process(in []Value, _ *Document) ([]Value, error) {
	var out []Value
	for _, v := range in {
		var parts []string
		if s.re != nil {
			parts = s.re.split(v.Text)
		} else {
			parts = strings.Split(v.Text, s.sep)
		}
		for _, p := range parts {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, Value{Text: p})
			}
		}
	}
	return out, nil
}

// joinProc joins all values into one with "separator" (default ", ").
type joinProc struct{ sep string }

func newJoin(raw json.RawMessage) (Processor, error) {
	p := struct {
		Separator *string `json:"separator"`
	}{}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	sep := ", "
	if p.Separator != nil {
		sep = *p.Separator
	}
	return joinProc{sep: sep}, nil
}

func (j joinProc) Process(in []Value, _ *Document) ([]Value, error) {
	if len(in) == 0 {
		return nil, nil
	}
	parts := make([]string, len(in))
	for i, v := range in {
		parts[i] = v.Text
	}
	return []Value{{Text: strings.Join(parts, j.sep)}}, nil
}

// pickProc keeps one value: the first, the last, or the nth ("index",
// 0-based; negative counts from the end). Nothing when out of range.
type pickProc struct{ index int }

func newPick(raw json.RawMessage, kind string) (Processor, error) {
	var p struct {
		Index *int `json:"index"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	switch kind {
	case "first":
		if p.Index != nil {
			return nil, errors.New(`"first" takes no "index" (use "nth")`)
		}
		return pickProc{index: 0}, nil
	case "last":
		if p.Index != nil {
			return nil, errors.New(`"last" takes no "index" (use "nth")`)
		}
		return pickProc{index: -1}, nil
	}
	if p.Index == nil {
		return nil, errors.New(`parameter "index" is required`)
	}
	return pickProc{index: *p.Index}, nil
}

func (p pickProc) Process(in []Value, _ *Document) ([]Value, error) {
	i := p.index
	if i < 0 {
		i += len(in)
	}
	if i < 0 || i >= len(in) {
		return nil, nil
	}
	return in[i : i+1], nil
}

// defaultProc yields "value" when the previous step yielded nothing (or
// only empty strings); otherwise it passes values through.
type defaultProc struct{ value string }

func newDefault(raw json.RawMessage) (Processor, error) {
	var p struct {
		Value *string `json:"value"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.Value == nil {
		return nil, errors.New(`parameter "value" is required`)
	}
	return defaultProc{value: *p.Value}, nil
}

func (d defaultProc) Process(in []Value, _ *Document) ([]Value, error) {
	for _, v := range in {
		if strings.TrimSpace(v.Text) != "" && !v.doc {
			return in, nil
		}
	}
	return []Value{{Text: d.value}}, nil
}

// uniqueProc drops repeated values, keeping the first of each.
type uniqueProc struct{}

func (uniqueProc) Process(in []Value, _ *Document) ([]Value, error) {
	seen := make(map[string]bool, len(in))
	out := make([]Value, 0, len(in))
	for _, v := range in {
		if !seen[v.Text] {
			seen[v.Text] = true
			out = append(out, v)
		}
	}
	return out, nil
}
