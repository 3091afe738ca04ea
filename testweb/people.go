package testweb

import (
	"bytes"
	"embed"
	"encoding/csv"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

// The people web: a generated web of people's profile pages in five
// layouts, with records whose profile is one or two links away from the
// record's own link, for tests and benchmarks of what a crawl finds.
//
// Every host folk-NNNN.example (each its own registrable domain) serves
//
//	/robots.txt             User-agent: *, the Crawl-delay asked for, and
//	                        Disallow: /private/
//	/                       an index of the host's public profiles
//	/people/SLUG            a profile in one of the five layouts, linking to
//	                        the index and to the profiles it names under
//	                        "See also"
//	/private/people/SLUG    a profile only members see: disallowed
//	/home/SLUG              a person's homepage (no mapping matches it),
//	                        the link a record gives
//	/team/N                 a team page linking to several profiles
//	/favicon.ico, /img/…    images, which only a browser asks for
//
// Every profile URL matches one pattern, and the five mappings of
// PeopleMappings, one per layout, all carry that pattern: on any profile
// four of them find nothing. A profile's layout is fixed by its person:
// a labelled list (dl/dt/dd), a table, prose (the values in sentences, the
// email obfuscated), JavaScript (the HTML holds an empty app root and a
// <noscript> notice; a script decodes the values and writes them into the
// DOM, with a portrait image, so only a rendered page shows them) or
// JSON-LD (a schema.org Person block). A structured web
// (PeopleOptions.Structured) replaces the JavaScript layout with a blob
// of data in a <script type="application/json">, and writes a location
// as a city and a country in the blob and the JSON-LD.
//
// Records come in kinds, mixed by a hash of their number:
//
//	home       homepage → profile (depth 1)
//	team       a team page (the record's own link, shared by the records
//	           of the team) → profile (depth 1)
//	colleague  homepage → another person's profile → profile (depth 2);
//	           for half of them the profile is also on a team page, so a
//	           crawl fetches it first on behalf of other records
//	via-team   homepage → team page → profile (depth 2)
//	too-deep   homepage → profile → profile → profile (depth 3)
//	private    homepage → a profile under /private/
//	dead       homepage → a link that answers 404
//
// PeopleTruth computes, from the same model that serves the pages, what a
// correct crawl ends with; nothing in it is written by hand.

// Defaults of PeopleOptions: 100 hosts × 4 profiles, 300 records.
const (
	DefaultPeopleHosts   = 100
	DefaultPeoplePages   = 4
	DefaultPeopleRecords = 300
)

// maxPeople bounds the profiles of a people web: its model holds a few
// words per person.
const maxPeople = 1_000_000

// Layouts of the people web's profiles, in the order people are given
// them (see peopleLayoutOf).
const (
	LayoutList   = "list"   // <dl> of <dt>/<dd> pairs
	LayoutTable  = "table"  // <table> of <th>/<td> rows
	LayoutProse  = "prose"  // sentences; the email obfuscated
	LayoutJS     = "js"     // written into the DOM by a script
	LayoutJSONLD = "jsonld" // a schema.org Person in JSON-LD
	// LayoutBlob takes the JavaScript layout's place on a structured
	// web (PeopleOptions.Structured): the page carries its data in a
	// <script type="application/json"> blob, as server-rendered apps
	// do, and a crawl reads it without a browser.
	LayoutBlob = "blob"
)

// PeopleLayouts lists the layouts.
var PeopleLayouts = []string{LayoutList, LayoutTable, LayoutProse, LayoutJS, LayoutJSONLD}

// PeopleFields are the fields a profile gives besides the name (the match
// key), the record columns the crawl fills.
var PeopleFields = []string{"title", "location", "email"}

// PeopleOptions configures the web started by StartPeople.
type PeopleOptions struct {
	Hosts   int // hosts, default DefaultPeopleHosts
	Pages   int // profiles per host, default DefaultPeoplePages
	Records int // records of PeopleRecords, default DefaultPeopleRecords; at most Hosts × Pages
	// CrawlDelay, when positive, is written into every host's robots.txt
	// (fractions of a second kept, e.g. 0.05).
	CrawlDelay time.Duration
	Latency    time.Duration // added before every response
	Logger     *slog.Logger  // the HTTP server's own errors; nil discards
	// Addr is the address to listen at; "" picks a free port on
	// 127.0.0.1. A crawl that finds the hosts by DNS needs port 80.
	Addr string
	// Structured makes the web publish as sites with structured data
	// do: the JavaScript layout's people have a LayoutBlob profile
	// instead, and the JSON-LD and blob layouts give a location in
	// pieces (a city and a country, joined ", " in the records and the
	// truth). StructuredPeopleMappings extract it.
	Structured bool
	// DeadSites, when positive, makes every profile link to its
	// person's own website, one of DeadSites host names
	// (DeadSiteName) that exist nowhere, as people's pages on the web
	// link to sites long gone.
	DeadSites int
}

// DeadSiteName is the host name of dead site i (PeopleOptions.DeadSites).
func DeadSiteName(i int) string { return fmt.Sprintf("www.own-site-%04d.example", i+1) }

// StartPeople starts the people web on 127.0.0.1 at a free port. Pages are
// generated on request from a model of a few small tables (who is where,
// who links to whom), so a benchmark can make it large (400 hosts × 200
// profiles) at little memory cost.
func StartPeople(opts PeopleOptions) (*Web, error) {
	if opts.Hosts == 0 {
		opts.Hosts = DefaultPeopleHosts
	}
	if opts.Pages == 0 {
		opts.Pages = DefaultPeoplePages
	}
	if opts.Records == 0 {
		opts.Records = min(DefaultPeopleRecords, opts.Hosts*opts.Pages)
	}
	switch {
	case opts.Hosts < 1 || opts.Hosts > 9999 || opts.Pages < 1 || opts.Pages > 9999:
		return nil, fmt.Errorf("testweb: people web of %d hosts × %d pages: each must be 1..9999", opts.Hosts, opts.Pages)
	case opts.Hosts*opts.Pages > maxPeople:
		return nil, fmt.Errorf("testweb: people web of %d profiles: at most %d", opts.Hosts*opts.Pages, maxPeople)
	case opts.Records < 1 || opts.Records > opts.Hosts*opts.Pages:
		return nil, fmt.Errorf("testweb: %d people records: must be 1..%d (hosts × pages)", opts.Records, opts.Hosts*opts.Pages)
	case opts.Hosts*opts.Pages < 4:
		return nil, fmt.Errorf("testweb: people web of %d profiles: at least 4 are needed", opts.Hosts*opts.Pages)
	case opts.Latency < 0:
		return nil, fmt.Errorf("testweb: negative latency %s", opts.Latency)
	case opts.CrawlDelay < 0:
		return nil, fmt.Errorf("testweb: negative Crawl-delay %s", opts.CrawlDelay)
	}
	s := newPeopleSite(opts)
	w, err := start(s, opts.Addr, opts.Latency, opts.Logger)
	if err != nil {
		return nil, err
	}
	w.people = s
	return w, nil
}

// PeopleCrawl describes a crawl of the people web, for PeopleTruth.
type PeopleCrawl struct {
	Depth  int      // link depth limit: the record's own link is depth 0
	Render bool     // JavaScript runs (a render-capable supervisor took part)
	Down   []string // hosts that could not be reached during the crawl
}

// PeopleRecords returns the records CSV of a web started by StartPeople
// (nil for any other web): header id, name, title, location, email, link.
// Each record names its person (a few in another case and spacing, which
// the match key ignores) and lacks title, location and email, except that
// every tenth record already knows its location, which must stay as it
// is. link is the record's one link.
func PeopleRecords(w *Web) []byte {
	if w == nil || w.people == nil {
		return nil
	}
	s := w.people
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	cw.Write([]string{"id", "name", "title", "location", "email", "link"})
	for i := range s.records {
		r := &s.records[i]
		p := s.person(r.person)
		name := p.name
		if r.variant {
			name = strings.ToLower(strings.ReplaceAll(name, " ", "  "))
		}
		loc := ""
		if r.knowsLocation {
			loc = p.location
		}
		cw.Write([]string{r.id, name, "", loc, "", r.link})
	}
	cw.Flush()
	return b.Bytes()
}

// PeopleTruth returns, per record id, the value each target field of the
// record (title, location and email, less what the record already has)
// holds after a correct crawl c of a web started by StartPeople (nil for
// any other web). "" marks a target that stays unfilled. It is computed
// by crawling the web's own model breadth first from each record's link:
// pages under /private/ and pages of c.Down hosts are never seen, links
// are followed to c.Depth whatever page they are on (a page about someone
// else is not a dead end), a profile's values go to the record only when
// its name is the record's, and a JavaScript profile shows its values
// only when c.Render. Every person has one profile, so which page a
// value came from cannot change it.
func PeopleTruth(w *Web, c PeopleCrawl) map[string]map[string]string {
	if w == nil || w.people == nil {
		return nil
	}
	s := w.people
	down := make(map[string]bool, len(c.Down))
	for _, h := range c.Down {
		down[canonicalHost(h)] = true
	}
	truth := make(map[string]map[string]string, len(s.records))
	for i := range s.records {
		r := &s.records[i]
		p := s.person(r.person)
		found := s.reaches(r.link, r.person, c, down)
		t := make(map[string]string)
		for _, f := range PeopleFields {
			if f == "location" && r.knowsLocation {
				continue
			}
			t[f] = ""
			if found {
				t[f] = p.field(f)
			}
		}
		truth[r.id] = t
	}
	return truth
}

// PeopleLeastPages returns how many pages a crawl c of a web started by
// StartPeople fetches when it follows every record's links to c.Depth
// (all: what a crawler that does not track records fetches), and the
// fewest a crawl needs to fill what PeopleTruth fills (least). A record
// whose every target field has a value needs only the pages on a
// shortest path from its link to its profile; any other record needs
// every page it reaches, since no crawler can know a value is missing
// before it has looked everywhere. Pages robots.txt disallows are not
// fetched; a link that answers 404 is. It bounds what stopping each
// record when it is complete can save on this web.
func PeopleLeastPages(w *Web, c PeopleCrawl) (least, all int) {
	if w == nil || w.people == nil {
		return 0, 0
	}
	s := w.people
	down := make(map[string]bool, len(c.Down))
	for _, h := range c.Down {
		down[canonicalHost(h)] = true
	}
	truth := PeopleTruth(w, c)
	need, every := make(map[string]bool), make(map[string]bool)
	for i := range s.records {
		r := &s.records[i]
		complete := true
		for _, v := range truth[r.id] {
			complete = complete && v != ""
		}
		parent := map[string]string{r.link: ""}
		level := []string{r.link}
		profile := ""
		for depth := 0; depth <= c.Depth && len(level) > 0; depth++ {
			var next []string
			for _, u := range level {
				host, p, ok := s.split(u)
				if !ok || down[peopleHost(host)] {
					continue
				}
				pg := s.page(host, p)
				if pg.disallowed {
					continue
				}
				every[u] = true
				if !complete {
					need[u] = true
				}
				if pg.person == r.person && profile == "" {
					profile = u
				}
				if depth == c.Depth {
					continue
				}
				for _, l := range pg.links {
					if _, seen := parent[l]; !seen {
						parent[l] = u
						next = append(next, l)
					}
				}
			}
			level = next
		}
		if complete {
			for u := profile; u != ""; u = parent[u] {
				need[u] = true
			}
		}
	}
	return len(need), len(every)
}

// PeopleProfileURL returns the URL of the profile of the person record id
// is about, public or private, and its layout; "" when w is not a people
// web or knows no such record.
func PeopleProfileURL(w *Web, id string) (url, layout string) {
	if w == nil || w.people == nil {
		return "", ""
	}
	for i := range w.people.records {
		if r := &w.people.records[i]; r.id == id {
			p := w.people.person(r.person)
			return p.url(), p.layout
		}
	}
	return "", ""
}

//go:embed testdata/people-mappings/*.json testdata/people-structured/*.json
var peopleMappingFS embed.FS

// PeopleMappings returns the five mappings of the people web, one per
// layout, all matching the same profile URL pattern, as file name → JSON
// in the bundled mappings' format (write them into a directory for
// --mappings, or give them to etl.Load). Each call returns fresh copies.
func PeopleMappings() map[string][]byte { return peopleMappings("testdata/people-mappings") }

// StructuredPeopleMappings returns the five mappings of a structured
// people web (PeopleOptions.Structured), as PeopleMappings does: those
// of the labelled list, the table and prose, and those of the blob and
// of JSON-LD in pieces, which concat a location's city and country.
func StructuredPeopleMappings() map[string][]byte {
	out := PeopleMappings()
	delete(out, "folk-js.json")
	for name, b := range peopleMappings("testdata/people-structured") {
		out[name] = b
	}
	return out
}

func peopleMappings(dir string) map[string][]byte {
	out := make(map[string][]byte)
	err := fs.WalkDir(peopleMappingFS, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := peopleMappingFS.ReadFile(p)
		out[path.Base(p)] = b
		return err
	})
	if err != nil {
		panic("testweb: embedded people mappings: " + err.Error()) // cannot happen: embedded at build time
	}
	return out
}

