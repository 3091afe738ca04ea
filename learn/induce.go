package learn

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"backfill/etl"
)

// Induction for one field of one group of pages: every teacher page that
// shows its known value proposes candidate rules (candidate.go); each
// candidate runs through etl on every teacher page once; the preferred
// candidate that yields exactly the teacher's value on each training page
// (and nothing else where the value is absent) is the rule. k-fold cross-
// validation repeats the choice without each fold's teachers and scores
// it on them.

// maxCandidates bounds the candidates of one field in one group.
const maxCandidates = 600

// example is one teacher page of a field: the page, the known value and
// where the value appears on it (nowhere: the page is a negative, on
// which a rule must yield nothing or the value).
//
// Its page is parsed, searched and proposes its candidates in one go, and
// its document is let go before the next example's is made: a group of
// sixty pages of 150 KB keeps one parsed at a time, not sixty.
type example struct {
	page  *Page
	value string
	own   words // the words of every value the teacher knows
	shown bool  // the page shows the value
	// forms are the value as the page writes it where it shows it
	// (white space folded): a rule must take one of them, not merely
	// the same value read otherwise.
	forms map[string]bool

	doc  *doc         // while it is searched (locate)
	occs []occurrence // where the value is on doc
}

// locate finds the example's value on its page, and the forms it has
// there.
func (e *example) locate(k kind) {
	if e.doc == nil {
		e.doc = parseDoc(e.page)
	}
	if k == kindList {
		e.occs = e.doc.locateList(e.value)
	} else {
		e.occs = e.doc.locate(k, e.value)
	}
	e.shown = len(e.occs) > 0
	e.forms = map[string]bool{}
	for _, o := range e.occs {
		if o.loc != nil && !o.obfuscated && !o.item {
			e.forms[collapse(o.text[o.loc[0]:o.loc[1]])] = true
		}
	}
}

// right reports whether a rule's values on example i are its value
// exactly: the same value under the field's kind and, unless the
// mapping's field type rewrites it (an address, a link), as the page
// writes it, so that a crawl fills what the page says ("+39 02 555
// 0102", not "39 02 555 0102"). On a page that does not show the value
// the same value is enough.
func (f *field) right(out []string, i int) bool {
	e := &f.ex[i]
	if !f.kind.exact(out, e.value) {
		return false
	}
	return f.kind.typed() || f.kind == kindList || len(e.forms) == 0 || e.forms[collapse(out[0])]
}

// rightFirst reports whether a rule's first value on example i is its
// value, as right says.
func (f *field) rightFirst(out []string, i int) bool {
	if f.kind == kindList || len(out) == 0 {
		return f.right(out, i)
	}
	return f.right(out[:1], i)
}

// candidate is a rule with the teacher pages that proposed it and what it
// yields on each teacher page (every distinct value, in order).
type candidate struct {
	rule *rule
	from []bool
	out  [][]string
	dead bool // the loader refused it
}

// field is the induction state of one field in one group.
type field struct {
	name      string
	kind      kind
	ex        []example
	cands     []*candidate
	evaluated int // cands[:evaluated] have run (ensure)
}

// propose adds the candidates of example i, located, to the field's:
// the rules that take its value where its page shows it.
func (f *field) propose(i int, byKey map[string]*candidate) {
	e := &f.ex[i]
	var rules []*rule
	for _, o := range e.occs {
		if f.kind == kindList {
			rules = append(rules, e.doc.listCandidates(o, e.own)...)
			continue
		}
		rules = append(rules, e.doc.candidates(o, f.kind, e.own)...)
	}
	for _, r := range rules {
		c := byKey[r.key]
		if c == nil {
			c = &candidate{rule: r, from: make([]bool, len(f.ex))}
			byKey[r.key] = c
			f.cands = append(f.cands, c)
		}
		c.from[i] = true
	}
}

// settle puts the candidates in preference order and keeps the first
// maxCandidates.
func (f *field) settle() {
	sort.SliceStable(f.cands, func(i, j int) bool { return f.cands[i].rule.less(f.cands[j].rule) })
	if len(f.cands) > maxCandidates {
		f.cands = f.cands[:maxCandidates]
	}
}

