package etl

import (
	"fmt"
	"regexp"
	"time"

	"github.com/dlclark/regexp2"
)

// pattern is a compiled regular expression. Patterns are RE2 (linear time)
// whenever RE2 accepts them; a pattern that needs lookaround or
// back-references, such as `(?!avatar)` in a url_pattern, falls back to a
// backtracking engine with a per-match time limit, so a mapping written for
// a Perl-style engine keeps working without exposing workers to runaway
// matching.
type pattern struct {
	src string
	re  *regexp.Regexp
	bt  *regexp2.Regexp
}

// backtrackTimeout bounds one match of a backtracking pattern.
const backtrackTimeout = 50 * time.Millisecond

func compilePattern(src string) (*pattern, error) {
	if src == "" {
		return nil, fmt.Errorf("empty pattern")
	}
	re, err := regexp.Compile(src)
	if err == nil {
		return &pattern{src: src, re: re}, nil
	}
	bt, err2 := compileBacktrack(src)
	if err2 != nil {
		return nil, fmt.Errorf("invalid regex %q: %v", src, err)
	}
	bt.MatchTimeout = backtrackTimeout
	return &pattern{src: src, bt: bt}, nil
}

func compileBacktrack(src string) (re *regexp2.Regexp, err error) {
	defer func() {
		if r := recover(); r != nil {
			re, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return regexp2.Compile(src, regexp2.RE2)
}

func (p *pattern) String() string { return p.src }

// MatchString reports whether s contains a match; a timed-out match counts
// as no match.
func (p *pattern) MatchString(s string) bool {
	if p.re != nil {
		return p.re.MatchString(s)
	}
	ok, err := p.bt.MatchString(s)
	return err == nil && ok
}

// numGroups is the number of capturing groups.
func (p *pattern) numGroups() int {
	if p.re != nil {
		return p.re.NumSubexp()
	}
	return len(p.bt.GetGroupNumbers()) - 1
}

// groupIndex returns the index of a named group, or -1.
func (p *pattern) groupIndex(name string) int {
	if p.re != nil {
		return p.re.SubexpIndex(name)
	}
	n := p.bt.GroupNumberFromName(name)
	if n < 0 {
		return -1
	}
	return n
}

// find returns, for the first match (or every match when all), the text of
// capture group g. Groups that did not participate yield nothing.
func (p *pattern) find(s string, g int, all bool) ([]string, error) {
	var out []string
	if p.re != nil {
		n := 1
		if all {
			n = -1
		}
		for _, m := range p.re.FindAllStringSubmatchIndex(s, n) {
			if 2*g+1 < len(m) && m[2*g] >= 0 {
				out = append(out, s[m[2*g]:m[2*g+1]])
			}
		}
		return out, nil
	}
	m, err := p.bt.FindStringMatch(s)
	for m != nil && err == nil {
		if gr := m.GroupByNumber(g); gr != nil && len(gr.Captures) > 0 {
			out = append(out, gr.String())
		}
		if !all {
			break
		}
		m, err = p.bt.FindNextMatch(m)
	}
	if err != nil {
		return out, fmt.Errorf("regex %q: %v", p.src, err)
	}
	return out, nil
}

// replace replaces every match with repl, where $1 and ${name} refer to
// groups.
func (p *pattern) replace(s, repl string) (string, error) {
	if p.re != nil {
		return p.re.ReplaceAllString(s, repl), nil
	}
	out, err := p.bt.Replace(s, repl, -1, -1)
	if err != nil {
		return s, fmt.Errorf("regex %q: %v", p.src, err)
	}
	return out, nil
}

// split splits s around every match.
func (p *pattern) split(s string) []string {
	if p.re != nil {
		return p.re.Split(s, -1)
	}
	rs := []rune(s) // regexp2 reports rune indexes
	var out []string
	last := 0
	m, err := p.bt.FindStringMatch(s)
	for m != nil && err == nil {
		out = append(out, string(rs[last:m.Index]))
		last = m.Index + m.Length
		m, err = p.bt.FindNextMatch(m)
	}
	return append(out, string(rs[last:]))
}
