package testweb

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"backfill/etl"
	"backfill/proctest"
)

func startPeople(t testing.TB, o PeopleOptions) *Web {
	t.Helper()
	w, err := StartPeople(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return w
}

func peopleSet(t *testing.T) *etl.Set {
	t.Helper()
	set, err := etl.Load(PeopleMappings())
	if err != nil {
		t.Fatalf("people mappings: %v", err)
	}
	return set
}

// peopleRow is one record of PeopleRecords.
type peopleRow struct {
	id, name, link string
	fields         map[string]string
}

func peopleRows(t *testing.T, w *Web) []peopleRow {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(PeopleRecords(w))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rows[0], ","); got != "id,name,title,location,email,link" {
		t.Fatalf("header %q", got)
	}
	var out []peopleRow
	for _, r := range rows[1:] {
		out = append(out, peopleRow{id: r[0], name: r[1], link: r[5],
			fields: map[string]string{"title": r[2], "location": r[3], "email": r[4]}})
	}
	return out
}

func TestPeopleOptions(t *testing.T) {
	for _, o := range []PeopleOptions{
		{Hosts: -1}, {Pages: 10000}, {Hosts: 2, Pages: 2, Records: 5}, {Records: -1},
		{Hosts: 1, Pages: 3}, {Latency: -time.Second}, {CrawlDelay: -time.Second},
	} {
		if w, err := StartPeople(o); err == nil {
			w.Close()
			t.Errorf("StartPeople(%+v) accepted", o)
		}
	}
	w := startPeople(t, PeopleOptions{})
	if n := len(w.Hosts()); n != DefaultPeopleHosts {
		t.Errorf("%d hosts, want %d", n, DefaultPeopleHosts)
	}
	if n := len(peopleRows(t, w)); n != DefaultPeopleRecords {
		t.Errorf("%d records, want %d", n, DefaultPeopleRecords)
	}
	if PeopleRecords(nil) != nil || PeopleTruth(nil, PeopleCrawl{}) != nil {
		t.Error("PeopleRecords or PeopleTruth of nil is not nil")
	}
	if small := startSmall(t, Options{}); PeopleRecords(small) != nil || PeopleTruth(small, PeopleCrawl{Depth: 2}) != nil {
		t.Error("PeopleRecords or PeopleTruth of a web not started by StartPeople is not nil")
	}
	c := newClient(t, startPeople(t, PeopleOptions{Hosts: 2, Pages: 2, Records: 4, CrawlDelay: 50 * time.Millisecond}))
	if g := get(t, c, "GET", "http://folk-0002.example/robots.txt", "", ""); g.body != "User-agent: *\nCrawl-delay: 0.05\nDisallow: /private/\n" {
		t.Errorf("robots.txt %q", g.body)
	}
	if g := get(t, c, "GET", "http://folk-0001.example/", "folk-0003.example", ""); g.status != 404 {
		t.Errorf("Host folk-0003.example: status %d, want 404", g.status)
	}
	for _, u := range []string{"http://folk-0001.example/team/x", "http://folk-0001.example/people/nobody",
		"http://folk-0001.example/team/01", "http://folk-0001.example/home/"} {
		if g := get(t, c, "GET", u, "", ""); g.status != 404 {
			t.Errorf("%s: status %d, want 404", u, g.status)
		}
	}
}