// The model.

type peopleKind int

const (
	kindHome peopleKind = iota
	kindTeam
	kindColleague
	kindViaTeam
	kindTooDeep
	kindPrivate
	kindDead
)

// peopleKindOf mixes the kinds: of every 20 records about 5 are home, 5
// team, 5 colleague, 2 via-team and one each too-deep, private and dead.
func peopleKindOf(r int) peopleKind {
	switch k := mix(uint64(r)*2+1) % 20; {
	case k < 5:
		return kindHome
	case k < 10:
		return kindTeam
	case k < 15:
		return kindColleague
	case k < 17:
		return kindViaTeam
	case k == 17:
		return kindTooDeep
	case k == 18:
		return kindPrivate
	}
	return kindDead
}

// mix is a 64-bit finalizer (splitmix64's): consecutive inputs give
// unrelated outputs, so layouts, kinds and missing values do not line up.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

type peopleRecord struct {
	id            string
	person        int
	kind          peopleKind
	link          string // the record's own link
	variant       bool   // its name is written in another case and spacing
	knowsLocation bool
}

// peopleTeam is a team page: /team/N on host.
type peopleTeam struct {
	host    int
	members []int
}

type peopleSite struct {
	hostCount, pageCount int
	deadSites            int
	structured           bool
	robots               []byte

	records []peopleRecord
	private map[int]bool        // people whose only profile is under /private/
	seeAlso map[int][]int       // person → people their profile links to
	homes   map[string][]string // "host/slug" → links of the homepage
	teams   []peopleTeam
	bySlug  map[string]int // slug → person
}

