package etl

import (
	"errors"
	"strings"
)

// List processors reshape the list of values rather than each value.

func init() {
	registerProc(procSpec{
		name:        "split",
		group:       groupList,
		summary:     "Splits each value on a separator or a regular expression; empty pieces are dropped and pieces trimmed. Give separator or pattern, not both.",
		example:     `{"pattern": "\\s*[,;]\\s*"}`,
		constraints: `{"minProperties": 1, "not": {"required": ["separator", "pattern"]}}`,
	}, newSplit)
	registerProc(procSpec{
		name:    "join",
		group:   groupList,
		summary: "Joins all values into one.",
		example: `{"separator": " "}`,
	}, newJoin)
	registerProc(procSpec{name: "first", group: groupList, summary: "Keeps the first value. No parameters."},
		func(noParameters) (Processor, error) { return pickProc{index: 0}, nil })
	registerProc(procSpec{name: "last", group: groupList, summary: "Keeps the last value. No parameters."},
		func(noParameters) (Processor, error) { return pickProc{index: -1}, nil })
	registerProc(procSpec{
		name:    "nth",
		group:   groupList,
		summary: "Keeps one value by position.",
		doc:     "Nothing when the position is out of range.",
		example: `{"index": -2}`,
	}, newNth)
	registerProc(procSpec{
		name:    "default",
		group:   groupList,
		summary: "Yields value when the previous step produced nothing.",
		doc:     "Empty values count as nothing; otherwise the values pass through unchanged.",
		example: `{"value": "unknown"}`,
	}, newDefault)
	registerProc(procSpec{name: "unique", group: groupList, summary: "Drops repeated values, keeping the first. No parameters."},
		func(noParameters) (Processor, error) { return uniqueProc{}, nil })
}

// splitProc splits each value on "separator" (a plain string) or
// "pattern" (a regex), dropping empty pieces and trimming the rest.
type splitProc struct {
	sep string
	re  *pattern
}

// splitParams are the split processor's parameters.
type splitParams struct {
	Separator string `json:"separator" minLength:"1" doc:"Plain separator text."`
	Pattern   string `json:"pattern" minLength:"1" doc:"Regular expression to split on."`
}

func newSplit(p splitParams) (Processor, error) {
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

// joinParams are the join processor's parameters.
type joinParams struct {
	Separator *string `json:"separator" doc:"Text between values; default \", \"."`
}

func newJoin(p joinParams) (Processor, error) {
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

// nthParams are the nth processor's parameters.
type nthParams struct {
	Index *int `json:"index" required:"true" doc:"0-based position; negative counts from the end (-1 is the last)."`
}

func newNth(p nthParams) (Processor, error) {
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

// defaultParams are the default processor's parameters.
type defaultParams struct {
	Value *string `json:"value" required:"true" doc:"The value to yield."`
}

func newDefault(p defaultParams) (Processor, error) {
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
