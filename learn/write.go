package learn

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"backfill/etl"
)

// What Write leaves in the output directory: one mapping file per group
// that learned a field (NAME.json, an ordinary mapping whose descriptions
// carry the evidence), its fixtures' saved pages under testdata/, and the
// whole report, fields not learned included, in ReportFile.
const (
	ReportFile = "learn-report.txt"
	// FieldsFile lists the fields learning was asked for (the match key
	// aside), one a line: a crawl using the learned mappings fills them,
	// and a record lacking one that no learned mapping fills is not
	// complete.
	FieldsFile     = "learn-fields.txt"
	fixturesPerMap = 3
)

// mappingFile is a learned mapping as written, keys in the order the
// format's files use.
type mappingFile struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	URLPatterns []patternEntry `json:"url_patterns"`
	Fields      []mappingField `json:"fields"`
	Fixtures    []fixture      `json:"fixtures,omitempty"`
}

type patternEntry struct {
	Type    string `json:"type"`
	Pattern string `json:"pattern"`
}

type mappingField struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Match       bool   `json:"match,omitempty"`
	Type        string `json:"type,omitempty"`
	Processors  []step `json:"processors"`
}

type fixture struct {
	URL         string        `json:"url"`
	File        string        `json:"file"`
	ContentType string        `json:"content_type,omitempty"`
	Expect      fixtureExpect `json:"expect"`
}

type fixtureExpect struct {
	Fields map[string][]string `json:"fields"`
}

// Evidence says, in a field's description, what a learned rule rests on.
func (f *FieldResult) Evidence() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Learned by backfill mappings learn from %d teacher page(s) (the value appears on %d); rule: %s", f.Teachers, f.Shown, f.Kind)
	if f.FirstOfSeveral {
		b.WriteString(", which yields other values after it on some pages (the first is kept)")
	}
	if f.Validated {
		fmt.Fprintf(&b, ". %d-fold cross-validation on held-out teachers: precision %.2f (%d of %d), recall %.2f (%d of %d).",
			f.Folds, f.HeldOut.Precision(), f.HeldOut.Right, f.HeldOut.Right+f.HeldOut.Wrong,
			f.HeldOut.Recall(), f.HeldOut.Right, f.HeldOut.Right+f.HeldOut.Missed)
	} else {
		b.WriteString(". Not cross-validated: one teacher page. Review it.")
	}
	return b.String()
}

// withheld says why a group that learned fields writes no mapping: its
// match key was asked for (matchKey) and not learned, and a mapping
// without one would give a page's values to any record reaching it. ""
// when nothing is withheld.
func (g *Group) withheld(matchKey string) string {
	if !g.Learned() || matchKey == "" {
		return ""
	}
	for _, f := range g.Fields {
		if f.Match {
			if f.Status == Learned {
				return ""
			}
			return fmt.Sprintf("its match key %s was not learned (%s), and without one a page's values would go to any record that reaches it, another's too; learn with more teachers, another --match, or --match \"\" to write it without a key", f.Field, f.Status)
		}
	}
	return ""
}

// Written reports whether the group writes a mapping: it learned a field
// and, when a match key was asked for, the key.
func (g *Group) Written(matchKey string) bool {
	return g.Learned() && g.withheld(matchKey) == ""
}

// cluster is the teacher pages one mapping of a group is for, and the
// rule (an index into each field's rules, -1: none) of each field.
type cluster struct {
	rules []int // per learned field
	pages []*Page
}

// rulesOf are a learned field's rules: its cover, or its one rule.
func rulesOf(f *FieldResult) []*rule {
	if len(f.cover) == 0 {
		return []*rule{f.rule}
	}
	out := make([]*rule, len(f.cover))
	for i, c := range f.cover {
		out[i] = c.rule
	}
	return out
}

