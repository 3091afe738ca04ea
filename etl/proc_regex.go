package etl

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// regexProc extracts from each value the first match (or every match with
// all) of pattern. The text returned is capture group "group" (an index or
// a name); without group it is group 1 when the pattern has groups, else
// the whole match. Values that do not match are dropped, so a regex also
// filters.
type regexProc struct {
	re    *pattern
	group int
	all   bool
}

// regexParams are the regex processor's parameters.
type regexParams struct {
	Pattern string   `json:"pattern" required:"true" minLength:"1" doc:"The regular expression."`
	Group   groupRef `json:"group" minimum:"0" doc:"Group to extract: a number (0 = whole match) or a name; default 1 when the pattern has groups, else the whole match."`
	All     bool     `json:"all" doc:"Every match in each value, not just the first."`
}

// groupRef names a capture group by number or by name.
type groupRef json.RawMessage

func (g *groupRef) UnmarshalJSON(b []byte) error {
	*g = append((*g)[:0], b...)
	return nil
}

func (groupRef) jsonSchema() orderedJSON {
	return orderedJSON{{"type", []string{"integer", "string"}}}
}

func init() {
	registerProc(procSpec{
		name:    "regex",
		group:   groupText,
		summary: "Keeps what a regular expression (RE2; lookaround falls back to a backtracking engine) matches in each value; values that do not match are dropped.",
		doc:     "Since values that do not match are dropped, regex also filters. A named group is given by its name: `(?P<user>\\w+)@` with `\"group\": \"user\"`.",
		example: `{"pattern": "(?P<user>\\w+)@", "group": "user"}`,
	}, newRegex)
}

func newRegex(p regexParams) (Processor, error) {
	if p.Pattern == "" {
		return nil, errors.New(`parameter "pattern" is required`)
	}
	re, err := compilePattern(p.Pattern)
	if err != nil {
		return nil, err
	}
	g := 0
	if re.numGroups() > 0 {
		g = 1
	}
	if len(p.Group) > 0 && string(p.Group) != "null" {
		var name string
		var idx int
		switch {
		case json.Unmarshal(p.Group, &idx) == nil:
			if idx < 0 || idx > re.numGroups() {
				return nil, fmt.Errorf(`parameter "group": %d is out of range, the pattern has %d group(s)`, idx, re.numGroups())
			}
			g = idx
		case json.Unmarshal(p.Group, &name) == nil:
			if i, err := strconv.Atoi(name); err == nil {
				if i < 0 || i > re.numGroups() {
					return nil, fmt.Errorf(`parameter "group": %d is out of range, the pattern has %d group(s)`, i, re.numGroups())
				}
				g = i
				break
			}
			g = re.groupIndex(name)
			if g < 0 || name == "" {
				return nil, fmt.Errorf(`parameter "group": the pattern has no group named %q`, name)
			}
		default:
			return nil, fmt.Errorf(`parameter "group": want a group number or name, got %s`, p.Group)
		}
	}
	return &regexProc{re: re, group: g, all: p.All}, nil
}

func (r *regexProc) Process(in []Value, _ *Document) ([]Value, error) {
	var out []Value
	for _, v := range in {
		got, err := r.re.find(v.Text, r.group, r.all)
		if err != nil {
			return nil, err
		}
		for _, s := range got {
			out = append(out, Value{Text: s})
		}
	}
	return out, nil
}

// replaceProc replaces every match of pattern in each value with
// replacement ($1 and ${name} refer to groups).
type replaceProc struct {
	re   *pattern
	repl string
}

// replaceParams are the replace processor's parameters.
type replaceParams struct {
	Pattern     string  `json:"pattern" required:"true" minLength:"1" doc:"The regular expression to find."`
	Replacement *string `json:"replacement" required:"true" doc:"Replacement text; $1 and ${name} refer to groups, \"\" deletes."`
}

func init() {
	registerProc(procSpec{
		name:    "replace",
		group:   groupText,
		summary: "Regular-expression find and replace in each value.",
		example: `{"pattern": "^Location:\\s*", "replacement": ""}`,
	}, newReplace)
}

func newReplace(p replaceParams) (Processor, error) {
	if p.Pattern == "" {
		return nil, errors.New(`parameter "pattern" is required`)
	}
	if p.Replacement == nil {
		return nil, errors.New(`parameter "replacement" is required (use "" to delete matches)`)
	}
	re, err := compilePattern(p.Pattern)
	if err != nil {
		return nil, err
	}
	return &replaceProc{re: re, repl: *p.Replacement}, nil
}

func (r *replaceProc) Process(in []Value, _ *Document) ([]Value, error) {
	out := make([]Value, 0, len(in))
	for _, v := range in {
		s, err := r.re.replace(v.Text, r.repl)
		if err != nil {
			return nil, err
		}
		out = append(out, Value{Text: s})
	}
	return out, nil
}