// firstBatch is how many candidates are run at first; each batch after
// is twice the one before. Most fields are settled by one of the first
// candidates (a label, a JSON-LD property): running the hundreds after
// them on every page of 150 KB was most of learning's time.
const firstBatch = 32

// ensure runs the candidates up to the n-th (in preference order) on
// every example page, when they have not run yet. Should the loader
// refuse a batch (a candidate it does not accept is a bug here), each
// runs alone and a refused one is dead: it yields nothing anywhere and
// is never chosen.
func (f *field) ensure(n int) {
	n = min(n, len(f.cands))
	if n <= f.evaluated {
		return
	}
	end := min(len(f.cands), max(n, f.evaluated+max(firstBatch, f.evaluated)))
	batch := f.cands[f.evaluated:end]
	f.evaluated = end
	if f.run(batch) == nil {
		return
	}
	for _, c := range batch {
		if f.run([]*candidate{c}) != nil {
			c.dead = true
			c.out = make([][]string, len(f.ex))
		}
	}
}

// run fills cs' outputs: one mapping with a field per candidate (every
// value kept), one extraction per example page.
func (f *field) run(cs []*candidate) error {
	rules := make([]*rule, len(cs))
	for i, c := range cs {
		rules[i] = c.rule
	}
	set, err := ruleSet(rules, f.kind.fieldType())
	if err != nil {
		return err
	}
	for _, c := range cs {
		c.out = make([][]string, len(f.ex))
	}
	for i, e := range f.ex {
		for n, vs := range runRules(set, len(cs), e.page) {
			cs[n].out[i] = vs
		}
	}
	return nil
}

