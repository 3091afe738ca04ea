package learn

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"

	"backfill/etl"
)

// Each group of teacher pages (a host and a shape of URL) learns its
// fields one by one, the match key first: from the pages that show most
// of their teachers' values, then from those and the pages where the key
// just learned reads the teacher's name (a page that names a teacher and
// shows a value or two of it: its profile, with the rest written
// otherwise). A field is learned from the pages that show its value,
// with the others as pages where a rule must take nothing else; one that
// cannot be learned says why and leaves the others alone.

// learnGroups groups the teacher pages by host and shape and learns each
// group's fields.
func learnGroups(ctx context.Context, teachers []Teacher, members []member, fields []string, opts Options, res *Result) {
	groups := map[shape][]member{}
	var shapes []shape
	for _, m := range members {
		s := shapeOf(m.u)
		if groups[s] == nil {
			shapes = append(shapes, s)
		}
		groups[s] = append(groups[s], m)
	}
	shapes = slices.DeleteFunc(shapes, func(s shape) bool {
		if strong(groups[s]) {
			return false
		}
		// Pages like these are no one's page for sure: a team page
		// naming members and their jobs.
		for _, m := range groups[s] {
			for _, u := range m.weakWhat {
				u.Note = "no teacher's page at a URL like it shows most of the teacher's values, so one showing so few is not taken as its"
				res.Untaught = append(res.Untaught, u)
			}
		}
		return true
	})
	sort.Slice(shapes, func(i, j int) bool {
		a, b := shapes[i], shapes[j]
		if a.host != b.host {
			return a.host < b.host
		}
		if a.segs != b.segs {
			return a.segs < b.segs
		}
		return a.first < b.first
	})
	perHost := map[string]int{}
	for _, s := range shapes {
		perHost[s.host]++
	}
	names := map[string]bool{}
	for _, s := range shapes {
		if ctx.Err() != nil {
			return
		}
		g := &Group{Host: s.host, Name: mappingName(s, perHost[s.host] > 1, names)}
		res.Untaught = append(res.Untaught, g.learn(teachers, groups[s], fields, opts)...)
		if opts.Progress != nil {
			learned := 0
			for _, f := range g.Fields {
				if f.Status == Learned {
					learned++
				}
			}
			opts.Progress(fmt.Sprintf("%s: %d teacher page(s), %d of %d field(s) learned", g.Name, len(g.Pages), learned, len(g.Fields)))
		}
		res.Groups = append(res.Groups, g)
	}
}

// strong reports whether a page of ms shows most of a teacher's values.
func strong(ms []member) bool {
	for _, m := range ms {
		if len(m.teachers) > 0 {
			return true
		}
	}
	return false
}

// learn learns the group's fields from its members' pages, the match
// key first, and returns the weak teachers it did not take.
func (g *Group) learn(teachers []Teacher, ms []member, fields []string, opts Options) []Untaught {
	admitted := map[int]bool{}
	var untaught []Untaught
	for _, name := range fields {
		r := learnOne(teachers, ms, name, admitted, opts)
		g.Fields = append(g.Fields, r)
		if r.Match {
			admitted, untaught = admit(r, ms, teachers)
		}
	}
	var urls []*url.URL
	for _, m := range ms {
		taken := len(m.teachers) > 0
		for _, t := range m.weak {
			taken = taken || admitted[t]
		}
		if taken {
			g.Pages = append(g.Pages, m.page)
			urls = append(urls, m.u)
		}
	}
	g.Pattern = urlPattern(urls)
	return untaught
}