// TestPeopleWebShape checks the model holds every case the people web is
// for: all five layouts, every kind of record, profiles reachable only
// through someone else's profile (found at depth 2, not 1), some of them
// on team pages too, team pages many records reach, and records that no
// correct crawl fills.
func TestPeopleWebShape(t *testing.T) {
	w := startPeople(t, PeopleOptions{})
	s := w.people
	kinds := map[peopleKind]int{}
	layouts := map[string]int{}
	for _, r := range s.records {
		kinds[r.kind]++
		layouts[s.person(r.person).layout]++
	}
	for k := kindHome; k <= kindDead; k++ {
		if kinds[k] == 0 {
			t.Errorf("no record of kind %d: %v", k, kinds)
		}
	}
	for _, l := range PeopleLayouts {
		if layouts[l] < len(s.records)/10 {
			t.Errorf("layout %s for %d records of %d", l, layouts[l], len(s.records))
		}
	}
	t1 := PeopleTruth(w, PeopleCrawl{Depth: 1})
	t2 := PeopleTruth(w, PeopleCrawl{Depth: 2})
	t3 := PeopleTruth(w, PeopleCrawl{Depth: 3, Render: true})
	filled := func(truth map[string]map[string]string, id string) bool {
		for _, v := range truth[id] {
			if v != "" {
				return true
			}
		}
		return false
	}
	onTeam := map[int]bool{}
	for _, tm := range s.teams {
		for _, p := range tm.members {
			onTeam[p] = true
		}
	}
	teamReach := map[string]int{}
	var throughOther, alsoOnTeam int
	for _, r := range s.records {
		js := s.person(r.person).layout == LayoutJS
		switch r.kind {
		case kindColleague:
			if filled(t1, r.id) {
				t.Errorf("%s (colleague) filled at depth 1", r.id)
			}
			if filled(t2, r.id) != !js {
				t.Errorf("%s (colleague, js %v) filled at depth 2: %v", r.id, js, filled(t2, r.id))
			}
			throughOther++
			if onTeam[r.person] {
				alsoOnTeam++
			}
		case kindTooDeep:
			if filled(t2, r.id) || !filled(t3, r.id) {
				t.Errorf("%s (too deep) filled at depth 2 %v, at depth 3 %v", r.id, filled(t2, r.id), filled(t3, r.id))
			}
		case kindPrivate, kindDead:
			if filled(t3, r.id) {
				t.Errorf("%s (kind %d) filled", r.id, r.kind)
			}
		case kindTeam:
			teamReach[r.link]++
			fallthrough
		default:
			if filled(t2, r.id) != !js || !filled(t3, r.id) {
				t.Errorf("%s (kind %d, js %v) filled at depth 2: %v", r.id, r.kind, js, filled(t2, r.id))
			}
		}
	}
	if throughOther == 0 || alsoOnTeam == 0 || alsoOnTeam == throughOther {
		t.Errorf("%d profiles reachable only through another's, %d of them also on a team page", throughOther, alsoOnTeam)
	}
	shared := 0
	for _, n := range teamReach {
		if n > 1 {
			shared++
		}
	}
	if shared == 0 {
		t.Errorf("no team page is the link of several records: %v", teamReach)
	}
	n1, n2 := 0, 0
	for id := range t2 {
		if filled(t2, id) {
			n2++
		}
		if filled(t3, id) {
			n1++
		}
	}
	t.Logf("records filled: %d of %d at depth 2 without rendering, %d at depth 3 with", n2, len(t2), n1)
	if n2 == len(t2) || n2 < len(t2)/2 {
		t.Errorf("%d of %d records findable at depth 2", n2, len(t2))
	}
}

// refPage is a page as the reference crawl saw it.
type refPage struct {
	fetched bool              // robots.txt allows it, so it was requested
	ok      bool              // it answered 200
	fields  map[string]string // first value of each field
	links   []string
}

// refCrawler fetches the pages of a running people web as the reference
// crawl does: robots.txt read from the web itself, the real mappings,
// every page once.
type refCrawler struct {
	t      *testing.T
	client *http.Client
	set    *etl.Set
	robots map[string][]string // host → disallowed prefixes
	pages  map[string]*refPage
}

func newRefCrawler(t *testing.T, w *Web) *refCrawler {
	return &refCrawler{t: t, client: newClient(t, w), set: peopleSet(t), robots: map[string][]string{}, pages: map[string]*refPage{}}
}

