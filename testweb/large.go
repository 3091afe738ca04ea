package testweb

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// LargeOptions configures the generated web started by StartLarge.
type LargeOptions struct {
	Hosts   int           // number of hosts, default 200
	Pages   int           // profile pages per host, default 100
	Latency time.Duration // added before every response
	Logger  *slog.Logger  // the HTTP server's own errors; nil discards
	// CrawlDelay, when positive, is written into every host's robots.txt
	// as "Crawl-delay: SECONDS" (fractions of a second kept, e.g. 0.5);
	// 0 writes none, as before. Politeness benchmarks use it.
	CrawlDelay time.Duration
}

// Defaults of LargeOptions: 200 hosts × 100 profiles = 20,000 profile pages,
// plus one index page and one robots.txt per host.
const (
	DefaultLargeHosts = 200
	DefaultLargePages = 100
)

// StartLarge starts a generated web for benchmarks: Hosts hosts named
// people-0001.example, people-0002.example, … (each its own registrable
// domain, so they spread over supervisors), each with a robots.txt that
// allows everything and sets no Crawl-delay (unless opts.CrawlDelay asks
// for one), an index page at / linking to
// its Pages profiles /p/0001 … and the profiles themselves in the layout of
// people.example, so the bundled testweb-people mapping extracts name,
// location and email from them. Pages are generated on request; the web
// holds nothing per page but its request log.
//
// A complete crawl of LargeRecords requests Hosts × (Pages + 2) URLs:
// every robots.txt, index and profile exactly once.
func StartLarge(opts LargeOptions) (*Web, error) {
	if opts.Hosts == 0 {
		opts.Hosts = DefaultLargeHosts
	}
	if opts.Pages == 0 {
		opts.Pages = DefaultLargePages
	}
	if opts.Hosts < 0 || opts.Hosts > 9999 || opts.Pages < 0 || opts.Pages > 9999 {
		return nil, fmt.Errorf("testweb: large web of %d hosts × %d pages: each must be 1..9999", opts.Hosts, opts.Pages)
	}
	if opts.Latency < 0 {
		return nil, fmt.Errorf("testweb: negative latency %s", opts.Latency)
	}
	if opts.CrawlDelay < 0 {
		return nil, fmt.Errorf("testweb: negative Crawl-delay %s", opts.CrawlDelay)
	}
	robots := largeRobots
	if opts.CrawlDelay > 0 {
		robots += "Crawl-delay: " + strconv.FormatFloat(opts.CrawlDelay.Seconds(), 'f', -1, 64) + "\n"
	}
	w, err := start(&largeSite{hostCount: opts.Hosts, pageCount: opts.Pages, robots: []byte(robots)}, "", opts.Latency, opts.Logger)
	if err != nil {
		return nil, err
	}
	o := opts
	w.large = &o
	return w, nil
}

// LargeRecords returns the records CSV for a web started by StartLarge (nil
// for any other web): one record per host, whose homepage is the host's
// index page.
//
// Every page must be fetched exactly once within depth 1, so each record
// knows a name that no profile carries ("Directory of people-0001.example")
// and lacks location and email. The index (depth 0) matches no mapping; its
// links reach every profile of the host (depth 1). Each profile yields all
// three fields, but its name never matches the record's, so attribution
// rejects its values, the record never completes and the crawl goes on
// until every profile has been fetched and extracted. No profile links to
// another, and each is linked from one index only, so no page is fetched
// twice; the profiles' links back to the index are already seen.
func LargeRecords(w *Web) []byte {
	if w == nil || w.large == nil {
		return nil
	}
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	cw.Write([]string{"id", "name", "location", "email", "homepage"})
	for h := 1; h <= w.large.Hosts; h++ {
		host := largeHost(h)
		cw.Write([]string{host, "Directory of " + host, "", "", "http://" + host + "/"})
	}
	cw.Flush()
	return b.Bytes()
}

func largeHost(i int) string { return fmt.Sprintf("people-%04d.example", i) }

