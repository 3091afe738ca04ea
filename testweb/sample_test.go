package testweb

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/antchfx/htmlquery"
	"golang.org/x/text/unicode/norm"
)

// This file checks that Sample's truth follows from the pages, not from
// wishful thinking: a small reference crawl, written from the rules Sample
// documents, reads the web over real HTTP, applies the fixture mappings in
// ../mappings with the same XPath library as etl, and must end exactly at
// the truth. It also proves the truth cannot depend on crawl order.

// fixtureMapping is the part of a seed-format mapping the reference crawl
// needs.
type fixtureMapping struct {
	Name        string `json:"name"`
	URLPatterns []struct {
		Type    string `json:"type"`
		Pattern string `json:"pattern"`
	} `json:"url_patterns"`
	Fields []struct {
		Name       string `json:"name"`
		Match      bool   `json:"match"`
		Processors []struct {
			Type       string         `json:"type"`
			Parameters map[string]any `json:"parameters"`
		} `json:"processors"`
	} `json:"fields"`
	patterns []*regexp.Regexp
}

func loadFixtureMappings(t *testing.T) []*fixtureMapping {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "mappings", "testweb-*.json"))
	if err != nil || len(files) < 2 {
		t.Fatalf("fixture mappings: %v, found %v", err, files)
	}
	var ms []*fixtureMapping
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := &fixtureMapping{}
		if err := json.Unmarshal(b, m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range m.URLPatterns {
			re, err := regexp.Compile(p.Pattern)
			if p.Type != "regex" || err != nil {
				t.Fatalf("%s: url pattern %q (%s): %v", f, p.Pattern, p.Type, err)
			}
			m.patterns = append(m.patterns, re)
		}
		hasMatch := false
		for _, fl := range m.Fields {
			hasMatch = hasMatch || (fl.Name == "name" && fl.Match)
			for i, p := range fl.Processors {
				switch p.Type {
				case "xpath", "regex", "replace", "trim":
				default:
					t.Errorf("%s: field %s processors[%d]: %q is not one of xpath, regex, replace, trim", f, fl.Name, i, p.Type)
				}
			}
		}
		if !hasMatch {
			t.Errorf("%s: field name is not marked as the match key", f)
		}
		ms = append(ms, m)
	}
	return ms
}

// extract runs the mappings matching pageURL on body: field → first value.
// It understands the processors the fixture mappings use.
func extract(t *testing.T, ms []*fixtureMapping, pageURL string, body []byte) (map[string]string, bool) {
	t.Helper()
	doc, err := htmlquery.Parse(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: parse: %v", pageURL, err)
	}
	out := map[string]string{}
	matched := false
	for _, m := range ms {
		ok := false
		for _, re := range m.patterns {
			ok = ok || re.MatchString(pageURL)
		}
		if !ok {
			continue
		}
		matched = true
		for _, f := range m.Fields {
			var vals []string
			for i, p := range f.Processors {
				switch p.Type {
				case "xpath":
					if i != 0 {
						t.Fatalf("%s/%s: xpath after another processor is not modelled", m.Name, f.Name)
					}
					nodes, err := htmlquery.QueryAll(doc, p.Parameters["expression"].(string))
					if err != nil {
						t.Fatalf("%s/%s: %v", m.Name, f.Name, err)
					}
					for _, n := range nodes {
						vals = append(vals, htmlquery.InnerText(n))
					}
				case "regex":
					re := regexp.MustCompile(p.Parameters["pattern"].(string))
					var next []string
					for _, v := range vals {
						if sm := re.FindStringSubmatch(v); sm != nil {
							next = append(next, sm[len(sm)-1])
						}
					}
					vals = next
				case "trim":
					for j := range vals {
						vals[j] = strings.TrimSpace(vals[j])
					}
				default:
					t.Fatalf("%s/%s: processor %s is not modelled", m.Name, f.Name, p.Type)
				}
			}
			if len(vals) > 0 && vals[0] != "" {
				if _, dup := out[f.Name]; !dup {
					out[f.Name] = vals[0]
				}
			}
		}
	}
	return out, matched
}

// fold is the match-key comparison the crawl promises: case, whitespace
// and accents do not count.
func fold(s string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(s) {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(r)
		}
	}
	return strings.ToLower(strings.Join(strings.Fields(b.String()), " "))
}

type sampleRecord struct {
	id     string
	fields map[string]string
	links  []string
}