func (c *refCrawler) fetch(u string) *refPage {
	if p, ok := c.pages[u]; ok {
		return p
	}
	p := &refPage{}
	c.pages[u] = p
	pu, err := url.Parse(u)
	if err != nil {
		c.t.Fatal(err)
	}
	dis, ok := c.robots[pu.Host]
	if !ok {
		g := get(c.t, c.client, "GET", "http://"+pu.Host+"/robots.txt", "", "")
		for _, line := range strings.Split(g.body, "\n") {
			if v, ok := strings.CutPrefix(line, "Disallow: "); ok {
				dis = append(dis, v)
			}
		}
		c.robots[pu.Host] = dis
	}
	for _, d := range dis {
		if strings.HasPrefix(pu.Path, d) {
			return p
		}
	}
	g := get(c.t, c.client, "GET", u, "", "")
	p.fetched = true
	if g.status != 200 {
		return p
	}
	ex := c.set.Extract(u, []byte(g.body), "text/html")
	p.ok, p.fields = true, map[string]string{}
	if ex != nil {
		for _, f := range ex.Fields {
			if _, dup := p.fields[f.Field]; !dup && len(f.Values) > 0 {
				p.fields[f.Field] = f.Values[0]
			}
		}
		p.links = append(append(p.links, ex.Links...), ex.OutLinks...)
	}
	return p
}

// TestPeopleTruthIsWhatACrawlFinds crawls the running people web breadth
// first from every record's link, as a crawler with the rules PeopleTruth
// states does (robots.txt read from the web itself, the real mappings,
// every link followed, the match key compared after folding), and checks
// PeopleTruth against what it found, at depths 1, 2 and 3 and with hosts
// down. JavaScript profiles are checked apart (below): a plain fetch shows
// none of their values.
func TestPeopleTruthIsWhatACrawlFinds(t *testing.T) {
	w := startPeople(t, PeopleOptions{Hosts: 40, Pages: 5, Records: 150})
	ref := newRefCrawler(t, w)
	rows := peopleRows(t, w)
	for _, depth := range []int{1, 2, 3} {
		truth := PeopleTruth(w, PeopleCrawl{Depth: depth})
		for _, r := range rows {
			got := map[string]string{}
			for f, v := range r.fields {
				if v == "" {
					got[f] = ""
				}
			}
			seen := map[string]bool{r.link: true}
			level := []string{r.link}
		crawl:
			for d := 0; d <= depth; d++ {
				var next []string
				for _, u := range level {
					p := ref.fetch(u)
					if !p.ok {
						continue
					}
					if name := p.fields["name"]; name != "" && fold(name) == fold(r.name) {
						for f := range got {
							got[f] = p.fields[f]
						}
						break crawl
					}
					for _, l := range p.links {
						if !seen[l] {
							seen[l] = true
							next = append(next, l)
						}
					}
				}
				level = next
			}
			want := truth[r.id]
			if len(want) != len(got) {
				t.Errorf("depth %d, %s: truth %v, crawl %v", depth, r.id, want, got)
				continue
			}
			for f, v := range got {
				if want[f] != v {
					t.Errorf("depth %d, %s.%s: truth %q, crawl %q", depth, r.id, f, want[f], v)
				}
			}
		}
	}
	for u, p := range ref.pages {
		if strings.Contains(u, "/private/") && p.ok {
			t.Errorf("reference crawl fetched %s", u)
		}
	}
	for _, r := range w.Log() {
		if strings.HasPrefix(r.Path, "/private/") {
			t.Errorf("%s%s requested", r.Host, r.Path)
		}
	}
}

