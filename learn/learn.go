package learn

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"backfill/etl"
)

// Page is a fetched page: its final URL (after redirects), content type
// and body (UTF-8 text).
type Page struct {
	URL         string
	ContentType string
	Body        []byte
}

// Source fetches teacher pages. Fetch may be called from several
// goroutines at once, never twice at once for one host.
type Source interface {
	Fetch(ctx context.Context, rawURL string) (*Page, error)
}

// Teacher is a record whose values for some fields are known, with the
// links of its own pages (the record's URLs). A link that is the value of
// a field to learn is not fetched.
type Teacher struct {
	ID     string            // for reports (a record id, file:line)
	Values map[string]string // field → known value; "" or absent: unknown
	Links  []string          // absolute http(s) URLs
}

// Defaults of Options.
const (
	DefaultMinTeachers  = 3
	DefaultFolds        = 5
	DefaultPagesPerHost = 40
	DefaultHosts        = 4
)

// Options says what to learn and how much evidence a rule needs.
type Options struct {
	Fields   []string // the fields to learn
	MatchKey string   // a field learned as the attribution match key ("" none); learned besides Fields
	// MinTeachers is the fewest teacher pages a field needs in a group
	// (default DefaultMinTeachers; 1 learns from a single page, without
	// cross-validation).
	MinTeachers int
	Folds       int // k of the k-fold cross-validation, default DefaultFolds
	// PagesPerHost bounds the teacher pages fetched from one host
	// (default DefaultPagesPerHost): the first ones in record order.
	PagesPerHost int
	Hosts        int // hosts fetched from at once, default DefaultHosts
	// Depth is how many links from a teacher's own links its teacher
	// page is looked for (depth.go). 0: only the own links' pages, each
	// a teacher page whatever it shows.
	Depth    int
	Progress func(string) // told what is being done, one call at a time; nil: silent
	// Lists are fields learned as lists of items from the start (list.go);
	// any other field whose values have separators is tried as a list
	// when it cannot be learned as one value.
	Lists []string
	// Join gives, per list field, the separator its items are joined
	// with into one value; a list field not named here is of type list.
	Join map[string]string
	// Types declares what a field's values are (TypeNames: text, phone,
	// date, url, email, number), so that they are compared as such:
	// "2010-06" is "June 2010" only as dates. A field not named here is
	// of the type all its teachers' values have, text when none.
	Types map[string]string
}

func (o *Options) defaults() {
	if o.MinTeachers <= 0 {
		o.MinTeachers = DefaultMinTeachers
	}
	if o.Folds <= 0 {
		o.Folds = DefaultFolds
	}
	if o.PagesPerHost <= 0 {
		o.PagesPerHost = DefaultPagesPerHost
	}
	if o.Hosts <= 0 {
		o.Hosts = DefaultHosts
	}
}

// kindOf is the kind of a field whose teachers know values: a list, the
// declared type, or what the values are; the match key's text is
// compared as attribution compares it.
func (o *Options) kindOf(field string, values []string) kind {
	if o.isList(field) {
		return kindList
	}
	k, declared := declaredKinds[o.Types[field]]
	if !declared {
		k = kindOf(values)
	}
	if k == kindString && field == o.MatchKey {
		return kindKey
	}
	return k
}

func (o *Options) isList(f string) bool {
	for _, l := range o.Lists {
		if l == f {
			return true
		}
	}
	_, join := o.Join[f]
	return join
}

