package learn

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
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
	// Untaught are the teachers of the depth search that taught nothing,
	// each with what the best page it reached showed of it.
	Untaught []Untaught
	// DeepFailed counts the pages reached by links (not a teacher's own)
	// that could not be had: disallowed, missing, failed.
	DeepFailed int
	Options    Options
}

// Untaught is a teacher that taught nothing, and why: no page within
// Options.Depth named it, or the page that named it showed too few of
// its values, or the group's learned match key read another name there.
type Untaught struct {
	Teacher string   // its ID
	URL     string   // the page that showed the most of it ("" when no page named it)
	Named   bool     // URL shows its match key
	Shown   []string // the fields whose values URL shows (the match key aside)
	Missing []string // the fields whose values it does not
	// Note says why a page that names the teacher and shows a value or
	// two was not taken as its (its group's match key read another
	// name there, or was not learned); "" when it showed too few.
	Note string
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
	links, known := teacherLinks(teachers, fields, opts, res)
	if res.Teachers == 0 {
		return nil, ErrNoTeachers
	}
	var members []member
	var err error
	if opts.Depth > 0 {
		members, err = depthMembers(ctx, teachers, links, known, fieldKinds(teachers, fields, opts), src, opts, res)
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

// fieldKinds is the kind of every field, from all the teachers' values.
func fieldKinds(teachers []Teacher, fields []string, opts Options) map[string]kind {
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
	return kinds
}

// teacherLinks are, per record, the fields it knows and the links its
// pages are looked for from; a record that knows no field to learn (the
// match key alone, which every record to fill may know, does not count)
// has none. It counts the teachers in res.
func teacherLinks(teachers []Teacher, fields []string, opts Options, res *Result) (links, known [][]string) {
	links = make([][]string, len(teachers))
	known = make([][]string, len(teachers))
	for i, t := range teachers {
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
	return links, known
}
