package dispatcher

import (
	"backfill/records"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"backfill/etl"
	"backfill/wire"
)

func TestPathTrap(t *testing.T) {
	tests := []struct {
		path             string
		maxDepth, maxRep int
		want             string
	}{
		{"/", 16, 3, ""},
		{"/a/b/c", 3, 3, ""},
		{"/a/b/c/", 3, 3, ""}, // a trailing slash adds no segment
		{"/a/b/c/d", 3, 3, FilterPathDepth},
		{"/a/b/c/d", 0, 3, ""}, // limit off
		{"/a/a/a", 16, 3, ""},
		{"/a/a/a/a", 16, 3, FilterRepeats},
		{"/x/y/x/y/x/y/x/y", 16, 3, FilterRepeats}, // repeats need not be adjacent
		{"/x/y/x/y/x/y/x/y", 16, 0, ""},
		{"/a/a/a/a/a", 4, 3, FilterPathDepth}, // depth is checked first
		{"/2024/01/01/01", 16, 3, ""},
		{"/p//////", 16, 3, FilterRepeats}, // empty segments count too
	}
	for _, tt := range tests {
		if got := pathTrap(tt.path, tt.maxDepth, tt.maxRep); got != tt.want {
			t.Errorf("pathTrap(%q, %d, %d) = %q, want %q", tt.path, tt.maxDepth, tt.maxRep, got, tt.want)
		}
	}
}

func TestSplitURL(t *testing.T) {
	tests := []struct{ in, host, name, path string }{
		{"https://a.example/x/y?q=/z", "a.example", "a.example", "/x/y"},
		{"http://a.example:8080/", "a.example:8080", "a.example", "/"},
		{"http://[::1]:8080/p", "[::1]:8080", "::1", "/p"},
		{"http://a.example?q", "a.example", "a.example", "/"},
		{"not a url", "", "", ""},
	}
	for _, tt := range tests {
		host, path := splitURL(tt.in)
		if host != tt.host || path != tt.path || hostName(host) != tt.name {
			t.Errorf("splitURL(%q) = %q (%q), %q; want %q (%q), %q", tt.in, host, hostName(host), path, tt.host, tt.name, tt.path)
		}
	}
}

func TestLinkFilterCheck(t *testing.T) {
	f := &linkFilter{
		blacklist: hostSet{"bad.example": true},
		top:       hostSet{"popular.example": true, "www.big.example": true, "hosting.example": true},
		maxDepth:  4,
		maxRepeat: 3,
	}
	tests := []struct {
		url   string
		depth int
		want  string
	}{
		{"https://ok.example/a", 1, ""},
		{"https://bad.example/", 0, FilterBlacklisted}, // a record's own link too
		{"https://deep.sub.bad.example:8443/", 1, FilterBlacklisted},
		{"https://notbad.example/", 1, ""},
		{"https://bad.example.test/", 1, ""},
		{"https://popular.example/x", 1, FilterTopSite},
		{"https://www.popular.example/x", 1, FilterTopSite}, // same registrable domain
		{"https://popular.example/x", 0, ""},                // the user gave it
		{"https://www.big.example/", 1, FilterTopSite},
		{"https://a.www.big.example/", 1, FilterTopSite},
		{"https://mail.big.example/", 1, ""}, // listed: one host, not the domain
		{"https://ok.example/a/b/c/d/e", 1, FilterPathDepth},
		{"https://ok.example/a/b/c/d/e", 0, ""},
		{"https://ok.example/a/a/a/a", 2, FilterRepeats},
		{"https://ok.example/a/a/a?a/a/a", 2, ""}, // the query is not the path
	}
	for _, tt := range tests {
		if got := f.check(tt.url, tt.depth); got != tt.want {
			t.Errorf("check(%.60q, %d) = %q, want %q", tt.url, tt.depth, got, tt.want)
		}
	}
}

// TestBlacklistEitherSpelling: a blacklist entry spelt in Unicode refuses
// its host and subdomains whichever way a link spells them, and one spelt
// in punycode the same.
func TestBlacklistEitherSpelling(t *testing.T) {
	dir := t.TempDir()
	for _, entry := range []string{"Bücher.example", "xn--bcher-kva.example"} {
		f, _, _, err := newLinkFilter(Config{Blacklist: writeFile(t, dir, "deny.txt", entry+"\n")})
		if err != nil {
			t.Fatal(err)
		}
		for _, link := range []string{"http://bücher.example/a", "http://XN--BCHER-KVA.example/b", "https://shop.BÜCHER.example:8443/c"} {
			n, err := etl.NormalizeURL(link)
			if err != nil {
				t.Fatalf("%s: %v", link, err)
			}
			if got := f.check(n, 1); got != FilterBlacklisted {
				t.Errorf("entry %s: link %s (%s) filtered %q, want %q", entry, link, n, got, FilterBlacklisted)
			}
		}
		if n, _ := etl.NormalizeURL("http://buecher.example/"); f.check(n, 1) != "" {
			t.Errorf("entry %s refuses another host", entry)
		}
	}
}