type largeSite struct {
	hostCount, pageCount int
	robots               []byte // every host's robots.txt
}

func (s *largeSite) hosts() []string {
	h := make([]string, s.hostCount)
	for i := range h {
		h[i] = largeHost(i + 1)
	}
	return h
}

// hostIndex parses "people-NNNN.example" into N, or 0.
func (s *largeSite) hostIndex(host string) int {
	num, ok := strings.CutPrefix(host, "people-")
	if !ok {
		return 0
	}
	num, ok = strings.CutSuffix(num, ".example")
	if !ok || len(num) != 4 {
		return 0
	}
	i, err := strconv.Atoi(num)
	if err != nil || i < 1 || i > s.hostCount {
		return 0
	}
	return i
}

const largeRobots = "User-agent: *\nAllow: /\n"

func (s *largeSite) serve(host, path string) (response, bool) {
	h := s.hostIndex(host)
	if h == 0 {
		return response{}, false
	}
	switch {
	case path == "/robots.txt":
		return response{status: http.StatusOK, ctype: textType, body: s.robots}, true
	case path == "/":
		return response{status: http.StatusOK, ctype: htmlType, body: s.index(host)}, true
	}
	num, ok := strings.CutPrefix(path, "/p/")
	if ok && len(num) == 4 {
		if p, err := strconv.Atoi(num); err == nil && p >= 1 && p <= s.pageCount {
			return response{status: http.StatusOK, ctype: htmlType, body: largeProfile(host, h, p)}, true
		}
	}
	return notFound(host + path), true
}

func (s *largeSite) index(host string) []byte {
	var b bytes.Buffer
	b.Grow(64 * s.pageCount)
	fmt.Fprintf(&b, "<h1>People of %s</h1>\n<ul class=\"index\">\n", host)
	for p := 1; p <= s.pageCount; p++ {
		fmt.Fprintf(&b, "  <li><a href=\"/p/%04d\">Profile %04d</a></li>\n", p, p)
	}
	b.WriteString("</ul>")
	return []byte(page("People of "+host, b.String()))
}

var (
	largeFirst = []string{"Ada", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Greta", "Hugo",
		"Ines", "Jonas", "Keiko", "Luca", "Maya", "Nils", "Olga", "Pablo", "Quinn", "Rosa",
		"Sami", "Tomas", "Uma", "Viktor", "Wanda", "Yusuf"}
	largeLast = []string{"Almeida", "Berger", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia",
		"Horvat", "Ivanova", "Jensen", "Kovacs", "Larsen", "Moreno", "Novak", "Olsen", "Petrov",
		"Quist", "Rossi", "Silva", "Tanaka", "Urban", "Varga", "Weber", "Young"}
	largeCity = []string{"Lisbon, Portugal", "Vienna, Austria", "Porto, Portugal", "Lille, France",
		"Aarhus, Denmark", "Graz, Austria", "Seville, Spain", "Zagreb, Croatia", "Sofia, Bulgaria",
		"Bergen, Norway", "Turin, Italy", "Gdansk, Poland", "Tartu, Estonia"}
)

// largeBio pads profiles to the size of a modest real page (about 3 KB).
var largeBio = strings.Repeat("Works on public data, open standards and the long tail of small websites. ", 24)

// largeProfile is profile p of host number h, in people.example's layout
// (see peopleProfile), with a link back to the index.
func largeProfile(host string, h, p int) []byte {
	k := h*131 + p
	first, last := largeFirst[k%len(largeFirst)], largeLast[(k/len(largeFirst))%len(largeLast)]
	pr := person{
		Name:     first + " " + last,
		Location: largeCity[k%len(largeCity)],
		Email:    fmt.Sprintf("%s.%s.%04d@%s", strings.ToLower(first), strings.ToLower(last), p, host),
	}
	body := peopleProfile(host, pr, largeBio, link{"/", "All profiles"})
	return []byte(body)
}
