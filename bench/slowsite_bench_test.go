//go:build unix

package bench

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"backfill/testweb"
)

// BenchmarkSlowSite is issue 30's slow site: SLOW_HOSTS (3) hosts of the
// large web, each with an index and SLOW_PAGES (4) profiles, whose
// robots.txt sets Crawl-delay SLOW_DELAY (10 s) and which answer every
// request, robots.txt included, after SLOW_LATENCY (6 s): about six
// requests a host (robots.txt, the soft-404 probe, the index, the
// profiles), each one a response and a delay after the last. `backfill
// run` crawls the hosts' records with its default flags, to the end.
//
// Each build runs once, the base (POLITE_BASE_BIN, when set) first, then
// the branch, in the same run; from the web's own request log it prints
// the URLs requested twice and the intervals from the end of a host's
// response to its next request that are shorter than the Crawl-delay.
//
//	cd bench && POLITE_BASE_BIN=/tmp/backfill-base go test -run '^$' -bench SlowSite -benchtime 1x -timeout 60m .
func BenchmarkSlowSite(b *testing.B) {
	hosts := envInt(b, "SLOW_HOSTS", 3)
	pages := envInt(b, "SLOW_PAGES", 4)
	delay := envDuration(b, "SLOW_DELAY", 10*time.Second)
	latency := envDuration(b, "SLOW_LATENCY", 6*time.Second)

	web, err := testweb.StartLarge(testweb.LargeOptions{Hosts: hosts, Pages: pages, Latency: latency, CrawlDelay: delay})
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	dir := b.TempDir()
	cb := newCrawlInputs(b, web, dir, 0, testweb.LargeRecords(web))
	maps := fixtureMappings(b, dir)
	builds := baseAndBranch(b, "POLITE_BASE_BIN", dir)
	fmt.Printf("slow-site: %d hosts × (index + %d profiles), Crawl-delay %s, %s a response; `backfill run` with default flags, to the end\n",
		hosts, pages, delay, latency)

	got := map[string]politeCounts{}
	walls := map[string]time.Duration{}
	for _, bd := range builds {
		b.Run(bd.name, func(b *testing.B) {
			var c politeCounts
			for i := 0; i < b.N; i++ {
				args := []string{"run", "--records", cb.records, "--mappings", maps,
					"--state-dir", filepath.Join(dir, fmt.Sprintf("%s-state-%d", bd.name, i)),
					"--contact", "https://backfill.invalid/" + bd.name,
					"--allow-loopback", "--log-level", "warn"}
				start := time.Now()
				o, before, _ := cb.runProcess(b, exec.Command(bd.bin, append(args, cb.resolveA...)...))
				walls[bd.name] = o.wall
				log := web.Log()[before:]
				c = countPoliteness(testweb.CheckPoliteness(log, sameDelay(delay)), start)
				cb.tally(&o, before)
				if want := hosts * (pages + 1); o.pages < want {
					b.Errorf("%s fetched %d distinct pages of %d", bd.name, o.pages, want)
				}
				fmt.Printf("slow-site: %-6s %d pages (%d requests, %d robots.txt, %d probes, %d failed) in %s\n",
					bd.name, o.pages, o.requests+o.robots, o.robots, o.probes, o.failed, o.wall.Round(time.Millisecond))
			}
			c.report(b, "slow-site", bd.name)
			got[bd.name] = c
		})
	}
	comparePoliteness("slow-site", builds, got)
}