// clusters splits the group's pages by the rules that take their values:
// a field learned as one rule has it everywhere; a field learned as
// several (pages of several layouts) has the one that yields its value
// on the page. Pages whose rules agree wherever both have one make one
// mapping; a page no rule of the match key covers makes none.
func (g *Group) clusters(learned []*FieldResult, matchKey string) []*cluster {
	type row struct {
		key  []int
		page *Page
		set  int
	}
	var rows []row
	for _, p := range g.Pages {
		key := make([]int, len(learned))
		set := 0
		drop := false
		for fi, f := range learned {
			key[fi] = -1
			if len(f.cover) == 0 {
				key[fi] = 0
				set++
				continue
			}
			for i, e := range f.f.ex {
				if e.page != p {
					continue
				}
				for k, c := range f.cover {
					if f.f.right(c.out[i], i) {
						key[fi] = k
						set++
						break
					}
				}
			}
			if f.Match && key[fi] < 0 && matchKey != "" {
				drop = true
			}
		}
		if !drop && set > 0 {
			rows = append(rows, row{key, p, set})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].set > rows[j].set })
	var out []*cluster
	for _, r := range rows {
		var into *cluster
		for _, c := range out {
			ok := true
			for i, k := range r.key {
				ok = ok && (k < 0 || c.rules[i] < 0 || k == c.rules[i])
			}
			if ok {
				into = c
				break
			}
		}
		if into == nil {
			into = &cluster{rules: append([]int(nil), r.key...)}
			out = append(out, into)
		}
		for i, k := range r.key {
			if into.rules[i] < 0 {
				into.rules[i] = k
			}
		}
		into.pages = append(into.pages, r.page)
	}
	return out
}

// mappings builds the group's mappings from its learned fields, one per
// cluster of its pages (nil when nothing is written), without fixtures,
// each with the teacher pages its fixtures come from.
func (g *Group) mappings(matchKey string) ([]*mappingFile, [][]*Page) {
	if !g.Written(matchKey) {
		return nil, nil
	}
	var learned []*FieldResult
	var names, not []string
	for _, f := range g.Fields {
		if f.Status != Learned {
			not = append(not, fmt.Sprintf("%s (%s)", f.Field, f.Status))
			continue
		}
		learned = append(learned, f)
		names = append(names, f.Field)
	}
	cs := g.clusters(learned, matchKey)
	var out []*mappingFile
	var pages [][]*Page
	for ci, c := range cs {
		name := g.Name
		if len(cs) > 1 {
			name = fmt.Sprintf("%s-%d", g.Name, ci+1)
		}
		m := &mappingFile{Name: name, URLPatterns: []patternEntry{{Type: "regex", Pattern: g.Pattern}}}
		key := ""
		var has []string
		for fi, f := range learned {
			if c.rules[fi] < 0 {
				continue
			}
			has = append(has, f.Field)
			if f.Match {
				key = f.Field
			}
			steps := rulesOf(f)[c.rules[fi]].steps
			if f.join != "" {
				steps = append(append([]step{}, steps...), joinStep(f.join))
			}
			m.Fields = append(m.Fields, mappingField{Name: f.Field, Description: f.Evidence(), Match: f.Match, Type: f.Type, Processors: steps})
		}
		if len(m.Fields) == 0 {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Learned by backfill mappings learn from %d teacher page(s) of %s, such as %s. Fields learned: %s.",
			len(g.Pages), g.Host, c.pages[0].URL, strings.Join(has, ", "))
		if len(cs) > 1 {
			fmt.Fprintf(&b, " The pages of this URL pattern come in %d layouts; this mapping is for %d of its teacher pages, and yields nothing on the others.", len(cs), len(c.pages))
		}
		if len(not) > 0 {
			fmt.Fprintf(&b, " Not learned: %s (see %s).", strings.Join(not, ", "), ReportFile)
		}
		switch {
		case key != "":
			fmt.Fprintf(&b, " %s is the attribution match key.", key)
		default:
			b.WriteString(" Written without a match key, as asked (--match \"\"): a page's values go to any record that reaches it.")
		}
		b.WriteString(" Review it before use; a crawl loads it only when told to (run --use-learned).")
		m.Description = b.String()
		out = append(out, m)
		pages = append(pages, c.pages)
	}
	return out, pages
}

