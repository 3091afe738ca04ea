//go:build unix

package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"backfill/resolver/resolvertest"
	"backfill/testweb"
)

// BenchmarkRedirectWeb is issue 30's redirect web at the defaults: 13
// records whose links are short links, each on a host of its own, that
// redirect to one host (people.example of the small fixture web, whose
// robots.txt sets Crawl-delay REDIRECT_DELAY, 2 s, and disallows
// /private/), as short links, doi.org and http→https funnel records onto
// one site. Ten lead to its profiles (two ways to each of five), one to
// Dana's through a chain across two short-link hosts, one to its
// disallowed /private/bob and one to a host whose name is on the
// --blacklist. The short-link hosts' robots.txt are missing, so the 15 s
// default delay is theirs. `backfill run` crawls with its default flags
// (depth, delay, workers), the names of the webs pinned by --resolve, and
// a DNS server of the benchmark's own on loopback (resolvertest) as its
// resolver, which knows the blacklisted name (it points at the short-link
// server), so a build that looks it up can fetch it.
//
// Each build runs once, the base (POLITE_BASE_BIN, when set) first, then
// the branch, in the same run. From both servers' request logs: the URLs
// requested twice, the intervals from the end of a host's response to its
// next request under the host's delay; and whether the target's
// robots.txt came first, its disallowed page was requested, the
// blacklisted name was looked up (the DNS server's log) or fetched, and
// which records behind the allowed links were filled (the build's own
// export). Any of these failing on the branch fails the benchmark.
//
//	cd bench && POLITE_BASE_BIN=/tmp/backfill-base go test -run '^$' -bench RedirectWeb -benchtime 1x -timeout 60m .
func BenchmarkRedirectWeb(b *testing.B) {
	delay := envDuration(b, "REDIRECT_DELAY", 2*time.Second)
	if delay%time.Second != 0 || delay <= 0 {
		b.Fatalf("REDIRECT_DELAY=%s: the small web takes whole seconds", delay)
	}
	web, err := testweb.Start(testweb.Options{CrawlDelay: int(delay / time.Second)})
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	const target, blocked = "people.example", "evil.blocked.test"
	short := startShortLinks(b)
	_, shortPort, _ := net.SplitHostPort(short.addr())
	to := "http://" + target
	// The short-link hosts, each with one link (c2 is the chain's second
	// hop), and the records behind them: id, name, link, and the target
	// page's person whose location fills it ("" for none).
	links := []struct{ host, path, to, id, name string }{
		{"s1.short.test", "/a", to + "/p/alice", "r1", "Alice Moreau"},
		{"s2.short.test", "/c", to + "/p/carol", "r2", "Carol Nguyen"},
		{"s3.short.test", "/h", to + "/p/hana", "r3", "Hana Sato"},
		{"s4.short.test", "/z", to + "/p/zoe", "r4", "Zoë Laurent"},
		{"s5.short.test", "/b", to + "/p/bob", "r5", "Bob Okafor"},
		{"s6.short.test", "/a2", to + "/p/alice", "r6", "Alice Moreau"},
		{"s7.short.test", "/c2", to + "/p/carol", "r7", "Carol Nguyen"},
		{"s8.short.test", "/h2", to + "/p/hana", "r8", "Hana Sato"},
		{"s9.short.test", "/z2", to + "/p/zoe", "r9", "Zoë Laurent"},
		{"s10.short.test", "/b2", to + "/p/bob", "r10", "Bob Okafor"},
		{"c1.short.test", "/d", "http://c2.short.test/d", "r11", "Dana Kowalski"},
		{"c2.short.test", "/d", to + "/p/dana", "", ""},
		{"s11.short.test", "/p", to + "/private/bob", "r12", "Bob Okafor"},
		{"s12.short.test", "/x", "http://" + blocked + ":" + shortPort + "/x", "r13", "Eve Black"},
	}
	// Where each allowed record's location comes from: the small web's
	// truth for the same people (testweb.Sample).
	_, sample := testweb.Sample()
	location := map[string]string{
		"Alice Moreau": sample["r1"]["location"], "Carol Nguyen": sample["r2"]["location"],
		"Hana Sato": sample["r3"]["location"], "Bob Okafor": sample["r4"]["location"],
		"Dana Kowalski": sample["r5"]["location"], "Zoë Laurent": sample["r7"]["location"],
	}
	filled := map[string]string{} // record id → the location it must get
	var csv strings.Builder
	csv.WriteString("id,name,location,email,homepage\n")
	for _, l := range links {
		short.table[l.host+l.path] = l.to
		if l.id == "" {
			continue
		}
		fmt.Fprintf(&csv, "%s,%s,,,http://%s%s\n", l.id, l.name, l.host, l.path)
		if !strings.Contains(l.to, "/private/") && !strings.Contains(l.to, blocked) {
			filled[l.id] = location[l.name]
		}
	}

	dns, err := resolvertest.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer dns.Close()
	dns.Add(blocked, netip.MustParseAddr("127.0.0.1"))

	dir := b.TempDir()
	records := writeFile(b, dir, "records.csv", []byte(csv.String()))
	blacklist := writeFile(b, dir, "blacklist.txt", []byte("blocked.test\n"))
	pins := resolveFlags(web)
	for _, l := range links {
		pins = append(pins, "--resolve", l.host+":80:"+short.addr())
	}
	builds := baseAndBranch(b, "POLITE_BASE_BIN", dir)
	fmt.Printf("redirect-web: %d records on %d short-link hosts (+1 second hop) → %s (Crawl-delay %s); short-link hosts at the default delay %s; `backfill run` with default flags, --blacklist blocked.test, --resolver on loopback\n",
		len(filled)+2, len(links)-1, target, delay, defaultDelay)
	hostDelay := func(host string) time.Duration {
		if strings.HasSuffix(host, ".short.test") || strings.HasSuffix(host, blocked) {
			return defaultDelay
		}
		return delay
	}

	got := map[string]politeCounts{}
	for _, bd := range builds {
		b.Run(bd.name, func(b *testing.B) {
			var c politeCounts
			for i := 0; i < b.N; i++ {
				state := filepath.Join(dir, fmt.Sprintf("%s-state-%d", bd.name, i))
				args := []string{"run", "--records", records, "--state-dir", state,
					"--blacklist", blacklist, "--resolver", dns.Addr,
					"--contact", "https://backfill.invalid/" + bd.name,
					"--allow-loopback", "--log-level", "warn"}
				webFrom, shortFrom, asked := len(web.Log()), len(short.requests()), dns.Asked()
				cmd := exec.Command(bd.bin, append(args, pins...)...)
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				start := time.Now()
				if err := cmd.Run(); err != nil {
					b.Fatalf("%s run: %v\n%s", bd.name, err, tail(out.Bytes()))
				}
				wall := time.Since(start)
				log := append(web.Log()[webFrom:], short.requests()[shortFrom:]...)
				c = countPoliteness(testweb.CheckPoliteness(log, hostDelay), start)

				var onTarget []testweb.Request
				private, blockedFetched := 0, 0
				for _, r := range log {
					switch {
					case r.Host == target:
						onTarget = append(onTarget, r)
						if strings.HasPrefix(r.Path, "/private/") {
							private++
						}
					case r.Host == blocked:
						blockedFetched++
					}
				}
				var lookups []string
				for q, n := range dns.Asked() {
					if strings.Contains(q, blocked) && n > asked[q] {
						lookups = append(lookups, fmt.Sprintf("%s ×%d", q, n-asked[q]))
					}
				}
				slices.Sort(lookups)
				values := exportedValues(b, bd.bin, state)
				var missing []string
				for id, loc := range filled {
					if values[id]["location"] != loc {
						missing = append(missing, fmt.Sprintf("%s (location %q, want %q)", id, values[id]["location"], loc))
					}
				}
				slices.Sort(missing)
				var wrong []string
				for _, id := range []string{"r12", "r13"} {
					if len(values[id]) > 0 {
						wrong = append(wrong, fmt.Sprintf("%s %v", id, values[id]))
					}
				}
				robotsFirst := len(onTarget) > 0 && onTarget[0].Path == "/robots.txt"

				fmt.Printf("redirect-web: %-6s crawl of %s: %d requests to %s, robots.txt first %v, disallowed page requested %d times, blacklisted name looked up %v and fetched %d times, records filled %d of %d (missing: %v; filled that must not be: %v)\n",
					bd.name, wall.Round(time.Millisecond), len(onTarget), target, robotsFirst, private, lookups, blockedFetched,
					len(filled)-len(missing), len(filled), missing, wrong)
				var seq []string
				var prevEnd time.Time
				for _, r := range onTarget {
					gap := "—"
					if !prevEnd.IsZero() {
						gap = r.Time.Sub(prevEnd).Round(time.Millisecond).String()
					}
					seq = append(seq, fmt.Sprintf("%s (+%s, %s after the last end)", r.Path, since(start, r.Time), gap))
					if r.Done.After(prevEnd) {
						prevEnd = r.Done
					}
				}
				fmt.Printf("redirect-web: %-6s %s in order: %s\n", bd.name, target, strings.Join(seq, ", "))
				if bd.name == "branch" {
					if !robotsFirst || private > 0 || len(lookups) > 0 || blockedFetched > 0 || len(missing) > 0 || len(wrong) > 0 {
						b.Errorf("the branch broke a rule of the redirect web (see above)")
					}
				}
			}
			c.report(b, "redirect-web", bd.name)
			got[bd.name] = c
		})
	}
	comparePoliteness("redirect-web", builds, got)
}