func parseSample(t *testing.T, b []byte) []sampleRecord {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("sample CSV: %v", err)
	}
	if got := strings.Join(rows[0], ","); got != "id,name,location,email,homepage,profile" {
		t.Fatalf("sample header %q", got)
	}
	var recs []sampleRecord
	for _, row := range rows[1:] {
		r := sampleRecord{id: row[0], fields: map[string]string{}}
		for i, col := range rows[0][1:] {
			v := row[i+1]
			if strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://") {
				r.links = append(r.links, v)
			} else {
				r.fields[col] = v
			}
		}
		recs = append(recs, r)
	}
	return recs
}

var targetFields = []string{"name", "location", "email"}

// fetched is one page as the reference crawl saw it.
type fetched struct {
	status  int
	values  map[string]string
	matched bool
	links   []string
}

// candidate is a value a page offers to a record.
type candidate struct {
	depth int
	value string
	url   string
}

func TestSampleTruthFollowsFromTheWeb(t *testing.T) {
	w := startSmall(t, Options{CrawlDelay: DefaultCrawlDelay})
	c := newClient(t, w)
	ms := loadFixtureMappings(t)

	cache := map[string]*fetched{}
	fetch := func(u string) *fetched {
		if f, ok := cache[u]; ok {
			return f
		}
		resp, err := c.Get(u)
		if err != nil {
			t.Fatalf("get %s: %v", u, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		f := &fetched{status: resp.StatusCode}
		if f.status == 200 {
			f.values, f.matched = extract(t, ms, u, body)
			doc, _ := htmlquery.Parse(bytes.NewReader(body))
			base, _ := url.Parse(u)
			for _, a := range htmlquery.Find(doc, "//a/@href") {
				ref, err := url.Parse(htmlquery.InnerText(a))
				if err != nil {
					t.Fatalf("%s: bad link %q", u, htmlquery.InnerText(a))
				}
				if abs := base.ResolveReference(ref); abs.Scheme == "http" {
					f.links = append(f.links, abs.String())
				}
			}
		}
		cache[u] = f
		return f
	}
	disallowed := func(u string) bool {
		p, _ := url.Parse(u)
		return strings.HasPrefix(p.Path, "/private/")
	}

	records, truth := Sample()
	recs := parseSample(t, records)
	if len(recs) < 12 || len(recs) > 20 {
		t.Errorf("sample has %d records, want 12 to 20", len(recs))
	}
	if len(truth) != len(recs) {
		t.Errorf("truth has %d records, sample %d", len(truth), len(recs))
	}
	requested := map[string]bool{} // every URL some record may cause a request for
	stats := map[string]int{}      // record outcomes, to prove the sample covers each case
	for _, r := range recs {
		want, ok := truth[r.id]
		if !ok {
			t.Errorf("record %s has no truth", r.id)
			continue
		}
		var targets []string
		for _, f := range targetFields {
			if r.fields[f] == "" {
				targets = append(targets, f)
			}
		}
		if len(want) != len(targets) {
			t.Errorf("record %s: truth covers %v, targets are %v", r.id, want, targets)
		}
		if len(targets) == 0 {
			stats["complete"]++
			continue // nothing to crawl
		}
		// Crawl: the record's links at depth 0, their links at depth 1.
		name := r.fields["name"]
		cands := map[string][]candidate{}
		accepted := map[string]map[string]string{} // url → values the record may take
		level := r.links
		seen := map[string]bool{}
		for depth := 0; depth <= 1; depth++ {
			var next []string
			for _, u := range level {
				if seen[u] {
					continue
				}
				seen[u] = true
				if disallowed(u) {
					stats["blocked"]++
					continue
				}
				requested[u] = true
				f := fetch(u)
				if f.status != 200 {
					stats["status"]++
					continue
				}
				next = append(next, f.links...)
				if !f.matched {
					continue
				}
				if name != "" && fold(f.values["name"]) != fold(name) {
					stats["decoy"]++
					continue
				}
				if name == "" {
					// Nothing constrains attribution, so every profile in
					// reach must be the record's own person, or the result
					// would depend on whether a filled name becomes a key.
					for _, vals := range accepted {
						if fold(vals["name"]) != fold(f.values["name"]) {
							t.Errorf("record %s knows no name and reaches profiles of %q and %q", r.id, vals["name"], f.values["name"])
						}
					}
				}
				accepted[u] = f.values
				for _, fl := range targets {
					if v := f.values[fl]; v != "" {
						cands[fl] = append(cands[fl], candidate{depth, v, u})
					}
				}
			}
			level = next
		}
		// The nearest value wins; two different values at the same depth
		// would make the truth a coin toss, so the fixture must not have any.
		for _, fl := range targets {
			end := ""
			if cs := cands[fl]; len(cs) > 0 {
				sort.SliceStable(cs, func(i, j int) bool { return cs[i].depth < cs[j].depth })
				end = cs[0].value
				winners := map[string]bool{}
				for _, c := range cs {
					if c.depth == cs[0].depth && c.value != end {
						t.Errorf("record %s field %s: %s and %s offer %q and %q at the same depth",
							r.id, fl, cs[0].url, c.url, end, c.value)
					}
					if c.value == end {
						winners[c.url] = true
					}
				}
				// Order independence: a crawl that sees a farther, different
				// value first must not be able to complete the record before
				// it sees a winning page.
				if len(winners) < len(cs) {
					stats["conflict"]++
					covered := map[string]bool{}
					for u, vals := range accepted {
						if !winners[u] {
							for k, v := range vals {
								covered[k] = covered[k] || v != ""
							}
						}
					}
					all := true
					for _, tf := range targets {
						all = all && covered[tf]
					}
					if all {
						t.Errorf("record %s: field %s could be completed without its nearest page; the truth would depend on crawl order", r.id, fl)
					}
				}
			}
			if got, ok := want[fl]; !ok || got != end {
				t.Errorf("record %s field %s: truth %q, the web gives %q", r.id, fl, got, end)
			}
		}
		filled := 0
		for _, fl := range targets {
			if want[fl] != "" {
				filled++
			}
		}
		switch {
		case filled == 0:
			stats["unfilled"]++
		case filled < len(targets):
			stats["partial"]++
		default:
			stats["filled"]++
		}
	}
	for _, k := range []string{"complete", "blocked", "status", "decoy", "conflict", "unfilled", "partial", "filled"} {
		if stats[k] == 0 {
			t.Errorf("the sample has no record exercising %q", k)
		}
	}
	t.Logf("record outcomes: %v", stats)

	// Politeness budget: at most 8 requests per host, robots.txt included.
	perHost := map[string][]string{}
	for u := range requested {
		p, _ := url.Parse(u)
		perHost[p.Host] = append(perHost[p.Host], p.Path)
	}
	wantMax := map[string]int{hostPeople: 8, hostStaff: 5, hostBlog: 5, hostTeam: 2, hostQuiet: 3}
	for _, h := range w.Hosts() {
		if _, reached := wantMax[h]; !reached {
			// app.example is SampleJS's: no Sample record reaches it.
			if len(perHost[h]) > 0 {
				t.Errorf("%s is not documented as reached by Sample, but %v is requested", h, perHost[h])
			}
			continue
		}
		if n := len(perHost[h]) + 1; n != wantMax[h] {
			sort.Strings(perHost[h])
			t.Errorf("%s: at most %d requests with robots.txt (%v), documented %d", h, n, perHost[h], wantMax[h])
		}
	}
	// What a correct crawl never asks for exists, so a wrong crawl is caught.
	for _, u := range NeverFetched() {
		if requested[u] {
			t.Errorf("%s is in NeverFetched, but a correct crawl may request it", u)
		}
		if f := fetch(u); f.status != 200 {
			t.Errorf("%s: status %d, want 200 so that fetching it shows in the log", u, f.status)
		}
	}
	// Every page requested is in the log, once per cache miss.
	n := 0
	for _, r := range w.Log() {
		if r.Status == 0 {
			t.Errorf("request %+v has no status", r)
		}
		n++
	}
	if n != len(cache) {
		t.Errorf("log has %d requests, the reference crawl made %d", n, len(cache))
	}
}

// TestSampleFiles checks that the exported file is the embedded one and
// that values the truth expects appear on the web verbatim.
func TestSampleFiles(t *testing.T) {
	onDisk, err := os.ReadFile(filepath.Join("testdata", "sample.csv"))
	if err != nil {
		t.Fatal(err)
	}
	records, truth := Sample()
	if !bytes.Equal(onDisk, records) {
		t.Error("Sample() differs from testdata/sample.csv")
	}
	// Fresh copies: changing them does not change the next call.
	records[0] = 'X'
	truth["r1"]["location"] = "changed"
	if r2, t2 := Sample(); r2[0] == 'X' || t2["r1"]["location"] == "changed" {
		t.Error("Sample() returns shared state")
	}

	_, truth = Sample()
	site := newSmallSite(1)
	for id, fields := range truth {
		for f, v := range fields {
			if v == "" {
				continue
			}
			found := false
			for _, pages := range site.pages {
				for path, body := range pages {
					if !strings.HasPrefix(path, "/private/") && strings.Contains(body, htmlEscape(v)) {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("record %s field %s: %q appears on no public page", id, f, v)
			}
		}
	}
}