// TestPeopleProfilesMatchTheModel fetches every profile of a people web
// and runs the five mappings on it: on a page of a static layout exactly
// one mapping finds the person's name, title, location and email (when
// they give one) as the model has them, and the other four find nothing;
// on a JavaScript profile none finds anything, none of the values is in
// the HTML, and the data its script decodes is the model's.
func TestPeopleProfilesMatchTheModel(t *testing.T) {
	w := startPeople(t, PeopleOptions{Hosts: 10, Pages: 10, Records: 60})
	s := w.people
	client := newClient(t, w)
	set := peopleSet(t)
	scriptData := regexp.MustCompile(`atob\('([A-Za-z0-9+/=]+)'\)`)
	seenLayout := map[string]int{}
	for p := range s.hostCount * s.pageCount {
		m := s.person(p)
		seenLayout[m.layout]++
		g := get(t, client, "GET", m.url(), "", "")
		if g.status != 200 {
			t.Fatalf("%s: status %d", m.url(), g.status)
		}
		ex := set.Extract(m.url(), []byte(g.body), "text/html")
		if ex == nil || len(ex.Mappings) != len(PeopleLayouts) {
			t.Fatalf("%s: mappings matched %v, want all five", m.url(), ex)
		}
		byMapping := map[string]map[string]string{}
		for _, f := range ex.Fields {
			if byMapping[f.Mapping] == nil {
				byMapping[f.Mapping] = map[string]string{}
			}
			byMapping[f.Mapping][f.Field] = strings.Join(f.Values, "|")
			if f.Field == "name" && !f.Match {
				t.Errorf("%s: %s/name is not a match key", m.url(), f.Mapping)
			}
		}
		if len(ex.Errors) > 0 {
			t.Errorf("%s: extraction errors %v", m.url(), ex.Errors)
		}
		if m.layout == LayoutJS {
			if len(byMapping) != 0 {
				t.Errorf("%s (js): static HTML gave %v", m.url(), byMapping)
			}
			for _, v := range []string{m.name, m.title, m.location} {
				if strings.Contains(g.body, v) {
					t.Errorf("%s (js): %q is in the HTML", m.url(), v)
				}
			}
			sm := scriptData.FindStringSubmatch(g.body)
			if sm == nil {
				t.Fatalf("%s (js): no data in the script:\n%s", m.url(), g.body)
			}
			raw, err := base64.StdEncoding.DecodeString(sm[1])
			var data map[string]string
			if err == nil {
				err = json.Unmarshal(raw, &data)
			}
			if err != nil || data["name"] != m.name || data["title"] != m.title || data["location"] != m.location || data["email"] != m.email {
				t.Errorf("%s (js): script data %v (%v), want %+v", m.url(), data, err, m)
			}
			for _, want := range []string{`<div id="root"></div>`, "<noscript>", `href="/favicon.ico"`, "/img/portrait-" + m.slug + ".png"} {
				if !strings.Contains(g.body, want) {
					t.Errorf("%s (js): no %s", m.url(), want)
				}
			}
			continue
		}
		want := map[string]string{"name": m.name, "title": m.title, "location": m.location}
		if m.email != "" {
			want["email"] = m.email
		}
		mapping := "folk-" + m.layout
		if len(byMapping) != 1 || byMapping[mapping] == nil {
			t.Errorf("%s (%s): fields by mapping %v, want only %s's", m.url(), m.layout, byMapping, mapping)
			continue
		}
		got := byMapping[mapping]
		if len(got) != len(want) {
			t.Errorf("%s (%s): fields %v, want %v", m.url(), m.layout, got, want)
		}
		for f, v := range want {
			if got[f] != v {
				t.Errorf("%s (%s): %s = %q, want %q", m.url(), m.layout, f, got[f], v)
			}
		}
	}
	for _, l := range PeopleLayouts {
		if seenLayout[l] == 0 {
			t.Errorf("no profile in layout %s", l)
		}
	}
}

