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
	ReportFile     = "learn-report.txt"
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

// mapping builds the group's mapping from its learned fields (nil when
// none was learned), without fixtures.
func (g *Group) mapping() *mappingFile {
	m := &mappingFile{Name: g.Name, URLPatterns: []patternEntry{{Type: "regex", Pattern: g.Pattern}}}
	var learned, not []string
	matchKey := ""
	for _, f := range g.Fields {
		if f.Status != Learned {
			not = append(not, fmt.Sprintf("%s (%s)", f.Field, f.Status))
			continue
		}
		learned = append(learned, f.Field)
		if f.Match {
			matchKey = f.Field
		}
		m.Fields = append(m.Fields, mappingField{Name: f.Field, Description: f.Evidence(), Match: f.Match, Type: f.Type, Processors: f.rule.steps})
	}
	if len(m.Fields) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Learned by backfill mappings learn from %d teacher page(s) of %s, such as %s. Fields learned: %s.",
		len(g.Pages), g.Host, g.Pages[0].URL, strings.Join(learned, ", "))
	if len(not) > 0 {
		fmt.Fprintf(&b, " Not learned: %s (see %s).", strings.Join(not, ", "), ReportFile)
	}
	switch {
	case matchKey != "":
		fmt.Fprintf(&b, " %s is the attribution match key.", matchKey)
	default:
		b.WriteString(" No match key was learned: a page's values go to any record that reaches it.")
	}
	b.WriteString(" Review it before use; a crawl loads it only when told to (run --use-learned).")
	m.Description = b.String()
	return m
}

// Write writes the learned mappings into dir (made if missing), with
// their fixtures, and the report. Each mapping is loaded and its fixtures
// run before anything is written, so what Write leaves passes `mappings
// check` and `mappings test`. It returns the files written.
func (r *Result) Write(dir string) ([]string, error) {
	files := map[string][]byte{}
	for _, g := range r.Groups {
		m := g.mapping()
		if m == nil {
			continue
		}
		if err := g.addFixtures(m, files); err != nil {
			return nil, err
		}
		data, err := etl.EncodeFile(m)
		if err != nil {
			return nil, err
		}
		files[m.Name+".json"] = data
	}
	var report bytes.Buffer
	r.Report(&report)
	files[ReportFile] = report.Bytes()
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
func (g *Group) addFixtures(m *mappingFile, files map[string][]byte) error {
	data, err := etl.EncodeFile(m)
	if err != nil {
		return err
	}
	set, err := etl.Load(map[string][]byte{m.Name + ".json": data})
	if err != nil {
		return fmt.Errorf("learned mapping %s does not load (a bug): %w", m.Name, err)
	}
	var pages []*Page
	for i, p := range g.Pages {
		for _, f := range g.Fields {
			if f.Status == Learned && i < len(g.Pages) && shows(f, p) {
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

// shows reports whether page p is one of f's examples that shows the value.
func shows(f *FieldResult, p *Page) bool {
	if f.f == nil {
		return false
	}
	for _, e := range f.f.ex {
		if e.doc.page == p && len(e.occs) > 0 {
			return true
		}
	}
	return false
}