// learnOne learns one field from the group's pages: each page is an
// example of its first teacher (of those it shows most of, then the weak
// ones admitted) that knows the field's value.
func learnOne(teachers []Teacher, ms []member, name string, admitted map[int]bool, opts Options) *FieldResult {
	var ex []example
	var vals []string
	for _, m := range ms {
		for _, t := range append(append([]int{}, m.teachers...), m.weak...) {
			if !slices.Contains(m.teachers, t) && !admitted[t] {
				continue
			}
			if v := strings.TrimSpace(teachers[t].Values[name]); v != "" {
				var all []string
				for _, o := range teachers[t].Values {
					all = append(all, o)
				}
				ex = append(ex, example{page: m.page, value: v, own: wordsOf(all...)})
				vals = append(vals, v)
				break
			}
		}
	}
	k := opts.kindOf(name, vals)
	list := k == kindList
	r := learnField(&field{name: name, kind: k, ex: ex}, name == opts.MatchKey, opts)
	if r.Status != Learned && !list && name != opts.MatchKey && k == kindString && listy(vals) {
		// Some values are lists: learned as one value they may be
		// contradicted by a page that joins them otherwise.
		lex := make([]example, len(ex))
		for i, e := range ex {
			lex[i] = example{page: e.page, value: e.value, own: e.own}
		}
		if lr := learnField(&field{name: name, kind: kindList, ex: lex}, false, opts); lr.Status == Learned {
			r = lr
		} else {
			r.Reason += "; as a list of items: " + lr.Status.String()
			if lr.Reason != "" {
				r.Reason += ", " + lr.Reason
			}
		}
	}
	if sep, ok := opts.Join[name]; ok && r.Status == Learned && r.Type == etl.TypeList {
		r.join = sep
		r.Type = ""
	}
	return r
}

// admit takes the weak teachers of the group whose page the learned
// match key reads their own key on, and says why it leaves the others.
func admit(key *FieldResult, ms []member, teachers []Teacher) (map[int]bool, []Untaught) {
	admitted := map[int]bool{}
	var left []Untaught
	var set *etl.Set
	if key.Status == Learned {
		set, _ = ruleSet(rulesOf(key), key.f.kind.fieldType())
	}
	for _, m := range ms {
		for i, t := range m.weak {
			u := m.weakWhat[i]
			if set == nil {
				u.Note = fmt.Sprintf("the group's match key %s was not learned, so a page showing so few of its values is not taken as its", key.Field)
				left = append(left, u)
				continue
			}
			got := ""
			for _, vs := range runRules(set, len(rulesOf(key)), m.page) {
				if len(vs) > 0 {
					got = vs[0]
					break
				}
			}
			if key.f.kind.same(got, teachers[t].Values[key.Field]) {
				admitted[t] = true
				continue
			}
			u.Note = fmt.Sprintf("the learned match key %s reads %q there, another's page", key.Field, got)
			if got == "" {
				u.Note = fmt.Sprintf("the learned match key %s reads nothing there", key.Field)
			}
			left = append(left, u)
		}
	}
	return admitted, left
}

// mappingName names a group's mapping: learned-HOST, with the shape's
// label when the host has several groups; unique among names.
func mappingName(s shape, several bool, names map[string]bool) string {
	base := "learned-" + s.host
	if several {
		base += "-" + s.label()
	}
	base = strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == '_' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' {
			return r
		}
		return '-'
	}, base)
	name := base
	for i := 2; names[name]; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	names[name] = true
	return name
}