// TestStructuredPeopleProfilesMatchTheModel: on a structured people web
// no profile needs a browser; the blob and JSON-LD profiles hold a
// location only in pieces (nowhere whole), and on every profile exactly
// one of StructuredPeopleMappings finds the model's values.
func TestStructuredPeopleProfilesMatchTheModel(t *testing.T) {
	w := startPeople(t, PeopleOptions{Hosts: 10, Pages: 10, Records: 60, Structured: true})
	s := w.people
	client := newClient(t, w)
	set, err := etl.Load(StructuredPeopleMappings())
	if err != nil {
		t.Fatal(err)
	}
	seenLayout := map[string]int{}
	for p := range s.hostCount * s.pageCount {
		m := s.person(p)
		seenLayout[m.layout]++
		g := get(t, client, "GET", m.url(), "", "")
		if g.status != 200 {
			t.Fatalf("%s: status %d", m.url(), g.status)
		}
		if (m.layout == LayoutBlob || m.layout == LayoutJSONLD) && strings.Contains(g.body, m.location) {
			t.Errorf("%s (%s): the location %q is whole on the page", m.url(), m.layout, m.location)
		}
		want := map[string]string{"name": m.name, "title": m.title, "location": m.location}
		if m.email != "" {
			want["email"] = m.email
		}
		got := map[string]map[string]string{}
		for _, f := range set.Extract(m.url(), []byte(g.body), "text/html").Fields {
			if got[f.Mapping] == nil {
				got[f.Mapping] = map[string]string{}
			}
			got[f.Mapping][f.Field] = strings.Join(f.Values, "|")
		}
		if mapping := "folk-" + m.layout; len(got) != 1 || !reflect.DeepEqual(got[mapping], want) {
			t.Errorf("%s (%s): fields by mapping %v, want only %s's %v", m.url(), m.layout, got, mapping, want)
		}
	}
	for _, l := range []string{LayoutList, LayoutTable, LayoutProse, LayoutBlob, LayoutJSONLD} {
		if seenLayout[l] == 0 {
			t.Errorf("no profile in layout %s", l)
		}
	}
	if seenLayout[LayoutJS] > 0 {
		t.Errorf("%d JavaScript profiles on a structured web", seenLayout[LayoutJS])
	}
}

// TestPeopleJSProfilesRender loads JavaScript profiles in a real Chromium
// and runs the folk-js mapping on the DOM the script wrote: it finds the
// person's values. The browser also asks for the portrait image, which a
// crawler that renders must keep polite or block.
func TestPeopleJSProfilesRender(t *testing.T) {
	proctest.Short(t, "starts a browser")
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		proctest.NoChromium(t, "no Chromium on PATH (Debian package chromium): this test needs one")
	}
	w := startPeople(t, PeopleOptions{Hosts: 5, Pages: 6, Records: 10})
	s := w.people
	set := peopleSet(t)
	var js []peopleMember
	for p := range s.hostCount * s.pageCount {
		if m := s.person(p); m.layout == LayoutJS && !m.private && len(js) < 2 {
			js = append(js, m)
		}
	}
	if len(js) == 0 {
		t.Fatal("no JavaScript profile")
	}
	dir := t.TempDir()
	opts := append([]chromedp.ExecAllocatorOption(nil), chromedp.DefaultExecAllocatorOptions[:]...)
	opts = append(opts, chromedp.ExecPath(browser), chromedp.UserDataDir(dir),
		chromedp.Flag("host-resolver-rules", "MAP * "+w.Addr()),
		chromedp.Flag("disable-background-networking", true))
	if os.Getuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	for _, m := range js {
		if err := chromedp.Do(ctx, chromedp.Navigate(m.url()), chromedp.WaitVisible(`section.card`)); err != nil {
			t.Fatalf("render %s: %v", m.url(), err)
		}
		html, err := chromedp.Run(ctx, chromedp.OuterHTML(`html`))
		if err != nil {
			t.Fatalf("render %s: %v", m.url(), err)
		}
		ex := set.Extract(m.url(), []byte(html), "text/html")
		got := map[string]string{}
		for _, f := range ex.Fields {
			if f.Mapping != "folk-js" {
				t.Errorf("%s: rendered page gave %s/%s", m.url(), f.Mapping, f.Field)
			}
			got[f.Field] = f.Values[0]
		}
		want := map[string]string{"name": m.name, "title": m.title, "location": m.location}
		if m.email != "" {
			want["email"] = m.email
		}
		for f, v := range want {
			if got[f] != v {
				t.Errorf("%s rendered: %s = %q, want %q", m.url(), f, got[f], v)
			}
		}
	}
	cancel()
	asked := map[string]bool{}
	for _, r := range w.Log() {
		asked[r.Path] = true
	}
	for _, m := range js {
		if !asked["/img/portrait-"+m.slug+".png"] {
			t.Errorf("the browser did not ask for %s's portrait; requests: %v", m.slug, asked)
		}
	}
}