func peopleHost(i int) string { return fmt.Sprintf("folk-%04d.example", i+1) }

func newPeopleSite(o PeopleOptions) *peopleSite {
	robots := "User-agent: *\n"
	if o.CrawlDelay > 0 {
		robots += "Crawl-delay: " + strconv.FormatFloat(o.CrawlDelay.Seconds(), 'f', -1, 64) + "\n"
	}
	robots += "Disallow: /private/\n"
	s := &peopleSite{
		hostCount: o.Hosts, pageCount: o.Pages, deadSites: o.DeadSites, structured: o.Structured, robots: []byte(robots),
		private: make(map[int]bool),
		seeAlso: make(map[int][]int),
		homes:   make(map[string][]string),
		bySlug:  make(map[string]int, o.Hosts*o.Pages),
	}
	n := o.Hosts * o.Pages
	for p := range n {
		s.bySlug[s.person(p).slug] = p
	}
	// Records are about people spread over the hosts by a stride prime to
	// their number; the people no record is about are decoys and
	// colleagues, taken in turn.
	step := max(n*618/1000, 1)
	for gcd(step, n) != 1 {
		step++
	}
	order := func(i int) int { return i * step % n }
	spare := n - o.Records
	nextSpare := 0
	other := func(not ...int) int {
		for {
			var p int
			if spare > 0 {
				p = order(o.Records + nextSpare%spare)
			} else {
				p = order(nextSpare % n)
			}
			nextSpare++
			clash := false
			for _, q := range not {
				clash = clash || p == q
			}
			if !clash {
				return p
			}
		}
	}
	var teamed, colleagues []int // people to put on team pages
	for r := range o.Records {
		p := order(r)
		rec := peopleRecord{id: fmt.Sprintf("f%04d", r+1), person: p, kind: peopleKindOf(r),
			variant: r%7 == 3, knowsLocation: r%10 == 9}
		s.records = append(s.records, rec)
		switch rec.kind {
		case kindTeam, kindViaTeam:
			teamed = append(teamed, p)
		case kindColleague:
			colleagues = append(colleagues, p)
		case kindPrivate:
			s.private[p] = true // before any URL of theirs is made
		}
	}
	teamOf := s.makeTeams(teamed, colleagues, o.Hosts, other)
	s.linkRecords(teamOf, o.Hosts, other)
	return s
}