// learnField locates the field's values, induces its rule and validates
// it, degrading to a reason when it cannot.
func learnField(f *field, match bool, opts Options) *FieldResult {
	r := &FieldResult{Field: f.name, Match: match, Type: f.kind.fieldType(), Teachers: len(f.ex), f: f}
	switch {
	case len(f.ex) == 0:
		r.Status, r.Reason = TooFewTeachers, "no teacher page of this group has its value known"
		return r
	case len(f.ex) < opts.MinTeachers:
		r.Status, r.Reason = TooFewTeachers, fmt.Sprintf("%d teacher page(s), need %d", len(f.ex), opts.MinTeachers)
		return r
	}
	byKey := map[string]*candidate{}
	for i := range f.ex {
		e := &f.ex[i]
		e.locate(f.kind)
		if e.shown {
			r.Shown++
			f.propose(i, byKey)
		}
		e.doc, e.occs = nil, nil
	}
	if r.Shown == 0 {
		r.Status, r.Reason = NeverFound, fmt.Sprintf("no teacher's value appears on its page (%d pages)", len(f.ex))
		return r
	}
	f.settle()
	all := make([]bool, len(f.ex))
	for i := range all {
		all[i] = true
	}
	ch := f.chooseFamily(all, opts.Folds)
	if ch == nil {
		if c, neg := f.contradicted(); c != nil {
			e := f.ex[neg]
			r.Status = Contradicted
			r.Reason = fmt.Sprintf("%s takes the value from every page that shows it, but yields %q on %s, whose record says %q: the records may be out of date",
				c.rule, c.out[neg][0], e.page.URL, e.value)
			return r
		}
		if cs := f.cover(all); len(cs) > 0 {
			return r.covered(f, cs, opts)
		}
		r.Status = Ambiguous
		r.Reason = fmt.Sprintf("the value appears on %d of %d pages, but no rule yields exactly the teachers' values", r.Shown, len(f.ex))
		if b, n := f.best(); b != nil && n > 0 {
			r.Reason += fmt.Sprintf("; the closest, right on %d of %d, is %s", n, r.Shown, b.rule)
		}
		return r
	}
	c := ch.c
	r.rule, r.Rule, r.Kind, r.FirstOfSeveral = c.rule, c.rule.String(), c.rule.rank.String(), ch.firstOf
	r.HeldOut, r.Misses, r.Validated = ch.score, ch.misses, ch.validated
	if r.Validated {
		r.Folds = min(opts.Folds, len(f.ex))
	}
	// A held-out page the rule learned without it misses says that fewer
	// teachers would have learned less; the rule learned from all of
	// them holds on it. Only a wrong value held out refuses the field:
	// more teachers must never make the result worse.
	if r.Validated && r.HeldOut.Wrong > 0 {
		r.Status = FailedHoldOut
		r.Reason = fmt.Sprintf("held-out precision %.2f, recall %.2f (%d right, %d wrong, %d missed)",
			r.HeldOut.Precision(), r.HeldOut.Recall(), r.HeldOut.Right, r.HeldOut.Wrong, r.HeldOut.Missed)
		return r
	}
	r.Status = Learned
	return r
}

// covered finishes a field learned as several rules, each precise on
// every teacher page and together yielding its value on the pages of
// several layouts: written when, learned without each fold, they never
// yield a wrong value on it (a layout seen on few teacher pages may be
// missed by the fold that holds them out).
func (r *FieldResult) covered(f *field, cs []*candidate, opts Options) *FieldResult {
	r.cover = cs
	r.rule = cs[0].rule
	var rules, kinds []string
	seen := map[string]bool{}
	for _, c := range cs {
		rules = append(rules, c.rule.String())
		if k := c.rule.rank.String(); !seen[k] {
			seen[k] = true
			kinds = append(kinds, k)
		}
	}
	r.Rule, r.Kind, r.Rules = strings.Join(rules, " | "), strings.Join(kinds, ", "), rules
	r.HeldOut, r.Misses, r.Validated = f.crossValidateCover(opts.Folds)
	if r.Validated {
		r.Folds = min(opts.Folds, len(f.ex))
	}
	if r.Validated && r.HeldOut.Wrong > 0 {
		r.Status = FailedHoldOut
		r.Reason = fmt.Sprintf("learned as %d rules (pages of several layouts): held-out precision %.2f, recall %.2f (%d right, %d wrong, %d missed)",
			len(cs), r.HeldOut.Precision(), r.HeldOut.Recall(), r.HeldOut.Right, r.HeldOut.Wrong, r.HeldOut.Missed)
		return r
	}
	r.Status = Learned
	return r
}
