package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backfill/proctest"
	"backfill/testweb"
)

var updateDocs = flag.Bool("update", false, "rewrite the table of learned mappings in docs/learn.md")

// The acceptance of `mappings learn` on the templates web: a fifth of the
// records (every fifth profile of each template) know their fields and
// teach; the other four fifths know only their name and profile link. The
// learned mappings, and no hand-written one, crawl the four fifths with a
// real `backfill run`; what they fill is compared, template by template,
// with what the bundled hand-written mappings fill in a crawl of the same
// records.

const (
	learnPerTemplate = 50
	learnEvery       = 5 // one record in learnEvery teaches
)

// learnFields are the fields learned and compared; name is the match key.
var learnFields = []string{"location", "email", "website"}

// splitTemplateRecords returns the teachers (every learnEvery-th profile of
// each template, at most perTemplate of them; all when perTemplate is 0)
// and the records to fill (the others), both as CSV, and each record's
// template and truth.
func splitTemplateRecords(perTemplate int) (teachers, targets []byte, template map[string]string, truth map[string]testweb.TemplateProfile) {
	var tb, gb bytes.Buffer
	tw, gw := csv.NewWriter(&tb), csv.NewWriter(&gb)
	header := []string{"id", "name", "location", "email", "website", "profile"}
	tw.Write(header)
	gw.Write(header)
	template, truth = map[string]string{}, map[string]testweb.TemplateProfile{}
	taught := map[string]int{}
	for i, p := range testweb.TemplateProfiles(learnPerTemplate) {
		id := fmt.Sprintf("%s-%03d", p.Template, i%learnPerTemplate+1)
		// Every learnEvery-th, from the third: the templates web leaves
		// the website out of every fifth profile from the first.
		if (i%learnPerTemplate)%learnEvery == 2 {
			if perTemplate == 0 || taught[p.Template] < perTemplate {
				taught[p.Template]++
				tw.Write([]string{id, p.Name, p.Location, p.Email, p.Website, p.URL})
			}
			continue
		}
		gw.Write([]string{id, p.Name, "", "", "", p.URL})
		template[id], truth[id] = p.Template, p
	}
	tw.Flush()
	gw.Flush()
	return tb.Bytes(), gb.Bytes(), template, truth
}

// templateScore is how the learned mappings did on one template against
// the hand-written ones.
type templateScore struct {
	learned, right, baseline int // values filled by the learned mappings, of them right, values the hand-written ones filled right
}

func (s templateScore) precision() float64 {
	if s.learned == 0 {
		return 1
	}
	return float64(s.right) / float64(s.learned)
}

func (s templateScore) recall() float64 {
	if s.baseline == 0 {
		return 1
	}
	return float64(s.right) / float64(s.baseline)
}

// webFlags are the flags that point backfill at a fixture web.
func webFlags(web *testweb.Web) []string {
	args := []string{"--allow-loopback", "--delay", "0", "--contact", "https://backfill.invalid/learn-test"}
	for host, addr := range web.Resolve() {
		args = append(args, "--resolve", host+":"+addr)
	}
	return args
}