// TestSetDown checks that a host taken down is refused at the TCP level
// under Resolve, comes back when brought up, and that SetDown refuses a
// host the web does not serve.
func TestSetDown(t *testing.T) {
	w := startPeople(t, PeopleOptions{Hosts: 3, Pages: 2, Records: 3})
	host := "folk-0002.example"
	if err := w.SetDown(host, true); err != nil {
		t.Fatal(err)
	}
	if err := w.SetDown("nowhere.example", true); err == nil {
		t.Error("SetDown of an unknown host accepted")
	}
	r := w.Resolve()
	if r[host+":80"] == w.Addr() || r["folk-0001.example:80"] != w.Addr() {
		t.Fatalf("Resolve with %s down: %v", host, r)
	}
	_, err := net.DialTimeout("tcp", r[host+":80"], time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s while down: %v, want connection refused", host, err)
	}
	c := newClient(t, w)
	if _, err := c.Get("http://" + host + "/"); err == nil {
		t.Errorf("GET on a host that is down succeeded")
	}
	if err := w.SetDown(host, false); err != nil {
		t.Fatal(err)
	}
	if r := w.Resolve(); r[host+":80"] != w.Addr() {
		t.Errorf("Resolve after SetDown false: %v", r)
	}
	if g := get(t, newClient(t, w), "GET", "http://"+host+"/", "", ""); g.status != 200 {
		t.Errorf("host brought back up: status %d", g.status)
	}
	// The truth of a crawl with the host down loses what only it holds.
	all := PeopleTruth(w, PeopleCrawl{Depth: 2})
	less := PeopleTruth(w, PeopleCrawl{Depth: 2, Down: []string{"folk-0001.example", host, "folk-0003.example"}})
	for id, fields := range less {
		for f, v := range fields {
			if v != "" {
				t.Errorf("%s.%s = %q with every host down", id, f, v)
			}
		}
		if len(fields) != len(all[id]) {
			t.Errorf("%s: targets %v with hosts down, %v without", id, fields, all[id])
		}
	}
}

// BenchmarkStartPeople measures building a large people web (the size a
// benchmark crawls): the model, not the pages, is made up front.
func BenchmarkStartPeople(b *testing.B) {
	for b.Loop() {
		w, err := StartPeople(PeopleOptions{Hosts: 400, Pages: 200, Records: 60000})
		if err != nil {
			b.Fatal(err)
		}
		w.Close()
	}
}

// TestPeopleLeastPages holds PeopleLeastPages to a crawl of the served
// pages: every record's links followed to the depth (all), and for a
// record whose targets all have values only the shortest path to the
// page naming its person (least).
func TestPeopleLeastPages(t *testing.T) {
	w := startPeople(t, PeopleOptions{Hosts: 30, Pages: 6, Records: 120})
	ref := newRefCrawler(t, w)
	const depth = 2
	truth := PeopleTruth(w, PeopleCrawl{Depth: depth})
	need, every := map[string]bool{}, map[string]bool{}
	for _, r := range peopleRows(t, w) {
		complete := true
		for _, v := range truth[r.id] {
			complete = complete && v != ""
		}
		profile, _ := PeopleProfileURL(w, r.id)
		parent := map[string]string{r.link: ""}
		level := []string{r.link}
		for d := 0; d <= depth; d++ {
			var next []string
			for _, u := range level {
				p := ref.fetch(u)
				if !p.fetched {
					continue
				}
				every[u] = true
				if !complete {
					need[u] = true
				}
				if d == depth {
					continue
				}
				for _, l := range p.links {
					if _, seen := parent[l]; !seen {
						parent[l] = u
						next = append(next, l)
					}
				}
			}
			level = next
		}
		if complete {
			if _, ok := parent[profile]; !ok {
				t.Fatalf("%s: complete in the truth, but its profile %s is not within depth %d", r.id, profile, depth)
			}
			for u := profile; u != ""; u = parent[u] {
				need[u] = true
			}
		}
	}
	least, all := PeopleLeastPages(w, PeopleCrawl{Depth: depth})
	if least != len(need) || all != len(every) || least >= all {
		t.Errorf("PeopleLeastPages = %d of %d; the served web: %d of %d", least, all, len(need), len(every))
	}
}