func TestHostSetStopsAtRegistrableDomain(t *testing.T) {
	// A list naming a shared hosting suffix must not exclude the sites
	// under it when matching popular sites; the blacklist has no stop.
	s := hostSet{"hosting.example": true}
	if s.match("someone.hosting.example", "someone.hosting.example") {
		t.Error("match walked past the registrable domain")
	}
	if !s.match("someone.hosting.example", "") {
		t.Error("match without a stop missed the parent domain")
	}
	if !s.match("hosting.example.", "hosting.example") {
		t.Error("trailing dot not ignored")
	}
}

func TestBudget(t *testing.T) {
	f := &linkFilter{hostCap: 2, recordCap: 3}
	hostN, recordN := map[string]int{}, map[string]int{}
	budget := func(f *linkFilter, host, rec string, depth int) string {
		h, r := hostN[host], recordN[rec]
		why := f.budget(&h, &r, depth)
		hostN[host], recordN[rec] = h, r
		return why
	}
	steps := []struct {
		host, rec string
		depth     int
		want      string
	}{
		{"h.example", "r1", 0, ""},
		{"h.example", "r1", 1, ""},
		{"h.example", "r1", 1, FilterHostBudget},
		{"h.example", "r1", 0, ""}, // a record's own link is charged, never refused
		{"g.example", "r1", 1, FilterRecordBudget},
		{"g.example", "r2", 1, ""},
		{"g.example", "r2", 2, ""},
		{"g.example", "r2", 2, FilterHostBudget},
		{"h.example:8080", "r2", 1, ""}, // another port is another host
	}
	for i, s := range steps {
		if got := budget(f, s.host, s.rec, s.depth); got != s.want {
			t.Errorf("step %d: budget(%s, %s, %d) = %q, want %q", i, s.host, s.rec, s.depth, got, s.want)
		}
	}
	off := &linkFilter{}
	for range 10000 {
		if got := budget(off, "h.example", "r", 3); got != "" {
			t.Fatalf("budget with limits off = %q", got)
		}
	}
}

func TestLimitDefaults(t *testing.T) {
	tests := []struct{ v, def, want int }{{0, 7, 7}, {-1, 7, 0}, {3, 7, 3}}
	for _, tt := range tests {
		if got := limit(tt.v, tt.def); got != tt.want {
			t.Errorf("limit(%d, %d) = %d, want %d", tt.v, tt.def, got, tt.want)
		}
	}
}

func collect(bad *[]string) func(*records.LineError) {
	return func(e *records.LineError) { *bad = append(*bad, e.Error()) }
}

func keys(s hostSet) []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestReadTopSites(t *testing.T) {
	tests := []struct {
		name    string
		content string
		n       int
		want    []string
		bad     []string
	}{
		{"plain", "1,a.example\n2,b.example\n3,c.example\n", 2, []string{"a.example", "b.example"}, nil},
		{"header crlf bom", "\xef\xbb\xbfrank,domain\r\n1,A.Example.\r\n2,b.example\r\n", 5, []string{"a.example", "b.example"}, nil},
		{"header after comment", "# top sites\n\nrank,domain\n1,a.example\n", 5, []string{"a.example"}, nil},
		{"extra columns quotes", "\"1\",\"a.example\",x\n", 5, []string{"a.example"}, nil},
		{"unsorted", "3,c.example\n1,a.example\n", 1, []string{"a.example"}, nil},
		{"malformed", "1,a.example\nx,b.example\n0,c.example\n4\n5,bad host\n6,\n7,a..example\n8,b.example\n", 10,
			[]string{"a.example", "b.example"},
			[]string{
				`f.csv:2: rank "x" is not a positive whole number`,
				`f.csv:3: rank "0" is not a positive whole number`,
				`f.csv:4: "4": want rank,domain`,
				`f.csv:5: "bad host" is not a host name (character ' ')`,
				`f.csv:6: empty host name`,
				`f.csv:7: "a..example" is not a host name (empty or over-long label)`,
			}},
		{"long line", "1,a.example\n2," + strings.Repeat("b", 2*maxListLine) + "\n3,c.example", 5,
			[]string{"a.example", "c.example"}, []string{fmt.Sprintf("f.csv:2: longer than %d bytes", maxListLine)}},
		{"empty", "", 5, []string{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bad []string
			top, err := readTopSites("f.csv", strings.NewReader(tt.content), tt.n, collect(&bad))
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(top); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("domains %q, want %q", got, tt.want)
			}
			if !reflect.DeepEqual(bad, tt.bad) {
				t.Errorf("bad lines\n%q\nwant\n%q", bad, tt.bad)
			}
		})
	}
}

func TestNewListErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.txt")
	tests := []struct {
		name  string
		tweak func(*Config)
		want  string
	}{
		{"exclude without list", func(c *Config) { c.ExcludeTop = 10 }, "ExcludeTop needs a TopSites file"},
		{"missing top sites", func(c *Config) { c.ExcludeTop, c.TopSites = 10, missing }, "top sites"},
		{"missing blacklist", func(c *Config) { c.Blacklist = missing }, "blacklist"},
		{"malformed blacklist", func(c *Config) { c.Blacklist = writeFile(t, dir, "deny.txt", "ok.example\nnot ok\n") },
			`deny.txt:2: "not ok" is not a host name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{StateDir: filepath.Join(dir, tt.name), Listen: "tcp://127.0.0.1:*", Mappings: loadSet(t), Store: nil}
			e := newEnv(t, t.TempDir(), nil) // a store to satisfy New
			cfg.Store = e.st
			tt.tweak(&cfg)
			d, err := New(cfg)
			if err == nil {
				d.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestPageLinks(t *testing.T) {
	e := newEnv(t, t.TempDir(), func(c *Config) { c.MaxFanout = 10 })
	d := e.d
	links := func(n, perDomain int) []wire.Link {
		var out []wire.Link
		for i := range n {
			out = append(out, wire.Link{URL: fmt.Sprintf("https://h%d.d%d.example/p%d", i, i/perDomain, i)})
		}
		return out
	}
	// ownSubdomains links n hosts under the page's own domain.
	ownSubdomains := func(n int) []wire.Link {
		var out []wire.Link
		for i := range n {
			out = append(out, wire.Link{URL: fmt.Sprintf("https://dept%d.page.example/p%d", i%300, i)})
		}
		return out
	}
	// farm is the shape of a farm met in the wild: 5,000 links over 97
	// registrable domains but 210 hosts (capped at maxLinks here).
	var farm []wire.Link
	for i := range 5000 {
		h := i % 210
		farm = append(farm, wire.Link{URL: fmt.Sprintf("https://x%d.d%d.example/deal%d", h, h%97, i)})
	}
	long := wire.Link{URL: "https://x.example/" + strings.Repeat("y", etl.MaxURLLength)}
	tests := []struct {
		name     string
		fanout   int // 0: the env's 10
		links    []wire.Link
		want     int // links kept
		filtered map[string]int64
		farm     bool
	}{
		{"at the limit", 0, links(10, 1), 10, nil, false},
		{"over the limit", 0, links(11, 1), 0, map[string]int64{FilterLinkFarm: 11}, true},
		{"hosts at the limit, few domains", 0, links(10, 5), 10, nil, false},
		{"hosts over the limit, few domains", 0, links(11, 6), 0, map[string]int64{FilterLinkFarm: 11}, true},
		{"many hosts few domains", 0, links(300, 30), 0, map[string]int64{FilterLinkFarm: 300}, true},
		{"many hosts of the page's own domain", 0, ownSubdomains(300), 300, nil, false},
		{"97 domains, 210 hosts, limit 100", 100, farm, 0, map[string]int64{FilterLinkFarm: maxLinks}, true},
		{"97 domains, 210 hosts, limit 210", 210, farm, maxLinks, nil, false},
		{"duplicates and junk", 0, []wire.Link{{URL: "https://a.example/"}, {URL: "https://A.example:443/#x"}, {URL: "mailto:x@a.example"}, {URL: "/relative"}}, 1, nil, false},
		{"too long", 0, []wire.Link{long, {URL: "https://a.example/"}}, 1, map[string]int64{FilterURLLength: 1}, false},
		{"capped", 0, ownSubdomains(maxLinks + 50), maxLinks, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.run.filtered = make(map[string]int64)
			d.run.linkFarms = 0
			d.filter.fanout = 10
			if tt.fanout != 0 {
				d.filter.fanout = tt.fanout
			}
			got := d.pageLinks("https://www.page.example/", tt.links)
			if len(got) != tt.want {
				t.Errorf("kept %d links, want %d", len(got), tt.want)
			}
			want := tt.filtered
			if want == nil {
				want = map[string]int64{}
			}
			if !reflect.DeepEqual(d.run.filtered, want) {
				t.Errorf("filtered %v, want %v", d.run.filtered, want)
			}
			if (d.run.linkFarms == 1) != tt.farm {
				t.Errorf("link farms %d, want farm=%v", d.run.linkFarms, tt.farm)
			}
		})
	}
}

// trapWeb generates the hostile part of the web the trap crawl walks.
type trapWeb struct {
	web                   map[string]page
	cal, deep, farm, hub  string
	hubPages, farmDomains int
}

func newTrapWeb() *trapWeb {
	w := &trapWeb{web: make(map[string]page), hubPages: 150, farmDomains: 2000}
	// A calendar: each month links to the months around it and its days,
	// each day to the next day and its month. Endless in both directions
	// (generated for three years; the crawl stays near the middle).
	month := func(m time.Time) string { return "https://cal.example/cal?m=" + m.Format("2006-01") }
	day := func(d time.Time) string { return "https://cal.example/day?d=" + d.Format("2006-01-02") }
	for m := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC); m.Year() < 2026; m = m.AddDate(0, 1, 0) {
		p := page{links: []string{month(m.AddDate(0, 1, 0)), month(m.AddDate(0, -1, 0))}}
		for d := m; d.Month() == m.Month(); d = d.AddDate(0, 0, 1) {
			p.links = append(p.links, day(d))
			w.web[day(d)] = page{links: []string{day(d.AddDate(0, 0, 1)), month(m)}}
		}
		w.web[month(m)] = p
	}
	w.cal = month(time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC))
	// Ever-deeper paths: every directory links to two deeper ones.
	var dirs func(p string, n int)
	dirs = func(p string, n int) {
		u := "https://deep.example" + p
		w.web[u] = page{links: []string{u + "a/", u + "b/"}}
		if n < 6 {
			dirs(p+"a/", n+1)
			dirs(p+"b/", n+1)
		}
	}
	dirs("/a/", 1)
	w.deep = "https://deep.example/a/"
	// The trap's root also links into a popular site, a blacklisted
	// subdomain, a site ranked below the exclusion cut, and a URL longer
	// than the project accepts.
	root := w.web[w.deep]
	root.links = append(root.links, "https://www.popular.example/", "https://sub.bad.example/",
		"https://unpopular.example/", "https://deep.example/"+strings.Repeat("z", etl.MaxURLLength))
	w.web[w.deep] = root
	w.web["https://unpopular.example/"] = page{}
	// A link farm: one page linking to thousands of invented sites.
	w.farm = "https://farm.example/"
	var farm page
	for i := range w.farmDomains {
		u := fmt.Sprintf("https://site%04d.example/", i)
		farm.links = append(farm.links, u)
		w.web[u] = page{}
	}
	w.web[w.farm] = farm
	// A wide site for the record budget: many pages over a few hosts.
	w.hub = "https://hub.example/"
	var hub page
	for i := range w.hubPages {
		u := fmt.Sprintf("https://h%d.hub.example/p%d", i%5, i)
		hub.links = append(hub.links, u)
		w.web[u] = page{}
	}
	w.web[w.hub] = hub
	w.web["https://www.popular.example/"] = page{}
	return w
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTrapCrawl walks a calendar, ever-deeper paths, a link farm and a wide
// site at depth 5: the filters keep the crawl to a bounded number of tasks
// and say what they refused.
func TestTrapCrawl(t *testing.T) {
	dir := t.TempDir()
	w := newTrapWeb()
	const hostBudget, recordBudget = 40, 100
	top := writeFile(t, dir, "top.csv", "rank,domain\n1,popular.example\n2,other.example\nnot a line\n3,unpopular.example\n")
	deny := writeFile(t, dir, "deny.txt", "# never\nbad.example\n192.0.2.0/24\n")
	e := newEnv(t, dir, func(c *Config) {
		c.Depth = 5
		c.Fields = []string{"phone"} // never found: every task is answered
		c.HostInFlight = 4
		c.HostBudget = hostBudget
		c.RecordBudget = recordBudget
		c.MaxPathDepth = 4
		c.TopSites, c.ExcludeTop = top, 2
		c.Blacklist = deny
	})
	own := []string{w.cal, w.deep, w.farm, "https://www.popular.example/"}
	rep := e.load("r.csv", csvOf("id,links",
		"r1,"+strings.Join(append(own, "https://bad.example/x"), " "),
		"r2,"+w.hub))
	if rep.Records != 2 || rep.Bad != 0 {
		t.Fatalf("load report %+v", rep)
	}
	s1 := newSup(t, "s1", e.d.Endpoint(), 16, false, e.set.Digest())
	e.run(context.Background())
	if !s1.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	st := crawl(t, e, []*testSup{s1}, w.web, 30*time.Second)
	if e.err != nil {
		t.Fatalf("Run: %v", e.err)
	}

	perHost := make(map[string]int)
	for u, n := range st.requests {
		if n != 1 {
			t.Errorf("%s requested %d times", u, n)
		}
		host, _ := hostDomain(u)
		perHost[host]++
	}
	// The bound: the records' own links, a host budget for each trap host,
	// the hub's pages up to the record budget, one page below the cut.
	bound := len(own) + 1 + 2*hostBudget + recordBudget + 1
	if len(st.tasks) > bound {
		t.Errorf("%d tasks sent, bound %d", len(st.tasks), bound)
	}
	if perHost["cal.example"] != hostBudget {
		t.Errorf("calendar: %d tasks, want the host budget %d", perHost["cal.example"], hostBudget)
	}
	// /a/ and every a/b directory up to four segments, but /a/a/a/a/.
	if perHost["deep.example"] != 14 {
		t.Errorf("ever-deeper paths: %d tasks, want 14", perHost["deep.example"])
	}
	if perHost["farm.example"] != 1 {
		t.Errorf("farm: %d tasks, want 1", perHost["farm.example"])
	}
	hub := 0
	for host, n := range perHost {
		switch {
		case strings.HasPrefix(host, "site"):
			t.Errorf("link farm expanded: %d tasks to %s", n, host)
		case strings.Contains(host, "bad.example"):
			t.Errorf("blacklisted host %s fetched", host)
		case strings.HasSuffix(host, "hub.example"):
			hub += n
		}
	}
	if hub != recordBudget {
		t.Errorf("hub: %d tasks, want the record budget %d", hub, recordBudget)
	}
	if perHost["www.popular.example"] != 1 || perHost["unpopular.example"] != 1 {
		t.Errorf("popular (own link) %d, unpopular (below the cut) %d tasks; want 1 each",
			perHost["www.popular.example"], perHost["unpopular.example"])
	}

	s := e.sum
	want := map[string]int64{
		FilterBlacklisted:  2,  // r1's own link and sub.bad.example
		FilterTopSite:      1,  // found on the deep trap's root
		FilterURLLength:    1,  // likewise
		FilterRepeats:      1,  // /a/a/a/a/
		FilterPathDepth:    14, // both links of the 7 four-segment directories
		FilterLinkFarm:     int64(w.farmDomains),
		FilterRecordBudget: int64(w.hubPages + 1 - recordBudget),
	}
	for reason, n := range want {
		if s.Filtered[reason] != n {
			t.Errorf("filtered %s = %d, want %d", reason, s.Filtered[reason], n)
		}
	}
	if s.Filtered[FilterHostBudget] == 0 {
		t.Error("the calendar never ran into its host budget")
	}
	if s.LinkFarms != 1 || s.BadTopSites != 1 {
		t.Errorf("link farms %d (want 1), bad top-sites lines %d (want 1)", s.LinkFarms, s.BadTopSites)
	}
}

func FuzzReadTopSites(f *testing.F) {
	f.Add("rank,domain\n1,a.example\n2,b.example\n", 1)
	f.Add("\xef\xbb\xbf1,\"A.example.\",x\r\nx,y\n", 3)
	f.Add("# c\n\n0,a\n-1,b\n1,\n1,*.c.example\n1,b\u00fc.example\n", 2)
	f.Fuzz(func(t *testing.T, content string, n int) {
		lines := strings.Count(content, "\n") + 1
		top, err := readTopSites("f.csv", strings.NewReader(content), n, func(e *records.LineError) {
			if e.Line < 1 || e.Line > lines || e.File != "f.csv" || e.Reason == "" {
				t.Fatalf("bad line report %+v for %d lines", e, lines)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if n < 1 && len(top) > 0 {
			t.Fatalf("%d domains kept for n = %d", len(top), n)
		}
		for h := range top {
			if h == "" || h != strings.ToLower(h) || strings.ContainsAny(h, " ,/") {
				t.Fatalf("bad domain %q", h)
			}
			if !top.match(h, "") {
				t.Fatalf("%q does not match itself", h)
			}
		}
	})
}
