//go:build unix

package bench

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/resolver/resolvertest"
	"backfill/testweb"
)

// BenchmarkBusyResolver is issue 21's crawl: the people web of
// BenchmarkPeopleCrawl (PEOPLE_HOSTS × PEOPLE_PAGES, PEOPLE_RECORDS
// records, depth 2, no delay), crawled twice in one run:
//
//   - pinned: every host pinned by --resolve, no DNS at all, and no dead
//     sites on the profiles: the crawl without DNS;
//   - dns: every host a name that a DNS server of the benchmark's own on
//     loopback (resolvertest) answers, at most DNS_QPS queries a second
//     (default 300, the rest dropped, as a busy resolver does), and every
//     profile linking to its person's own website, one of DNS_DEAD_SITES
//     (default 1000) names that do not exist. backfill is given the
//     server with --resolver and nothing else.
//
// Each web listens on port 80 of its own loopback address (127.53.0.1,
// 127.53.0.2), since a name resolves to an address, not a port: the
// benchmark needs root (or the capability to bind port 80) and skips
// without it.
//
// It prints both crawls' wall time and recall, their ratio (goal ≤ 1.25),
// and the queries the server received per distinct question, name and
// type (goal ≤ 1.5).
//
//	cd bench && go test -run '^$' -bench BusyResolver -benchtime 1x -timeout 30m .
func BenchmarkBusyResolver(b *testing.B) {
	hosts := envInt(b, "PEOPLE_HOSTS", 400)
	pages := envInt(b, "PEOPLE_PAGES", 200)
	nrec := envInt(b, "PEOPLE_RECORDS", 3000)
	depth := envInt(b, "PEOPLE_DEPTH", 2)
	workers := envInt(b, "PEOPLE_WORKERS", 64)
	qps := envInt(b, "DNS_QPS", 300)
	dead := envInt(b, "DNS_DEAD_SITES", 1000)

	startWeb := func(addr string, dead int) *testweb.Web {
		w, err := testweb.StartPeople(testweb.PeopleOptions{Hosts: hosts, Pages: pages, Records: nrec, Addr: addr, DeadSites: dead})
		if err != nil {
			proctest.NotRoot(b, fmt.Sprintf("people web on %s: %v (needs port 80 on loopback)", addr, err))
		}
		b.Cleanup(func() { w.Close() })
		return w
	}
	pinnedWeb := startWeb("127.53.0.1:80", 0)
	namedWeb := startWeb("127.53.0.2:80", dead)
	dns, err := resolvertest.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer dns.Close()
	webAddr := netip.MustParseAddr("127.53.0.2")
	for hp := range namedWeb.Resolve() {
		host, _, _ := net.SplitHostPort(hp)
		dns.Add(host, webAddr)
	}
	dns.Limit(float64(qps))

	dir := b.TempDir()
	maps := filepath.Join(dir, "mappings")
	if err := os.MkdirAll(maps, 0o755); err != nil {
		b.Fatal(err)
	}
	for name, data := range testweb.PeopleMappings() {
		writeFile(b, maps, name, data)
	}
	truth := testweb.PeopleTruth(pinnedWeb, testweb.PeopleCrawl{Depth: depth})
	bin := goBuild(b, "..", "./cmd/backfill", filepath.Join(dir, "backfill"))
	fmt.Printf("dns: %d hosts × %d profiles, %d records, depth %d, %d workers; resolver answers ≤ %d queries/s, %d dead sites\n",
		hosts, pages, nrec, depth, workers, qps, dead)

	type result struct {
		o                  peopleOutcome
		found, want, wrong int
	}
	results := map[string]result{}
	crawl := func(name string, web *testweb.Web, extra []string) {
		b.Run(name, func(b *testing.B) {
			if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
				b.Fatal(err)
			}
			cb := newCrawlInputs(b, web, filepath.Join(dir, name), workers, testweb.PeopleRecords(web))
			var r result
			for i := 0; i < b.N; i++ {
				state := filepath.Join(dir, name, fmt.Sprintf("state-%d", i))
				args := []string{"run", "--records", cb.records, "--mappings", maps,
					"--depth", strconv.Itoa(depth), "--state-dir", state,
					"--delay", "0", "--workers", strconv.Itoa(workers), "--host-in-flight", "4",
					"--allow-loopback", "--log-level", "warn"}
				r.o = cb.runPeople(b, exec.Command(bin, append(args, extra...)...))
				r.found, r.want, r.wrong = peopleRecall(b, filepath.Join(state, "results.db"), truth)
				if r.wrong > 0 {
					b.Fatalf("%s: %d values a correct crawl does not find", name, r.wrong)
				}
			}
			r.o.report(b)
			results[name] = r
			if i := strings.Index(string(r.o.stdout), "dns:"); i >= 0 {
				fmt.Printf("dns: %s summary: %s", name, strings.SplitAfter(string(r.o.stdout[i:]), "\n")[0])
			}
		})
	}
	crawl("pinned", pinnedWeb, resolveFlags(pinnedWeb))
	before := dns.Queries()
	crawl("dns", namedWeb, []string{"--resolver", dns.Addr})
	queries := dns.Queries() - before
	questions := len(dns.Asked())

	for _, n := range []string{"pinned", "dns"} {
		r, ok := results[n]
		if !ok {
			continue
		}
		fmt.Printf("dns: %-6s %6d pages in %8s, recall %.3f (%d of %d values)\n", n, r.o.pages,
			r.o.wall.Round(time.Millisecond), float64(r.found)/float64(max(r.want, 1)), r.found, r.want)
	}
	p, okP := results["pinned"]
	d, okD := results["dns"]
	if okP && okD {
		fmt.Printf("dns: time dns/pinned ×%.2f (goal ≤ 1.25); recall %d vs %d; %d queries for %d distinct questions: %.2f each (goal ≤ 1.5); %d dropped by the server\n",
			d.o.wall.Seconds()/p.o.wall.Seconds(), d.found, p.found, queries, questions,
			float64(queries)/float64(max(questions, 1)), dns.Dropped())
	}
}