// makeTeams puts the people of team-kind records on team pages, four a
// team with one colleague-kind person of every other (fetched for the
// team's records before their own record gets there) and a decoy (other
// picks people no record is about); it returns each member's team.
func (s *peopleSite) makeTeams(teamed, colleagues []int, hosts int, other func(not ...int) int) map[int]int {
	teamOf := make(map[int]int)
	ci := 0
	for i := 0; i < len(teamed); i += 4 {
		t := peopleTeam{host: len(s.teams) % hosts}
		for _, p := range teamed[i:min(i+4, len(teamed))] {
			t.members = append(t.members, p)
			teamOf[p] = len(s.teams)
		}
		if ci < len(colleagues) {
			t.members = append(t.members, colleagues[ci])
			ci += 2
		}
		t.members = append(t.members, other(t.members...))
		s.teams = append(s.teams, t)
	}
	return teamOf
}

// linkRecords gives each record its own link, and the pages between it
// and its profile, by its kind.
func (s *peopleSite) linkRecords(teamOf map[int]int, hosts int, other func(not ...int) int) {
	for i := range s.records {
		r := &s.records[i]
		p := s.person(r.person)
		home := peopleHost((p.host + 1) % hosts)
		homeURL := "http://" + home + "/home/" + p.slug
		var links []string
		switch r.kind {
		case kindHome:
			links = []string{p.url()}
		case kindTeam:
			homeURL = s.teamURL(teamOf[r.person])
		case kindColleague:
			q := other(r.person)
			s.seeAlso[q] = append(s.seeAlso[q], r.person)
			links = []string{s.person(q).url()}
		case kindViaTeam:
			links = []string{s.teamURL(teamOf[r.person])}
		case kindTooDeep:
			q := other(r.person)
			q2 := other(r.person, q)
			s.seeAlso[q] = append(s.seeAlso[q], q2)
			s.seeAlso[q2] = append(s.seeAlso[q2], r.person)
			links = []string{s.person(q).url()}
		case kindPrivate:
			links = []string{p.url()} // under /private/
		case kindDead:
			links = []string{"http://" + peopleHost(p.host) + "/people/" + p.slug + "-old"}
		}
		if links != nil {
			s.homes[home+"/"+p.slug] = links
		}
		r.link = homeURL
	}
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func (s *peopleSite) teamURL(t int) string {
	return "http://" + peopleHost(s.teams[t].host) + "/team/" + strconv.Itoa(t+1)
}

// peopleMember is one person of the people web.
type peopleMember struct {
	index, host                    int
	name, slug                     string
	title, location, email, layout string
	private                        bool
}

var (
	peopleFirst = []string{"Ada", "Bruno", "Chloé", "Dmitri", "Elena", "Farid", "Greta", "Hugo",
		"Inès", "Jonas", "Keiko", "Łukasz", "Maya", "Nils", "Olga", "Pablo", "Quinn", "Rosa",
		"Søren", "Tomas", "Uma", "Viktor", "Wanda", "Yusuf"}
	peopleFirstASCII = []string{"ada", "bruno", "chloe", "dmitri", "elena", "farid", "greta", "hugo",
		"ines", "jonas", "keiko", "lukasz", "maya", "nils", "olga", "pablo", "quinn", "rosa",
		"soren", "tomas", "uma", "viktor", "wanda", "yusuf"}
	peopleSyllable = []string{"ka", "mi", "ro", "ven", "tal", "dor", "sel", "bri", "no", "lu",
		"gan", "ter", "vi", "sa", "mon", "del", "ri", "cas", "ber", "lo"}
	peopleTitle = []string{"data engineer", "urban planner", "statistician", "product designer",
		"translator", "architect", "archivist", "biologist", "economist", "editor", "ecologist",
		"software developer"}
	peopleCity = []string{"Lisbon, Portugal", "Kraków, Poland", "Zürich, Switzerland",
		"São Paulo, Brazil", "Tromsø, Norway", "Montréal, Canada", "Osaka, Japan", "Leeds, UK",
		"Aarhus, Denmark", "Graz, Austria", "Seville, Spain", "Tartu, Estonia", "Hanoi, Vietnam"}
)

// person is person p: the host it lives on (p / pages), a unique name made
// of a first name and a surname of three syllables, its values, and its
// layout.
func (s *peopleSite) person(p int) peopleMember {
	nf, ns := len(peopleFirst), len(peopleSyllable)
	k := p / nf
	sur := peopleSyllable[k%ns] + peopleSyllable[k/ns%ns] + peopleSyllable[k/(ns*ns)%ns]
	if k >= ns*ns*ns {
		sur += strconv.Itoa(k / (ns * ns * ns)) // past 192,000 people the syllables repeat
	}
	m := peopleMember{
		index: p, host: p / s.pageCount,
		name:     peopleFirst[p%nf] + " " + strings.ToUpper(sur[:1]) + sur[1:],
		slug:     peopleFirstASCII[p%nf] + "-" + sur,
		title:    peopleTitle[mix(uint64(p)*3+1)%uint64(len(peopleTitle))],
		location: peopleCity[mix(uint64(p)*3+2)%uint64(len(peopleCity))],
		layout:   PeopleLayouts[mix(uint64(p)*3)%uint64(len(PeopleLayouts))],
		private:  s.private[p],
	}
	if s.structured && m.layout == LayoutJS {
		m.layout = LayoutBlob
	}
	if mix(uint64(p)*5+4)%11 != 3 { // about one in eleven gives no email
		m.email = strings.ReplaceAll(m.slug, "-", ".") + "@" + peopleHost(m.host)
	}
	return m
}

func (m peopleMember) url() string {
	dir := "/people/"
	if m.private {
		dir = "/private/people/"
	}
	return "http://" + peopleHost(m.host) + dir + m.slug
}

func (m peopleMember) field(f string) string {
	switch f {
	case "title":
		return m.title
	case "location":
		return m.location
	case "email":
		return m.email
	}
	return ""
}

// peoplePage is what the model says of a URL: whether it exists, whether
// robots.txt disallows it, the person whose profile it is (-1: none) and
// its links.
type peoplePage struct {
	exists, disallowed bool
	person             int
	links              []string
}

// page looks a host and path up in the model.
func (s *peopleSite) page(host int, p string) peoplePage {
	out := peoplePage{person: -1, disallowed: strings.HasPrefix(p, "/private/")}
	name := peopleHost(host)
	switch {
	case p == "/":
		out.exists = true
		for i := range s.pageCount {
			if m := s.person(host*s.pageCount + i); !m.private {
				out.links = append(out.links, m.url())
			}
		}
	case strings.HasPrefix(p, "/people/") || strings.HasPrefix(p, "/private/people/"):
		slug := p[strings.LastIndexByte(p, '/')+1:]
		q, ok := s.bySlug[slug]
		if !ok {
			return out
		}
		m := s.person(q)
		if m.host != host || m.url() != "http://"+name+p {
			return out
		}
		out.exists, out.person = true, q
		out.links = append(out.links, "http://"+name+"/")
		for _, o := range s.seeAlso[q] {
			out.links = append(out.links, s.person(o).url())
		}
	case strings.HasPrefix(p, "/home/"):
		links, ok := s.homes[name+"/"+strings.TrimPrefix(p, "/home/")]
		out.exists, out.links = ok, links
	case strings.HasPrefix(p, "/team/"):
		t, err := strconv.Atoi(strings.TrimPrefix(p, "/team/"))
		if err != nil || t < 1 || t > len(s.teams) || s.teams[t-1].host != host || strconv.Itoa(t) != strings.TrimPrefix(p, "/team/") {
			return out
		}
		out.exists = true
		for _, q := range s.teams[t-1].members {
			out.links = append(out.links, s.person(q).url())
		}
	}
	return out
}

// reaches reports whether a correct crawl c from link finds the profile of
// person target with its values showing: breadth first to c.Depth, every
// page's links followed, nothing disallowed or on a down host fetched.
func (s *peopleSite) reaches(link string, target int, c PeopleCrawl, down map[string]bool) bool {
	seen := map[string]bool{link: true}
	level := []string{link}
	for depth := 0; depth <= c.Depth && len(level) > 0; depth++ {
		var next []string
		for _, u := range level {
			host, p, ok := s.split(u)
			if !ok || down[peopleHost(host)] {
				continue
			}
			pg := s.page(host, p)
			if !pg.exists || pg.disallowed {
				continue
			}
			if pg.person == target && (c.Render || s.person(target).layout != LayoutJS) {
				return true
			}
			for _, l := range pg.links {
				if !seen[l] {
					seen[l] = true
					next = append(next, l)
				}
			}
		}
		level = next
	}
	return false
}

// split parses "http://folk-NNNN.example/path" into the host index and
// path.
func (s *peopleSite) split(u string) (host int, p string, ok bool) {
	rest, ok := strings.CutPrefix(u, "http://")
	if !ok {
		return 0, "", false
	}
	name, p, _ := strings.Cut(rest, "/")
	h := s.hostIndex(name)
	return h, "/" + p, h >= 0
}

// hostIndex parses "folk-NNNN.example" into its index, or -1.
func (s *peopleSite) hostIndex(name string) int {
	num, ok := strings.CutPrefix(name, "folk-")
	if !ok {
		return -1
	}
	num, ok = strings.CutSuffix(num, ".example")
	if !ok || len(num) != 4 {
		return -1
	}
	i, err := strconv.Atoi(num)
	if err != nil || i < 1 || i > s.hostCount {
		return -1
	}
	return i - 1
}

func (s *peopleSite) hosts() []string {
	h := make([]string, s.hostCount)
	for i := range h {
		h[i] = peopleHost(i)
	}
	return h
}

func (s *peopleSite) serve(hostName, p string) (response, bool) {
	host := s.hostIndex(hostName)
	if host < 0 {
		return response{}, false
	}
	switch {
	case p == "/robots.txt":
		return response{status: http.StatusOK, ctype: textType, body: s.robots}, true
	case p == "/favicon.ico":
		return response{status: http.StatusOK, ctype: "image/x-icon", body: peopleIcon}, true
	case strings.HasPrefix(p, "/img/") && strings.HasSuffix(p, ".png"):
		return response{status: http.StatusOK, ctype: "image/png", body: peopleImage}, true
	}
	pg := s.page(host, p)
	if !pg.exists {
		return notFound(hostName + p), true
	}
	var body string
	switch {
	case pg.person >= 0:
		body = s.profile(s.person(pg.person), pg.links)
	case p == "/":
		body = s.index(hostName, pg.links)
	case strings.HasPrefix(p, "/team/"):
		body = s.team(hostName, p, pg.links)
	default:
		body = s.home(p, pg.links)
	}
	return response{status: http.StatusOK, ctype: htmlType, body: []byte(body)}, true
}
