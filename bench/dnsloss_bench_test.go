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

// BenchmarkLossyResolver is issue 31's goal 6: a resolver behind a path
// that loses packets at random is not a busy one. The crawl of
// BenchmarkBusyResolver (the people web, every host a name, DNS_DEAD_SITES
// dead names linked from the profiles) runs through a DNS server of the
// benchmark's own on loopback (resolvertest) that drops each query with
// probability LOSS (0, 25 and 50 % by default, LOSS_LEVELS="0,25,50"),
// whatever the rate, and has no rate limit of its own.
//
// Each build crawls once at each loss: the branch (built from ..) and,
// when LOSS_BASE_BIN names a binary built from the base commit, the base,
// in the same run. The figures, each against the same build's crawl
// without loss: wall time (goal ≤ ×1.15 at 25 %, ≤ ×1.5 at 50 %), recall
// (unchanged), and, from the DNS server's own count, queries per distinct
// question (goal ≤ 2).
//
// The web listens on port 80 of 127.53.0.3, so the benchmark needs root.
//
//	cd bench && LOSS_BASE_BIN=/tmp/backfill-base go test -run '^$' -bench LossyResolver -benchtime 1x -timeout 60m .
func BenchmarkLossyResolver(b *testing.B) {
	hosts := envInt(b, "PEOPLE_HOSTS", 400)
	pages := envInt(b, "PEOPLE_PAGES", 200)
	nrec := envInt(b, "PEOPLE_RECORDS", 3000)
	depth := envInt(b, "PEOPLE_DEPTH", 2)
	workers := envInt(b, "PEOPLE_WORKERS", 64)
	dead := envInt(b, "DNS_DEAD_SITES", 1000)
	latency := envDuration(b, "PEOPLE_LATENCY", 0)
	var levels []int
	for _, f := range strings.Split(envString("LOSS_LEVELS", "0,25,50"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n >= 100 {
			b.Fatalf("LOSS_LEVELS: %q is not a percentage below 100", f)
		}
		levels = append(levels, n)
	}

	const addr = "127.53.0.3"
	web, err := testweb.StartPeople(testweb.PeopleOptions{Hosts: hosts, Pages: pages, Records: nrec, Addr: addr + ":80", DeadSites: dead, Latency: latency})
	if err != nil {
		proctest.NotRoot(b, fmt.Sprintf("people web on %s:80: %v (needs port 80 on loopback)", addr, err))
	}
	defer web.Close()
	dns, err := resolvertest.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer dns.Close()
	for hp := range web.Resolve() {
		host, _, _ := net.SplitHostPort(hp)
		dns.Add(host, netip.MustParseAddr(addr))
	}

	dir := b.TempDir()
	maps := filepath.Join(dir, "mappings")
	if err := os.MkdirAll(maps, 0o755); err != nil {
		b.Fatal(err)
	}
	for name, data := range testweb.PeopleMappings() {
		writeFile(b, maps, name, data)
	}
	truth := testweb.PeopleTruth(web, testweb.PeopleCrawl{Depth: depth})

	type build struct{ name, bin string }
	var builds []build
	if base := os.Getenv("LOSS_BASE_BIN"); base != "" {
		builds = append(builds, build{"base", base})
	}
	builds = append(builds, build{"branch", goBuild(b, "..", "./cmd/backfill", filepath.Join(dir, "backfill"))})
	fmt.Printf("dnsloss: %d hosts × %d profiles, %d records, depth %d, %d workers, %d dead sites, %s a response; loss %v %%\n",
		hosts, pages, nrec, depth, workers, dead, latency, levels)

	type result struct {
		wall               time.Duration
		found, want        int
		queries, questions int
		dropped            int64
		cpu                time.Duration
		maxPerQuestion     int
		failedNames        string
	}
	results := map[string]result{}
	for _, bd := range builds {
		for _, loss := range levels {
			name := fmt.Sprintf("%s/loss%d", bd.name, loss)
			b.Run(name, func(b *testing.B) {
				run := filepath.Join(dir, strings.ReplaceAll(name, "/", "-"))
				if err := os.MkdirAll(run, 0o755); err != nil {
					b.Fatal(err)
				}
				cb := newCrawlInputs(b, web, run, workers, testweb.PeopleRecords(web))
				var r result
				for i := 0; i < b.N; i++ {
					dns.Lose(float64(loss)/100, uint64(loss)+1)
					before, droppedBefore := dns.Asked(), dns.Dropped()
					state := filepath.Join(run, fmt.Sprintf("state-%d", i))
					args := []string{"run", "--records", cb.records, "--mappings", maps,
						"--depth", strconv.Itoa(depth), "--state-dir", state,
						"--delay", "0", "--workers", strconv.Itoa(workers), "--host-in-flight", "4",
						"--allow-loopback", "--log-level", "warn", "--resolver", dns.Addr}
					o := cb.runPeople(b, exec.Command(bd.bin, args...))
					r.wall, r.cpu = o.wall, o.cpu
					var wrong int
					r.found, r.want, wrong = peopleRecall(b, filepath.Join(state, "results.db"), truth)
					if wrong > 0 {
						b.Fatalf("%s: %d values a correct crawl does not find", name, wrong)
					}
					r.queries, r.questions, r.maxPerQuestion = 0, 0, 0
					for q, n := range dns.Asked() {
						if d := n - before[q]; d > 0 {
							r.queries += d
							r.questions++
							r.maxPerQuestion = max(r.maxPerQuestion, d)
						}
					}
					r.dropped = dns.Dropped() - droppedBefore
					if i := strings.Index(string(o.stdout), "dns:"); i >= 0 {
						r.failedNames = strings.TrimSpace(strings.SplitAfter(string(o.stdout[i:]), "\n")[0])
					}
				}
				b.ReportMetric(float64(r.found)/float64(max(r.want, 1)), "recall")
				b.ReportMetric(float64(r.queries)/float64(max(r.questions, 1)), "queries/question")
				results[name] = r
			})
		}
	}
	for _, bd := range builds {
		ref, ok := results[fmt.Sprintf("%s/loss0", bd.name)]
		for _, loss := range levels {
			r, ok2 := results[fmt.Sprintf("%s/loss%d", bd.name, loss)]
			if !ok2 {
				continue
			}
			ratio := "—"
			if ok {
				ratio = fmt.Sprintf("×%.2f", r.wall.Seconds()/ref.wall.Seconds())
			}
			// A question takes one query plus one for each query lost;
			// any more were asked again while their answer was coming.
			fmt.Printf("dnsloss: %-6s loss %2d%%: %8s (%s the build's no-loss crawl), CPU %6s, recall %.3f (%d of %d), %d queries for %d questions: %.2f each (max %d), %d dropped, %d asked again beyond those\n",
				bd.name, loss, r.wall.Round(time.Millisecond), ratio, r.cpu.Round(10*time.Millisecond), float64(r.found)/float64(max(r.want, 1)), r.found, r.want,
				r.queries, r.questions, float64(r.queries)/float64(max(r.questions, 1)), r.maxPerQuestion, r.dropped, int64(r.queries-r.questions)-r.dropped)
			if r.failedNames != "" {
				fmt.Printf("dnsloss: %-6s loss %2d%%: summary %s\n", bd.name, loss, r.failedNames)
			}
		}
	}
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
