package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"backfill/dispatcher"
	"backfill/proctest"
	"backfill/resolver/resolvertest"
	"backfill/testweb"
	"backfill/wire"
)

// shortLinks is a link shortener on loopback: it answers for any host
// name, redirecting host+path to where its table says, and logs what it
// was asked.
type shortLinks struct {
	srv   *httptest.Server
	table map[string]string // "host/path" → target URL

	mu  sync.Mutex
	log []string // "host/path", in arrival order
}

func startShortLinks(t *testing.T, table map[string]string) *shortLinks {
	t.Helper()
	s := &shortLinks{table: table}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := strings.ToLower(strings.Split(r.Host, ":")[0])
		s.mu.Lock()
		s.log = append(s.log, host+r.URL.Path)
		s.mu.Unlock()
		if to, ok := s.table[host+r.URL.Path]; ok {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *shortLinks) asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// TestRedirectWeb crawls records whose links are short links on many
// hosts, all redirecting to one host with a Crawl-delay (the way short
// links, doi.org and http→https funnel records onto one site): every hop
// is a request under its target host's rules. The target's robots.txt
// comes first and its requests keep the delay, its disallowed page is
// never requested, a redirect to a blacklisted name is neither looked up
// nor fetched, a chain across two short-link hosts is followed, and the
// records behind the allowed links are filled, with the chain in their
// provenance.
func TestRedirectWeb(t *testing.T) {
	proctest.Short(t, "crawls a web with a Crawl-delay")
	const crawlDelay = 1 // seconds, in the target host's robots.txt
	web := startWeb(t, crawlDelay)
	people := "http://people.example"
	short := startShortLinks(t, map[string]string{
		"s1.short.test/a":  people + "/p/alice",
		"s2.short.test/c":  people + "/p/carol",
		"s3.short.test/h":  people + "/p/hana",
		"s4.short.test/z":  people + "/p/zoe",
		"s5.short.test/b":  people + "/p/bob",
		"s6.short.test/a2": people + "/p/alice", // a second way to a page: fetched once
		"c1.short.test/d":  "http://c2.short.test/d",
		"c2.short.test/d":  people + "/p/dana",
		"s7.short.test/p":  people + "/private/bob", // robots.txt disallows it
		"s8.short.test/x":  "http://evil.blocked.test/x",
	})
	dns, err := resolvertest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dns.Close)

	dir := t.TempDir()
	records := filepath.Join(dir, "records.csv")
	csv := "id,name,location,email,homepage\n" +
		"r1,Alice Moreau,,,http://s1.short.test/a\n" +
		"r2,Carol Nguyen,,,http://s2.short.test/c\n" +
		"r3,Hana Sato,,,http://s3.short.test/h\n" +
		"r4,Zoë Laurent,,,http://s4.short.test/z\n" +
		"r5,Bob Okafor,,,http://s5.short.test/b\n" +
		"r6,Alice Moreau,,,http://s6.short.test/a2\n" +
		"r7,Dana Kowalski,,,http://c1.short.test/d\n" +
		"r8,Bob Okafor,,,http://s7.short.test/p\n" +
		"r9,Eve Black,,,http://s8.short.test/x\n"
	if err := os.WriteFile(records, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	blacklist := filepath.Join(dir, "blacklist.txt")
	if err := os.WriteFile(blacklist, []byte("blocked.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(dir, "state")
	sumPath := filepath.Join(dir, "summary.json")
	// The short-link hosts say no Crawl-delay: a second of ours (the
	// default is 15 s) keeps the test short.
	args := append([]string{"run", "--records", records, "--state-dir", stateDir, "--depth", "0", "--delay", "1s",
		"--summary", sumPath, "--blacklist", blacklist, "--resolver", dns.Addr},
		crawlArgs(web, "redirectweb")...)
	shortAddr := strings.TrimPrefix(short.srv.URL, "http://")
	for _, h := range []string{"s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "c1", "c2"} {
		args = append(args, "--resolve", h+".short.test:80:"+shortAddr)
	}
	var stdout, stderr bytes.Buffer
	if code := mainExit(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("run exit %d:\n%s", code, stderr.String())
	}

	// The target host: robots.txt first, every page once, the delay kept,
	// the disallowed page never asked for.
	var target []testweb.Request
	for _, r := range web.Log() {
		if r.Host == "people.example" {
			target = append(target, r)
		}
	}
	if len(target) == 0 || target[0].Path != "/robots.txt" {
		t.Fatalf("people.example was asked %v: robots.txt must come first", target)
	}
	seen := map[string]bool{}
	for i, r := range target {
		if seen[r.Path] {
			t.Errorf("%s requested twice", r.Path)
		}
		seen[r.Path] = true
		if strings.HasPrefix(r.Path, "/private/") {
			t.Errorf("the disallowed %s was requested", r.Path)
		}
		if i > 0 {
			if gap := r.Time.Sub(target[i-1].Time); gap < crawlDelay*time.Second {
				t.Errorf("%s came %v after %s, under the %ds Crawl-delay", r.Path, gap, target[i-1].Path, crawlDelay)
			}
		}
	}
	for _, p := range []string{"/p/alice", "/p/carol", "/p/hana", "/p/zoe", "/p/bob", "/p/dana"} {
		if !seen[p] {
			t.Errorf("%s, behind an allowed short link, was never requested", p)
		}
	}
	// Every short link once, and never the blacklisted name.
	shortSeen := map[string]int{}
	for _, a := range short.asked() {
		shortSeen[a]++
		if strings.Contains(a, "blocked.test") {
			t.Errorf("the blacklisted host was fetched: %s", a)
		}
	}
	for link, n := range shortSeen {
		if n > 1 && !strings.HasSuffix(link, "/robots.txt") {
			t.Errorf("%s requested %d times", link, n)
		}
	}
	for q := range dns.Asked() {
		if strings.Contains(q, "blocked.test") {
			t.Errorf("the blacklisted name was looked up: %s", q)
		}
	}

	// The records behind the allowed links are filled, the chain in their
	// provenance; the others are not.
	exp := start(t, "export", "export", "--state-dir", stateDir, "--format", "jsonl", "--provenance")
	if code := exp.waitExit(time.Minute); code != 0 {
		t.Fatalf("export exit code %d", code)
	}
	got := foundValues(t, bytes.NewReader(exp.stdout.Bytes()))
	truth := map[string]map[string]string{
		"r1": {"location": "Lyon, France", "email": "alice.moreau@mail.example"},
		"r2": {"location": "Hanoi, Vietnam", "email": "carol.nguyen@mail.example"},
		"r3": {"location": "Osaka, Japan", "email": "hana.sato@mail.example"},
		"r4": {"location": "Montréal, Canada", "email": "zoe.laurent@mail.example"},
		"r5": {"location": "Leeds, UK", "email": ""},
		"r6": {"location": "Lyon, France", "email": "alice.moreau@mail.example"},
		"r7": {"location": "Kraków, Poland", "email": "dana.kowalski@mail.example"},
		"r8": {"location": "", "email": ""},
		"r9": {"location": "", "email": ""},
	}
	checkTruth(t, "redirect web", got, truth)
	via := provenanceVia(t, exp.stdout.Bytes())
	for id, want := range map[string][]string{
		"r1": {"http://s1.short.test/a"},
		"r6": {"http://s6.short.test/a2"},
		"r7": {"http://c1.short.test/d", "http://c2.short.test/d"},
	} {
		if !slices.Equal(via[id], want) {
			t.Errorf("record %s: provenance via %q, want %q", id, via[id], want)
		}
	}

	b, err := os.ReadFile(sumPath)
	if err != nil {
		t.Fatal(err)
	}
	var sum dispatcher.Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.HostInFlight != 1 || sum.Repeated != 0 {
		t.Errorf("summary: at most %d in flight to one host, %d repeated; want 1 and 0", sum.HostInFlight, sum.Repeated)
	}
	for reason, atLeast := range map[string]int64{wire.RedirectFollowed: 8, wire.RedirectOtherHost: 10,
		wire.RedirectBlacklist: 1, wire.RedirectRobots: 1} {
		if sum.Redirects[reason] < atLeast {
			t.Errorf("summary: redirects %v: %s %d, want at least %d", sum.Redirects, reason, sum.Redirects[reason], atLeast)
		}
	}
	if !strings.Contains(stdout.String(), "redirects: ") {
		t.Errorf("the printed summary says nothing of redirects:\n%s", stdout.String())
	}
}

// provenanceVia reads the redirect chain of each record's location from
// an export with provenance.
func provenanceVia(t *testing.T, export []byte) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, line := range bytes.Split(bytes.TrimSpace(export), []byte("\n")) {
		var rec struct {
			ID         string `json:"id"`
			Provenance map[string]struct {
				Via []string `json:"via"`
			} `json:"provenance"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("export line %q: %v", line, err)
		}
		if p, ok := rec.Provenance["location"]; ok {
			out[rec.ID] = p.Via
		}
	}
	return out
}