// exportedValues exports a state with bin's own export (so that each
// build reads its own state) and returns the values filled, by record id
// and field.
func exportedValues(b *testing.B, bin, state string) map[string]map[string]string {
	cmd := exec.Command(bin, "export", "--state-dir", state, "--format", "jsonl", "--provenance")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("export %s: %v\n%s", state, err, stderr.Bytes())
	}
	got := map[string]map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var rec struct {
			ID         string                     `json:"id"`
			Fields     map[string]any             `json:"fields"`
			Provenance map[string]json.RawMessage `json:"provenance"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			b.Fatalf("export line %q: %v", sc.Text(), err)
		}
		got[rec.ID] = map[string]string{}
		for f := range rec.Provenance {
			if v, ok := rec.Fields[f].(string); ok {
				got[rec.ID][f] = v
			}
		}
	}
	return got
}

// shortLinks is a link shortener on loopback: it answers for any host
// name, redirecting host+path to where its table says (404 otherwise,
// robots.txt included), and logs every request as the fixture web does
// (testweb.Request, Done included).
type shortLinks struct {
	srv   *http.Server
	ln    net.Listener
	table map[string]string // "host/path" → target URL; set before the crawl

	mu  sync.Mutex
	log []testweb.Request
}

func startShortLinks(b *testing.B) *shortLinks {
	s := &shortLinks{table: map[string]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	b.Cleanup(func() { s.srv.Close() })
	return s
}

func (s *shortLinks) addr() string { return s.ln.Addr().String() }

func (s *shortLinks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := strings.ToLower(r.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	s.mu.Lock()
	i := len(s.log)
	s.log = append(s.log, testweb.Request{Host: host, Path: r.URL.RequestURI(), Time: time.Now(), UserAgent: r.UserAgent()})
	s.mu.Unlock()
	to, ok := s.table[host+r.URL.Path]
	status := http.StatusNotFound
	if ok {
		status = http.StatusFound
	}
	// Done before the write, as the fixture web takes it (testweb.Request).
	s.mu.Lock()
	s.log[i].Status, s.log[i].Done = status, time.Now()
	s.mu.Unlock()
	if ok {
		http.Redirect(w, r, to, status)
	} else {
		http.NotFound(w, r)
	}
}

func (s *shortLinks) requests() []testweb.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}