// ruleSet loads rules as one mapping with a field per rule, of type typ,
// every value kept.
func ruleSet(rules []*rule, typ string) (*etl.Set, error) {
	type mfield struct {
		Name       string `json:"name"`
		Type       string `json:"type,omitempty"`
		All        bool   `json:"all"`
		Processors []step `json:"processors"`
	}
	m := struct {
		Name   string   `json:"name"`
		Fields []mfield `json:"fields"`
	}{Name: "candidates"}
	for i, r := range rules {
		m.Fields = append(m.Fields, mfield{Name: fmt.Sprintf("c%d", i), Type: typ, All: true, Processors: r.steps})
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return etl.Load(map[string][]byte{"candidates.json": data})
}

// runRules runs a set ruleSet made of n rules on a page: each rule's
// values.
func runRules(set *etl.Set, n int, p *Page) [][]string {
	out := make([][]string, n)
	for _, fv := range set.Extract(p.URL, p.Body, p.ContentType).Fields {
		k, err := strconv.Atoi(strings.TrimPrefix(fv.Field, "c"))
		if err == nil && k >= 0 && k < n {
			out[k] = fv.Values
		}
	}
	return out
}

// holds reports whether a candidate does what the example asks of it: the
// value (alone, or first when firstOnly) where the page shows it, nothing
// else where it does not.
func (f *field) holds(c *candidate, i int, firstOnly bool) bool {
	out, e := c.out[i], f.ex[i]
	if !e.shown {
		// The value is not on the page: the rule must take nothing
		// else from it.
		return len(out) == 0 || f.right(out, i)
	}
	return f.right(out, i) || firstOnly && f.rightFirst(out, i)
}

// choose returns the preferred candidate proposed by a training page that
// holds on every training page: first among those yielding exactly the
// value, else among those yielding it first of several (a rule scoped to
// the record's own block beats one that also takes a decoy after it; a
// list of values is a list field, list.go, not a first of several). nil
// when none.
// Only candidates of family fam are considered when fam is not anyFamily.
func (f *field) choose(train []bool, fam int) (c *candidate, firstOfSeveral bool) {
	for _, firstOnly := range []bool{false, true} {
		for k, c := range f.cands { // in preference order
			if fam != anyFamily && c.rule.family() != fam {
				continue
			}
			f.ensure(k + 1)
			if !c.dead && f.fits(c, train, firstOnly) {
				return c, firstOnly
			}
		}
	}
	return nil, false
}

// anyFamily lets choose take a candidate of any family.
const anyFamily = -1

// choice is a field's rule, with how it did on held-out teachers.
type choice struct {
	c         *candidate
	firstOf   bool
	score     Score
	misses    []Miss
	validated bool
}

// chooseFamily chooses the field's rule from every teacher page, and
// cross-validates the choice. When the rule learned without a fold errs
// or misses on it, each family of rules (rule.family: JSON-LD, labels,
// …, a cut or not) is chosen and cross-validated on its own, and
// the family whose held-out values are most often right wins, then the
// one right on most held-out pages, then the more general (the earlier).
// nil when no rule fits every page.
func (f *field) chooseFamily(all []bool, folds int) *choice {
	c, firstOf := f.choose(all, anyFamily)
	if c == nil {
		return nil
	}
	best := &choice{c: c, firstOf: firstOf}
	best.score, best.misses, best.validated = f.crossValidate(folds, anyFamily)
	if !best.validated || best.score.Perfect() {
		return best
	}
	f.ensure(len(f.cands))
	tried := map[int]bool{}
	for _, x := range f.cands { // the families in preference order
		fam := x.rule.family()
		if tried[fam] || x.dead {
			continue
		}
		tried[fam] = true
		alt, firstOf := f.choose(all, fam)
		if alt == nil {
			continue
		}
		s, misses, _ := f.crossValidate(folds, fam)
		if s.Precision() > best.score.Precision() || s.Precision() == best.score.Precision() && s.Recall() > best.score.Recall() {
			best = &choice{c: alt, firstOf: firstOf, score: s, misses: misses, validated: true}
		}
	}
	return best
}

// fits reports whether c was proposed by a training page and holds on
// every one.
func (f *field) fits(c *candidate, train []bool, firstOnly bool) bool {
	proposed := false
	for i, t := range train {
		if t && c.from[i] {
			proposed = true
			break
		}
	}
	if !proposed {
		return false
	}
	for i, t := range train {
		if t && !f.holds(c, i, firstOnly) {
			return false
		}
	}
	return true
}

// contradicted returns the preferred candidate that yields exactly the
// value on every page showing it but something else on a page that does
// not (the first such page's index): the records and their pages
// disagree. nil when there is none.
func (f *field) contradicted() (*candidate, int) {
	f.ensure(len(f.cands))
	for _, c := range f.cands {
		if c.dead {
			continue
		}
		neg, ok := -1, true
		for i, e := range f.ex {
			if f.holds(c, i, false) {
				continue
			}
			if e.shown {
				ok = false
				break
			}
			if neg < 0 {
				neg = i
			}
		}
		if ok && neg >= 0 {
			return c, neg
		}
	}
	return nil, -1
}

// best is the candidate right (first value) on the most pages that show
// the value, for reporting a field no rule covers.
func (f *field) best() (*candidate, int) {
	f.ensure(len(f.cands))
	var best *candidate
	n := -1
	for _, c := range f.cands {
		k := 0
		for i, e := range f.ex {
			if e.shown && f.rightFirst(c.out[i], i) {
				k++
			}
		}
		if k > n {
			best, n = c, k
		}
	}
	return best, n
}

// Score counts a rule's results on held-out teacher pages: right is the
// pages where it yields the teacher's value, wrong where it yields
// another, and missed where the page shows the value and the rule yields
// nothing.
type Score struct {
	Right, Wrong, Missed int
}

// Precision is right over everything yielded (1 when nothing was).
func (s Score) Precision() float64 {
	if s.Right+s.Wrong == 0 {
		return 1
	}
	return float64(s.Right) / float64(s.Right+s.Wrong)
}

// Recall is right over the pages that show the value.
func (s Score) Recall() float64 {
	if s.Right+s.Missed == 0 {
		return 1
	}
	return float64(s.Right) / float64(s.Right+s.Missed)
}

// Perfect reports whether nothing was wrong or missed.
func (s Score) Perfect() bool { return s.Wrong == 0 && s.Missed == 0 }

// Miss is one held-out teacher page the rule got wrong or missed.
type Miss struct {
	URL  string
	Want string
	Got  string // "" when the rule yielded nothing
	Rule string // the rule learned without this page's fold
}

// crossValidate learns the field k times (from family fam, or any),
// each time without one fold of the examples, and scores each rule on
// its fold. folds < 2 or a single example: no validation (ok false).
func (f *field) crossValidate(folds, fam int) (s Score, misses []Miss, ok bool) {
	return f.validate(folds, func(train []bool) []*candidate {
		if c, _ := f.choose(train, fam); c != nil {
			return []*candidate{c}
		}
		return nil
	})
}

// crossValidateCover is crossValidate for a field learned as several
// rules (cover): a held-out page takes the value of the first rule that
// yields one there.
func (f *field) crossValidateCover(folds int) (s Score, misses []Miss, ok bool) {
	return f.validate(folds, f.cover)
}

func (f *field) validate(folds int, learn func(train []bool) []*candidate) (s Score, misses []Miss, ok bool) {
	n := len(f.ex)
	if folds > n {
		folds = n
	}
	if folds < 2 {
		return s, nil, false
	}
	for fold := 0; fold < folds; fold++ {
		train := make([]bool, n)
		for i := range train {
			train[i] = i%folds != fold
		}
		cs := learn(train)
		rule := "(none: no rule holds on the other folds)"
		if len(cs) > 0 {
			var names []string
			for _, c := range cs {
				names = append(names, c.rule.String())
			}
			rule = strings.Join(names, " | ")
		}
		for i := range f.ex {
			if train[i] {
				continue
			}
			e := f.ex[i]
			var out []string
			for _, c := range cs {
				if len(c.out[i]) > 0 {
					out = c.out[i]
					break
				}
			}
			got := ""
			if len(out) > 0 {
				got = out[0]
				if f.kind == kindList {
					got = shown(out)
				}
			}
			switch {
			case got != "" && f.rightFirst(out, i):
				s.Right++
			case got != "":
				s.Wrong++
				misses = append(misses, Miss{URL: e.page.URL, Want: e.value, Got: got, Rule: rule})
			case e.shown:
				s.Missed++
				misses = append(misses, Miss{URL: e.page.URL, Want: e.value, Rule: rule})
			}
		}
	}
	return s, misses, true
}

// precise reports whether candidate c never yields a wrong value on the
// training pages: on each it yields nothing, or exactly the value.
func (f *field) precise(c *candidate, train []bool) bool {
	for i, t := range train {
		if !t {
			continue
		}
		out := c.out[i]
		if len(out) == 0 {
			continue
		}
		if !f.right(out, i) {
			return false
		}
	}
	return true
}

// cover learns a field whose pages come in several layouts (one URL
// shape, five templates): it takes, again and again, the rule that is
// precise on every training page and yields the value on the most
// training pages not yet covered (the preferred among equals), until no
// rule covers another page. Each rule is precise everywhere, so any page
// takes the value of the first rule yielding one. nil when none is
// precise and covers a page.
func (f *field) cover(train []bool) []*candidate {
	covered := make([]bool, len(f.ex))
	var out []*candidate
	f.ensure(len(f.cands))
	usable := make([]bool, len(f.cands))
	for k, c := range f.cands {
		if c.dead {
			continue
		}
		proposed := false
		for i, t := range train {
			proposed = proposed || t && c.from[i]
		}
		usable[k] = proposed && f.precise(c, train)
	}
	for {
		var best *candidate
		bestN := 0
		for k, c := range f.cands { // in preference order: the first of equals wins
			if !usable[k] {
				continue
			}
			n := 0
			for i, t := range train {
				if t && !covered[i] && f.ex[i].shown && f.right(c.out[i], i) {
					n++
				}
			}
			if n > bestN {
				best, bestN = c, n
			}
		}
		if best == nil {
			return out
		}
		for i := range covered {
			covered[i] = covered[i] || f.right(best.out[i], i)
		}
		out = append(out, best)
	}
}