// Write writes the learned mappings into dir (made if missing), with
// their fixtures, and the report. Each mapping is loaded and its fixtures
// run before anything is written, so what Write leaves passes `mappings
// check` and `mappings test`. It returns the files written.
func (r *Result) Write(dir string) ([]string, error) {
	files := map[string][]byte{}
	for _, g := range r.Groups {
		ms, pages := g.mappings(r.Options.MatchKey)
		for i, m := range ms {
			if err := g.addFixtures(m, pages[i], files); err != nil {
				return nil, err
			}
			data, err := etl.EncodeFile(m)
			if err != nil {
				return nil, err
			}
			files[m.Name+".json"] = data
		}
	}
	var report bytes.Buffer
	r.Report(&report)
	files[ReportFile] = report.Bytes()
	var asked strings.Builder
	for _, f := range r.Options.Fields {
		if f = strings.TrimSpace(f); f != "" && f != r.Options.MatchKey {
			asked.WriteString(f + "\n")
		}
	}
	files[FieldsFile] = []byte(asked.String())
	if err := os.MkdirAll(filepath.Join(dir, "testdata"), 0o755); err != nil {
		return nil, err
	}
	var written []string
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.WriteFile(p, files[n], 0o644); err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}

// addFixtures saves up to fixturesPerMap teacher pages showing a learned
// value as m's fixtures (into files), expecting what m takes from them,
// after checking that m loads and passes them.
func (g *Group) addFixtures(m *mappingFile, from []*Page, files map[string][]byte) error {
	data, err := etl.EncodeFile(m)
	if err != nil {
		return err
	}
	set, err := etl.Load(map[string][]byte{m.Name + ".json": data})
	if err != nil {
		return fmt.Errorf("learned mapping %s does not load (a bug): %w", m.Name, err)
	}
	var pages []*Page
	for _, p := range from {
		for _, f := range g.Fields {
			if f.Status == Learned && shows(f, p) {
				pages = append(pages, p)
				break
			}
		}
	}
	sort.SliceStable(pages, func(i, j int) bool { return pages[i].URL < pages[j].URL })
	if len(pages) > fixturesPerMap {
		pages = pages[:fixturesPerMap]
	}
	for i, p := range pages {
		ext := ".html"
		ctype := ""
		if mt, _, _ := mime.ParseMediaType(p.ContentType); strings.HasSuffix(mt, "json") {
			ext, ctype = ".json", p.ContentType
		}
		file := fmt.Sprintf("testdata/%s-%d%s", m.Name, i+1, ext)
		fx := fixture{URL: p.URL, File: file, ContentType: ctype, Expect: fixtureExpect{Fields: map[string][]string{}}}
		ex := set.Extract(p.URL, p.Body, p.ContentType)
		for _, fv := range ex.Fields {
			if err := g.pageSays(fv.Field, p, fv.Values); err != nil {
				return fmt.Errorf("learned mapping %s (a bug): %w", m.Name, err)
			}
			fx.Expect.Fields[fv.Field] = fv.Values
		}
		res := set.RunFixture(set.Mappings()[0], etl.Fixture{URL: fx.URL, File: fx.File, ContentType: ctype, Fields: fx.Expect.Fields}, p.Body)
		if !res.OK() {
			return fmt.Errorf("learned mapping %s fails its own fixture %s (a bug): %s", m.Name, p.URL, strings.Join(res.Diff, "; "))
		}
		m.Fixtures = append(m.Fixtures, fx)
		files[file] = p.Body
	}
	if len(m.Fixtures) == 0 {
		return errors.New("learned mapping " + m.Name + " has no teacher page to make a fixture of (a bug)")
	}
	return nil
}

// pageSays checks that what a fixture expects of a field on page p is
// what p says: a value as the page writes it (its form, white space
// folded), unless the field's type rewrites it. A rule that altered a
// value would make a fixture that passes with it.
func (g *Group) pageSays(field string, p *Page, values []string) error {
	for _, f := range g.Fields {
		if f.Field != field || f.f == nil || f.f.kind.typed() || f.f.kind == kindList || f.join != "" {
			continue
		}
		for _, e := range f.f.ex {
			if e.page != p || len(e.forms) == 0 || len(values) == 0 {
				continue
			}
			if !e.forms[collapse(values[0])] {
				return fmt.Errorf("%s on %s: the rule yields %q, which the page does not say", field, p.URL, values[0])
			}
		}
	}
	return nil
}

// shows reports whether page p is one of f's examples that shows the value.
func shows(f *FieldResult, p *Page) bool {
	if f.f == nil {
		return false
	}
	for _, e := range f.f.ex {
		if e.page == p && e.shown {
			return true
		}
	}
	return false
}

// ReadFields reads the fields learning was asked for from a directory
// Write wrote (FieldsFile); nil when it holds none (written before the
// file was).
func ReadFields(dir string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, FieldsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}