// runBackfill runs a command in this process and fails the test on a
// non-zero exit.
func runBackfill(tb testing.TB, args ...string) string {
	tb.Helper()
	var stdout, stderr bytes.Buffer
	if code := mainExit(args, &stdout, &stderr); code != 0 {
		tb.Fatalf("backfill %s: exit %d\n%s\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// crawlTemplates crawls records with a fresh templates web and returns what
// was filled per record; the web's log must show a polite crawl.
func crawlTemplates(tb testing.TB, dir, name string, records []byte, mappingArgs ...string) map[string]map[string]string {
	tb.Helper()
	web, err := testweb.StartTemplates(testweb.TemplatesOptions{PerTemplate: learnPerTemplate})
	if err != nil {
		tb.Fatal(err)
	}
	defer web.Close()
	path := filepath.Join(dir, name+".csv")
	if err := os.WriteFile(path, records, 0o644); err != nil {
		tb.Fatal(err)
	}
	state := filepath.Join(dir, name+"-state")
	args := append([]string{"run", "--records", path, "--state-dir", state, "--depth", "0", "--fields", strings.Join(learnFields, ",")}, webFlags(web)...)
	runBackfill(tb, append(args, mappingArgs...)...)
	out := runBackfill(tb, "export", "--state-dir", state, "--format", "jsonl", "--provenance")
	checkPoliteness(tb, web.Log(), 0)
	return foundValues(tb, strings.NewReader(out))
}

// learnTemplates runs `mappings learn` on the teachers with a fresh
// templates web, writing into dir/learned, and returns its report.
func learnTemplates(tb testing.TB, dir string, teachers []byte, extra ...string) string {
	tb.Helper()
	web, err := testweb.StartTemplates(testweb.TemplatesOptions{PerTemplate: learnPerTemplate})
	if err != nil {
		tb.Fatal(err)
	}
	defer web.Close()
	path := filepath.Join(dir, "teachers.csv")
	if err := os.WriteFile(path, teachers, 0o644); err != nil {
		tb.Fatal(err)
	}
	args := append([]string{"mappings", "learn", "--records", path, "--fields", strings.Join(learnFields, ","), "-o", filepath.Join(dir, "learned")}, webFlags(web)...)
	report := runBackfill(tb, append(args, extra...)...)
	checkPoliteness(tb, web.Log(), 0)
	return report
}

// scoreTemplates compares the learned crawl with the hand-written one,
// per template, on the records' truth.
func scoreTemplates(tb testing.TB, learned, baseline map[string]map[string]string, template map[string]string, truth map[string]testweb.TemplateProfile) map[string]templateScore {
	tb.Helper()
	scores := map[string]templateScore{}
	for id, tpl := range template {
		p := truth[id]
		want := map[string]string{"location": p.Location, "email": p.Email, "website": p.Website}
		s := scores[tpl]
		for _, f := range learnFields {
			if b := baseline[id][f]; b != "" && b == want[f] {
				s.baseline++
			} else if want[f] != "" {
				tb.Errorf("the hand-written mappings filled %s %s with %q, the page shows %q", id, f, b, want[f])
			}
			if g := learned[id][f]; g != "" {
				s.learned++
				if g == want[f] {
					s.right++
				} else {
					tb.Logf("learned mappings filled %s %s with %q, the page shows %q", id, f, g, want[f])
				}
			}
		}
		scores[tpl] = s
	}
	return scores
}

// TestLearnedMappingsFillRecords is the acceptance test: with a fifth of
// the records known, the learned mappings crawled alone fill the rest at
// precision ≥ 0.99 and recall ≥ 0.95 of what the hand-written mappings
// reach, on every template; the learned files pass `mappings check` and
// `mappings test`; a crawl without --use-learned does not use them.
func TestLearnedMappingsFillRecords(t *testing.T) {
	proctest.Short(t, "learns and crawls the templates web")
	dir := t.TempDir()
	teachers, targets, template, truth := splitTemplateRecords(0)
	report := learnTemplates(t, dir, teachers)
	for _, want := range []string{"5 mapping(s) learned", "cross-validation", "label-anchored XPath", "JSON-LD property", "JSON path in a script"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report does not mention %q:\n%s", want, report)
		}
	}
	if strings.Contains(report, "could not be fetched") || strings.Contains(report, "not learned") {
		t.Errorf("every teacher page is on the templates web and every field learnable:\n%s", report)
	}
	learnedDir := filepath.Join(dir, "learned")
	if out := runBackfill(t, "mappings", "check", learnedDir); !strings.Contains(out, "ok: 5 mappings") {
		t.Errorf("mappings check: %s", out)
	}
	if out := runBackfill(t, "mappings", "test", learnedDir); !strings.Contains(out, "15 fixtures, 0 failed") {
		t.Errorf("mappings test: %s", out)
	}
	if _, err := os.Stat(filepath.Join(learnedDir, "learn-report.txt")); err != nil {
		t.Errorf("no report beside the mappings: %v", err)
	}

	empty := filepath.Join(dir, "no-mappings")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	baseline := crawlTemplates(t, dir, "baseline", targets)
	learned := crawlTemplates(t, dir, "learned", targets, "--mappings", empty, "--use-learned", learnedDir)
	for _, tpl := range testweb.Templates() {
		s := scoreTemplates(t, learned, baseline, template, truth)[tpl]
		t.Logf("%-7s learned %3d values, %3d right; hand-written %3d: precision %.3f, recall %.3f", tpl, s.learned, s.right, s.baseline, s.precision(), s.recall())
		if s.baseline == 0 || s.precision() < 0.99 || s.recall() < 0.95 {
			t.Errorf("template %s: precision %.3f, recall %.3f of the hand-written mappings' %d values; want ≥ 0.99 and ≥ 0.95", tpl, s.precision(), s.recall(), s.baseline)
		}
	}

	checkLearnDocs(t, learnedDir)

	// Nothing learned is used silently: without --use-learned the same
	// crawl has no mapping at all, and is refused as such.
	path := filepath.Join(dir, "none.csv")
	if err := os.WriteFile(path, targets, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := mainExit([]string{"run", "--records", path, "--state-dir", filepath.Join(dir, "none-state"), "--mappings", empty}, &stdout, &stderr)
	if code != exitFail || !strings.Contains(stderr.String(), "holds no mapping") {
		t.Errorf("a crawl without --use-learned and no mapping: exit %d, want %d saying so:\n%s", code, exitFail, stderr.String())
	}
}

// BenchmarkLearningCurve learns the templates web from 1, 2, 3, 5 and 10
// teachers per template (at least one teacher page a field, so that one
// teacher is enough to try) and crawls the same records to fill as the
// acceptance test with what was learned. It reports, per template, the
// precision and the recall against the hand-written mappings, crawled once.
func BenchmarkLearningCurve(b *testing.B) {
	_, targets, template, truth := splitTemplateRecords(0)
	empty := filepath.Join(b.TempDir(), "no-mappings")
	if err := os.Mkdir(empty, 0o755); err != nil {
		b.Fatal(err)
	}
	baseline := crawlTemplates(b, b.TempDir(), "baseline", targets)
	for _, n := range []int{1, 2, 3, 5, 10} {
		b.Run(fmt.Sprintf("teachers=%d", n), func(b *testing.B) {
			teachers, _, _, _ := splitTemplateRecords(n)
			var scores map[string]templateScore
			for i := 0; i < b.N; i++ {
				dir := b.TempDir()
				learnTemplates(b, dir, teachers, "--min-teachers", "1")
				learned := crawlTemplates(b, dir, "learned", targets, "--mappings", empty, "--use-learned", filepath.Join(dir, "learned"))
				scores = scoreTemplates(b, learned, baseline, template, truth)
			}
			for _, tpl := range testweb.Templates() {
				s := scores[tpl]
				b.ReportMetric(s.precision(), tpl+"-precision")
				b.ReportMetric(s.recall(), tpl+"-recall")
			}
		})
	}
}

// TestMappingsLearnCommand: the command's own checks, learning from a
// single page, and --use-learned's.
func TestMappingsLearnCommand(t *testing.T) {
	web, err := testweb.Start(testweb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := t.TempDir()
	out := filepath.Join(dir, "learned")
	nobody := filepath.Join(dir, "nobody.csv")
	os.WriteFile(nobody, []byte("id,name,location,profile\n1,Alice Moreau,,http://people.example/p/alice\n"), 0o644)
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	nameless := filepath.Join(dir, "nameless.csv")
	os.WriteFile(nameless, []byte("id,location,profile\n1,\"Lyon, France\",http://people.example/p/alice\n"), 0o644)
	records := filepath.Join(dir, "r.csv")
	os.WriteFile(records, []byte("id,name,homepage\n1,A,http://people.example/\n"), 0o644)
	single := append([]string{"mappings", "learn", "--url", "http://people.example/p/alice",
		"--value", "name=Alice Moreau", "--value", "location=Lyon, France", "-o", out}, webFlags(web)...)

	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no output", []string{"mappings", "learn", "--records", nobody, "--fields", "location"}, exitUsage, []string{"-o DIR is required"}},
		{"nothing to learn from", []string{"mappings", "learn", "-o", out}, exitUsage, []string{"--records FILE, or --url"}},
		{"url without values", []string{"mappings", "learn", "-o", out, "--url", "http://people.example/p/alice"}, exitUsage, []string{"--value FIELD=VALUE"}},
		{"values without url", []string{"mappings", "learn", "-o", out, "--records", nobody, "--value", "a=b"}, exitUsage, []string{"--value belongs to --url"}},
		{"bad value", []string{"mappings", "learn", "-o", out, "--value", "location"}, exitUsage, []string{"want FIELD=VALUE"}},
		{"no fields", []string{"mappings", "learn", "-o", out, "--records", nobody}, exitUsage, []string{"--fields is required"}},
		{"match key the records lack", []string{"mappings", "learn", "-o", out, "--records", nameless, "--fields", "location"}, exitUsage,
			[]string{"--match name: no teacher knows a name", `--match ""`}},
		{"unknown type", []string{"mappings", "learn", "-o", out, "--records", nobody, "--fields", "born", "--type", "born=day"}, exitUsage, []string{`type "day": want one of date, email, number, phone, text, url`}},
		{"negative depth", []string{"mappings", "learn", "-o", out, "--records", nobody, "--fields", "location", "--depth", "-1"}, exitUsage, []string{"--depth must not be negative"}},
		{"negative recrawl age", []string{"mappings", "learn", "-o", out, "--records", nobody, "--recrawl-after", "-1s"}, exitUsage, []string{"--recrawl-after must not be negative"}},
		{"no teacher", append([]string{"mappings", "learn", "-o", out, "--records", nobody, "--fields", "location"}, webFlags(web)...), exitFail,
			[]string{"no record knows a value of the fields to learn (fields location)"}},
		{"one page", single, exitOK, []string{"learned-people.example", "Not cross-validated", "location  learned", "wrote 4 file(s)", "--use-learned " + out}},
		{"use-learned missing", []string{"run", "--records", records, "--use-learned", filepath.Join(dir, "nope")}, exitFail, []string{"--use-learned", "nope"}},
		{"use-learned empty", []string{"run", "--records", records, "--use-learned", empty, "--state-dir", filepath.Join(dir, "s1")}, exitFail, []string{"no mappings there"}},
		{"use-learned is mappings", []string{"run", "--records", records, "--mappings", out, "--use-learned", out}, exitUsage, []string{"names the --mappings directory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := mainExit(c.args, &stdout, &stderr)
			got := stdout.String() + stderr.String()
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s", code, c.code, got)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
		})
	}
	if out := runBackfill(t, "mappings", "test", out); !strings.Contains(out, "1 fixtures, 0 failed") {
		t.Errorf("the mapping learned from one page fails its fixture: %s", out)
	}
}

// Where docs/learn.md shows the learned mappings of the templates web
// beside the hand-written ones; TestLearnedMappingsFillRecords keeps it
// true (go test -run TestLearnedMappingsFillRecords -update rewrites it).
const (
	learnDocs      = "../../docs/learn.md"
	learnDocsBegin = "<!-- BEGIN learned beside hand-written: written by the acceptance test of cmd/backfill (-update) -->"
	learnDocsEnd   = "<!-- END learned beside hand-written -->"
)

// mappingChains reads mapping files and returns, per url_pattern host and
// field, the chain in one line.
func mappingChains(tb testing.TB, files ...string) map[string]map[string]string {
	tb.Helper()
	type proc struct {
		Type       string         `json:"type"`
		Parameters map[string]any `json:"parameters"`
	}
	type mapping struct {
		URLPatterns []struct{ Pattern string } `json:"url_patterns"`
		Fields      []struct {
			Name       string `json:"name"`
			Processors []proc `json:"processors"`
		} `json:"fields"`
	}
	out := map[string]map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var ms []mapping
		if err := json.Unmarshal(data, &ms); err != nil {
			var one mapping
			if err := json.Unmarshal(data, &one); err != nil {
				tb.Fatalf("%s: %v", f, err)
			}
			ms = []mapping{one}
		}
		for _, m := range ms {
			host := ""
			for _, tpl := range []string{"directory", "registry", "club", "spa", "press"} {
				if strings.Contains(m.URLPatterns[0].Pattern, tpl) {
					host = tpl
				}
			}
			out[host] = map[string]string{}
			for _, fl := range m.Fields {
				var steps []string
				for _, p := range fl.Processors {
					st := p.Type
					switch {
					case p.Parameters["expression"] != nil:
						st += " " + fmt.Sprint(p.Parameters["expression"])
					case p.Parameters["pattern"] != nil:
						st += " " + fmt.Sprint(p.Parameters["pattern"])
					case p.Type == "jsonld":
						st += fmt.Sprintf(" %v.%v", p.Parameters["type"], p.Parameters["property"])
					}
					steps = append(steps, st)
				}
				out[host][fl.Name] = strings.Join(steps, " → ")
			}
		}
	}
	return out
}

// checkLearnDocs compares the table in docs/learn.md with the mappings
// learned in dir and the hand-written ones.
func checkLearnDocs(t *testing.T, dir string) {
	t.Helper()
	learned, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(learned) == 0 {
		t.Fatalf("no learned mappings in %s", dir)
	}
	got := mappingChains(t, learned...)
	hand := mappingChains(t, "../../mappings/templates.json")
	cell := func(s string) string { return "`" + strings.ReplaceAll(s, "|", `\|`) + "`" }
	var b strings.Builder
	b.WriteString("| template | field | hand-written (mappings/templates.json) | learned from 10 teachers |\n|---|---|---|---|\n")
	for _, tpl := range []struct{ name, host string }{{"list", "directory"}, {"table", "registry"}, {"prose", "club"}, {"jsblob", "spa"}, {"jsonld", "press"}} {
		for _, f := range []string{"name", "location", "email", "website"} {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", tpl.name, f, cell(hand[tpl.host][f]), cell(got[tpl.host][f]))
		}
	}
	data, err := os.ReadFile(learnDocs)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, learnDocsBegin), strings.Index(doc, learnDocsEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q", learnDocs, learnDocsBegin, learnDocsEnd)
	}
	want := doc[:i] + learnDocsBegin + "\n" + b.String() + doc[j:]
	if *updateDocs {
		if err := os.WriteFile(learnDocs, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != doc {
		t.Errorf("%s does not show the mappings learned now (go test ./cmd/backfill -run TestLearnedMappingsFillRecords -update):\n%s", learnDocs, b.String())
	}
}