// fields lists the fields to learn, the match key first.
func (o *Options) fields() []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range append([]string{o.MatchKey}, o.Fields...) {
		if f = strings.TrimSpace(f); f != "" && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// Status is what became of a field in a group.
type Status int

const (
	Learned        Status = iota // a rule held on every held-out teacher: written
	TooFewTeachers               // fewer teacher pages than Options.MinTeachers
	NeverFound                   // no teacher's value appears on its page
	Ambiguous                    // the values appear, but no rule takes exactly them
	FailedHoldOut                // the rule missed or erred on held-out teachers: not written
	Contradicted                 // a rule takes every value shown, and other values from pages whose record says otherwise
)

var statusNames = [...]string{"learned", "too few teachers", "never found", "ambiguous", "failed on held-out teachers", "contradicted by its pages"}

func (s Status) String() string { return statusNames[s] }

// FieldResult is what was learned for one field of a group, and the
// evidence.
type FieldResult struct {
	Field  string
	Status Status
	Reason string // why, in words, when not learned
	Match  bool   // the attribution match key
	Type   string // the mapping field type ("" string, email, url)

	Rule string // the rule learned from every teacher, as a chain; "" when none
	// Rules are the rules of a field learned as several, one per layout
	// of the group's pages (each yields nothing on the others), in the
	// order they were chosen; nil for a single rule.
	Rules          []string
	Kind           string // what kind of rule it is
	FirstOfSeveral bool   // the rule yields other values after the value; the first is kept

	Teachers  int   // teacher pages where the value is known
	Shown     int   // of those, the pages where it appears
	Validated bool  // cross-validation ran (at least two teacher pages)
	Folds     int   // its k
	HeldOut   Score // the rules learned without each fold, scored on it
	Misses    []Miss

	rule  *rule
	cover []*candidate // the rules of Rules
	join  string       // a list joined into one value with it (Options.Join)
	f     *field
}

// Group is the teacher pages of one host and URL shape, and what was
// learned from them: one mapping.
type Group struct {
	Host    string
	Name    string // the mapping's name
	Pattern string // its url_pattern
	Pages   []*Page
	Fields  []*FieldResult
}

// Learned reports whether any field of the group was learned.
func (g *Group) Learned() bool {
	for _, f := range g.Fields {
		if f.Status == Learned {
			return true
		}
	}
	return false
}

// HostSkip is a host whose pages were not fetched.
type HostSkip struct {
	Host     string
	Teachers int
	Reason   string
}

// FetchError is a teacher page that could not be had.
type FetchError struct {
	URL     string
	Teacher string
	Err     error
}

// Result is everything Learn found out.
type Result struct {
	Teachers int        // records with a known value of a field to learn (besides the match key)
	Groups   []*Group   // one per host and URL shape with teacher pages, by host
	Skipped  []HostSkip // hosts with too few teachers, not fetched
	Failed   []FetchError
	// Capped counts, per host, the pages not fetched because the host
	// had Options.PagesPerHost already.
	Capped map[string]int
	// Unreached are the teachers (their IDs) of the depth search whose
	// values no page within Options.Depth showed.
	Unreached []string
	// DeepFailed counts the pages reached by links (not a teacher's own)
	// that could not be had: disallowed, missing, failed.
	DeepFailed int
	Options    Options
}

// ErrNoTeachers is returned when no record knows a value of a field to
// learn (the match key does not count).
var ErrNoTeachers = errors.New("no record knows a value of the fields to learn")

// Learn fetches the teachers' pages through src and learns, for each host
// and URL shape, a rule for each field. It fails only when there is
// nothing to learn from or ctx ends; every field that could not be
// learned is in the result with the reason.
func Learn(ctx context.Context, teachers []Teacher, src Source, opts Options) (*Result, error) {
	opts.defaults()
	fields := opts.fields()
	if len(fields) == 0 {
		return nil, errors.New("no fields to learn")
	}
	for f, t := range opts.Types {
		if _, ok := declaredKinds[t]; !ok {
			return nil, fmt.Errorf("field %s: unknown type %q (want one of %s)", f, t, strings.Join(TypeNames(), ", "))
		}
	}
	res := &Result{Options: opts, Capped: map[string]int{}}
	kinds := map[string]kind{}
	for _, f := range fields {
		var vals []string
		for _, t := range teachers {
			if v := strings.TrimSpace(t.Values[f]); v != "" {
				vals = append(vals, v)
			}
		}
		kinds[f] = opts.kindOf(f, vals)
	}
	links := make([][]string, len(teachers))
	known := make([][]string, len(teachers))
	for i, t := range teachers {
		// A teacher knows a field to learn; the match key alone, which
		// every record to fill may know, does not make one.
		ok := false
		for _, f := range fields {
			if strings.TrimSpace(t.Values[f]) != "" {
				known[i] = append(known[i], f)
				ok = ok || f != opts.MatchKey
			}
		}
		if !ok {
			known[i] = nil
			continue
		}
		res.Teachers++
		// A link that is the value of a field to learn (a website) is an
		// answer, not a page that shows one: a record lacking the field
		// does not have it to crawl from.
		answers := map[string]bool{}
		for _, f := range fields {
			if v := strings.TrimSpace(t.Values[f]); v != "" {
				answers[kindURL.key(v)] = true
			}
		}
		for _, l := range t.Links {
			u, err := url.Parse(l)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || answers[kindURL.key(l)] {
				continue
			}
			links[i] = append(links[i], l)
		}
	}
	if res.Teachers == 0 {
		return nil, ErrNoTeachers
	}
	var members []member
	var err error
	if opts.Depth > 0 {
		members, err = depthMembers(ctx, teachers, links, known, kinds, src, opts, res)
	} else {
		members, err = ownMembers(ctx, teachers, links, src, opts, res)
	}
	if err != nil {
		return nil, err
	}
	learnGroups(ctx, teachers, members, fields, opts, res)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

// member is a teacher page, with the teachers it teaches for.
type member struct {
	page     *Page
	doc      *doc
	u        *url.URL
	teachers []int
}

// depthMembers are the teacher pages the depth search finds.
func depthMembers(ctx context.Context, teachers []Teacher, links, known [][]string, kinds map[string]kind, src Source, opts Options, res *Result) ([]member, error) {
	found, err := searchDepth(ctx, teachers, links, known, kinds, src, opts, res)
	if err != nil {
		return nil, err
	}
	var out []member
	at := map[*reachedPage]int{}
	for t, rp := range found {
		if len(known[t]) == 0 {
			continue
		}
		if rp == nil {
			res.Unreached = append(res.Unreached, teachers[t].ID)
			continue
		}
		if i, ok := at[rp]; ok {
			out[i].teachers = append(out[i].teachers, t)
			continue
		}
		u, err := url.Parse(rp.job.page.URL)
		if err != nil {
			continue
		}
		at[rp] = len(out)
		out = append(out, member{page: rp.job.page, doc: rp.doc, u: u, teachers: []int{t}})
	}
	return out, nil
}

// ownMembers fetches the pages of the teachers' own links, host by host:
// each is a teacher page of the teachers linking to it.
func ownMembers(ctx context.Context, teachers []Teacher, links [][]string, src Source, opts Options, res *Result) ([]member, error) {
	type link struct {
		teacher int
		url     string
	}
	byHost := map[string][]link{}
	hostTeachers := map[string]map[int]bool{}
	for i, ls := range links {
		for _, l := range ls {
			u, _ := url.Parse(l)
			h := strings.ToLower(u.Host)
			byHost[h] = append(byHost[h], link{i, l})
			if hostTeachers[h] == nil {
				hostTeachers[h] = map[int]bool{}
			}
			hostTeachers[h][i] = true
		}
	}
	var hosts []string
	for h := range byHost {
		if n := len(hostTeachers[h]); n < opts.MinTeachers {
			res.Skipped = append(res.Skipped, HostSkip{Host: h, Teachers: n,
				Reason: fmt.Sprintf("too few teachers (%d, need %d)", n, opts.MinTeachers)})
			continue
		}
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	sort.Slice(res.Skipped, func(i, j int) bool { return res.Skipped[i].Host < res.Skipped[j].Host })

	// Fetch, host by host; a page linked by two teachers is fetched once.
	jobs := make([][]fetchJob, len(hosts))
	for i, h := range hosts {
		seen := map[string]int{}
		for _, l := range byHost[h] {
			if j, dup := seen[l.url]; dup {
				jobs[i][j].teachers = append(jobs[i][j].teachers, l.teacher)
				continue
			}
			if len(jobs[i]) == opts.PagesPerHost {
				res.Capped[h]++
				continue
			}
			seen[l.url] = len(jobs[i])
			jobs[i] = append(jobs[i], fetchJob{url: l.url, teachers: []int{l.teacher}})
		}
	}
	if err := fetchAll(ctx, src, hosts, jobs, opts); err != nil {
		return nil, err
	}
	var out []member
	for _, hj := range jobs {
		for _, j := range hj {
			if j.err != nil {
				for _, t := range j.teachers {
					res.Failed = append(res.Failed, FetchError{URL: j.url, Teacher: teachers[t].ID, Err: j.err})
				}
				continue
			}
			u, err := url.Parse(j.page.URL)
			if err != nil {
				continue
			}
			out = append(out, member{page: j.page, doc: parseDoc(j.page), u: u, teachers: j.teachers})
		}
	}
	return out, nil
}

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
		ms := groups[s]
		g := &Group{Host: s.host, Name: mappingName(s, perHost[s.host] > 1, names)}
		var urls []*url.URL
		for _, m := range ms {
			g.Pages = append(g.Pages, m.page)
			urls = append(urls, m.u)
		}
		g.Pattern = urlPattern(urls)
		for _, name := range fields {
			var ex []example
			var vals []string
			for _, m := range ms {
				for _, t := range m.teachers {
					if v := strings.TrimSpace(teachers[t].Values[name]); v != "" {
						var all []string
						for _, o := range teachers[t].Values {
							all = append(all, o)
						}
						ex = append(ex, example{doc: m.doc, value: v, own: wordsOf(all...)})
						vals = append(vals, v)
						break
					}
				}
			}
			k := opts.kindOf(name, vals)
			list := k == kindList
			r := learnField(&field{name: name, kind: k, ex: ex}, name == opts.MatchKey, opts)
			if r.Status != Learned && !list && name != opts.MatchKey && k == kindString && listy(vals) {
				// Some values are lists: learned as one value they may
				// be contradicted by a page that joins them otherwise.
				lex := make([]example, len(ex))
				for i, e := range ex {
					lex[i] = example{doc: e.doc, value: e.value, own: e.own}
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
			g.Fields = append(g.Fields, r)
		}
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
	for i := range f.ex {
		f.ex[i].locate(f.kind)
		if len(f.ex[i].occs) > 0 {
			r.Shown++
		}
	}
	switch {
	case len(f.ex) == 0:
		r.Status, r.Reason = TooFewTeachers, "no teacher page of this group has its value known"
		return r
	case len(f.ex) < opts.MinTeachers:
		r.Status, r.Reason = TooFewTeachers, fmt.Sprintf("%d teacher page(s), need %d", len(f.ex), opts.MinTeachers)
		return r
	case r.Shown == 0:
		r.Status, r.Reason = NeverFound, fmt.Sprintf("no teacher's value appears on its page (%d pages)", len(f.ex))
		return r
	}
	if err := f.generate(); err != nil {
		r.Status, r.Reason = Ambiguous, "candidates could not run: "+err.Error()
		return r
	}
	all := make([]bool, len(f.ex))
	for i := range all {
		all[i] = true
	}
	c, firstOf := f.choose(all)
	if c == nil {
		if c, neg := f.contradicted(); c != nil {
			e := f.ex[neg]
			r.Status = Contradicted
			r.Reason = fmt.Sprintf("%s takes the value from every page that shows it, but yields %q on %s, whose record says %q: the records may be out of date",
				c.rule, c.out[neg][0], e.doc.page.URL, e.value)
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
	r.rule, r.Rule, r.Kind, r.FirstOfSeveral = c.rule, c.rule.String(), c.rule.rank.String(), firstOf
	r.HeldOut, r.Misses, r.Validated = f.crossValidate(opts.Folds)
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
