//go:build unix

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/store"
	"backfill/testweb"
)

// BenchmarkPeopleCrawl is the realistic crawl of issue 14: the people web
// (testweb.StartPeople) of PEOPLE_HOSTS hosts × PEOPLE_PAGES profiles in
// five layouts, PEOPLE_RECORDS records, five mappings sharing one URL
// pattern (XPath, regex, the email processor, JSON-LD), depth 2, no delays,
// PEOPLE_WORKERS parallel fetches. Pages are reached by many records (team
// pages, colleagues' profiles), and every profile is matched by five
// mappings of which four find nothing.
//
// Contenders, one after the other, each its own process:
//
//   - backfill: `backfill run` with its SQLite state and results store;
//     it stops each record once its fields are filled. Its recall is
//     measured against testweb.PeopleTruth (a correct crawl of the web's
//     own model) and printed; a value the truth does not hold fails the
//     run.
//   - colly: cmd/collycrawl, the same extraction (all five mappings) on
//     every page it fetches to the same depth — what a crawler that does
//     not track records does; tuned: Async, Parallelism = workers on one
//     LimitRule for every domain, MaxIdleConnsPerHost = workers, robots.txt
//     obeyed, one parse per page for all mappings.
//   - httploop: cmd/httploop, workers goroutines GETting the pages colly
//     fetched and reading the bodies, no parsing: the machine's ceiling.
//
// It prints pages/s, CPU per page, peak RSS and wall time of each, and
// the ratios: backfill/colly pages/s (goal ≥ 2.0), backfill/httploop
// pages/s (goal ≥ 0.5) and the job time backfill/colly (goal ≤ 0.5).
//
//	cd bench && go test -run '^$' -bench PeopleCrawl -benchtime 1x -timeout 30m .
func BenchmarkPeopleCrawl(b *testing.B) {
	w := peopleWeb{
		hosts:   envInt(b, "PEOPLE_HOSTS", 400),
		pages:   envInt(b, "PEOPLE_PAGES", 200),
		nrec:    envInt(b, "PEOPLE_RECORDS", 3000),
		depth:   envInt(b, "PEOPLE_DEPTH", 2),
		workers: envInt(b, "PEOPLE_WORKERS", 64),
	}
	latencies := envDurations(b, "PEOPLE_LATENCY", 0)
	if len(latencies) == 1 {
		w.crawl(b, latencies[0])
		return
	}
	// Several latencies: each its own web and contenders, in turn, and
	// each build's CPU at every latency over its figure at the first.
	byLatency := make([]map[string]peopleOutcome, len(latencies))
	for i, l := range latencies {
		b.Run("latency="+l.String(), func(b *testing.B) { byLatency[i] = w.crawl(b, l) })
	}
	for _, n := range []string{"backfill", "before"} {
		first, ok := byLatency[0][n]
		if !ok || !first.split {
			continue
		}
		for i := 1; i < len(latencies); i++ {
			o, ok := byLatency[i][n]
			if !ok {
				continue
			}
			fmt.Printf("people: %-9s at %s over %s: dispatcher CPU a page ×%.2f, supervisor ×%.2f, the job's ×%.2f\n",
				n, latencies[i], latencies[0], perPage(o.dispCPU, o.pages)/perPage(first.dispCPU, first.pages),
				perPage(o.supCPU, o.pages)/perPage(first.supCPU, first.pages), o.cpuPerPage()/first.cpuPerPage())
		}
	}
}

// peopleWeb is the shape of BenchmarkPeopleCrawl's web and crawl.
type peopleWeb struct {
	hosts, pages, nrec, depth, workers int
}

// crawl runs every contender on a people web answering with latency,
// prints their figures and returns them by contender.
func (w peopleWeb) crawl(b *testing.B, latency time.Duration) map[string]peopleOutcome {
	hosts, pages, nrec, depth, workers := w.hosts, w.pages, w.nrec, w.depth, w.workers
	web, err := testweb.StartPeople(testweb.PeopleOptions{Hosts: hosts, Pages: pages, Records: nrec, Latency: latency})
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	dir := peopleDir(b)
	cb := newCrawlInputs(b, web, dir, workers, testweb.PeopleRecords(web))
	maps := filepath.Join(dir, "mappings")
	if err := os.MkdirAll(maps, 0o755); err != nil {
		b.Fatal(err)
	}
	for name, data := range testweb.PeopleMappings() {
		writeFile(b, maps, name, data)
	}
	truth := testweb.PeopleTruth(web, testweb.PeopleCrawl{Depth: depth})
	fmt.Printf("people: %d hosts × %d profiles, %d records, depth %d, %d workers, latency %s, GOMAXPROCS %d\n",
		hosts, pages, nrec, depth, workers, latency, runtime.GOMAXPROCS(0))
	// What stopping each record when it is complete can save on this
	// web, whoever crawls it: the job time's floor in pages.
	least, all := testweb.PeopleLeastPages(web, testweb.PeopleCrawl{Depth: depth})
	fmt.Printf("people: the fewest pages that fill every findable value: %d of the %d within depth %d (×%.3f)\n",
		least, all, depth, float64(least)/float64(max(all, 1)))

	results := map[string]peopleOutcome{}
	var collyPages []string
	// PEOPLE_SPLIT=1 runs backfill as two processes, `backfill dispatcher`
	// and one `backfill supervisor` over loopback TCP, so that the
	// dispatcher's CPU is measured apart from the fetching's.
	split := os.Getenv("PEOPLE_SPLIT") == "1"
	// runBackfill runs a backfill binary as the contender name, with its
	// own state directories.
	runBackfill := func(b *testing.B, name, bin string) {
		var o peopleOutcome
		if split {
			// The harness counts pages answered 200; a correct crawl's
			// are the fewest that fill every findable value and more.
			cl := &clusterBench{web: web, dir: dir, bin: bin, records: cb.records, mappings: maps,
				resolveA: cb.resolveA, hosts: hosts, expected: least}
			for i := 0; i < b.N; i++ {
				o = runPeopleSplit(b, cl, name, depth, workers)
				o.found, o.want, o.wrong = peopleRecall(b, filepath.Join(o.state, "dispatcher", "results.db"), truth)
				if o.wrong > 0 {
					b.Fatalf("%s filled %d values a correct crawl does not find", name, o.wrong)
				}
			}
			o.report(b)
			results[name] = o
			return
		}
		for i := 0; i < b.N; i++ {
			state := filepath.Join(dir, fmt.Sprintf("%s-state-%d", name, i))
			args := []string{"run", "--records", cb.records, "--mappings", maps,
				"--depth", strconv.Itoa(depth), "--state-dir", state,
				"--delay", "0", "--workers", strconv.Itoa(workers),
				// With no delay a host answers in a millisecond: a few of
				// its tasks in flight keep it busy while results make their
				// round trip through the dispatcher.
				"--host-in-flight", "4",
				"--allow-loopback", "--log-level", "warn"}
			o = cb.runPeople(b, exec.Command(bin, append(args, cb.resolveA...)...))
			o.found, o.want, o.wrong = peopleRecall(b, filepath.Join(state, "results.db"), truth)
			if o.wrong > 0 {
				b.Fatalf("%s filled %d values a correct crawl does not find", name, o.wrong)
			}
		}
		o.report(b)
		results[name] = o
	}
	b.Run("backfill", func(b *testing.B) {
		runBackfill(b, "backfill", goBuild(b, "..", "./cmd/backfill", filepath.Join(dir, "backfill")))
	})
	// PEOPLE_BEFORE names a backfill binary built from another commit (the
	// base of a change): it runs the same way, in the same run, so the two
	// builds meet the same machine and load.
	if before := os.Getenv("PEOPLE_BEFORE"); before != "" {
		b.Run("before", func(b *testing.B) { runBackfill(b, "before", before) })
	}
	b.Run("colly", func(b *testing.B) {
		bin := goBuild(b, ".", "./cmd/collycrawl", filepath.Join(dir, "collycrawl"))
		var o peopleOutcome
		for i := 0; i < b.N; i++ {
			o = cb.runPeople(b, exec.Command(bin, "-seeds", cb.seeds, "-resolve", cb.resolve,
				"-mappings", maps, "-mappings-glob", "*.json", "-parallelism", strconv.Itoa(workers),
				"-depth", strconv.Itoa(depth)))
			var sum struct{ Extracted int }
			if err := json.Unmarshal(o.stdout, &sum); err != nil || sum.Extracted == 0 {
				b.Fatalf("colly summary %q: %v", o.stdout, err)
			}
		}
		o.report(b)
		results["colly"] = o
		collyPages = o.urls
	})
	b.Run("httploop", func(b *testing.B) {
		if len(collyPages) == 0 {
			proctest.NotApplicable(b, "needs colly's pages (the colly sub-benchmark did not run)")
		}
		bin := goBuild(b, ".", "./cmd/httploop", filepath.Join(dir, "httploop"))
		urls := writeFile(b, dir, "urls.txt", []byte(strings.Join(collyPages, "\n")+"\n"))
		var o peopleOutcome
		for i := 0; i < b.N; i++ {
			o = cb.runPeople(b, exec.Command(bin, "-urls", urls, "-resolve", cb.resolve, "-workers", strconv.Itoa(workers)))
		}
		o.report(b)
		results["httploop"] = o
	})

	for _, n := range []string{"backfill", "before", "colly", "httploop"} {
		o, ok := results[n]
		if !ok {
			continue
		}
		fmt.Printf("people: %-9s %6d pages (%d requests, %d robots.txt, %d failed) in %8s: %8.1f pages/s, CPU %.3f ms/page, peak RSS %6.1f MiB\n",
			n, o.pages, o.requests, o.robots, o.failed, o.wall.Round(time.Millisecond), o.pagesPerSec(), o.cpuPerPage(), o.rssMiB)
		if o.split {
			fmt.Printf("people: %-9s dispatcher CPU %.3f ms/page (%d steps, %d commits), supervisor CPU %.3f ms/page; peak RSS dispatcher %.1f MiB, supervisor %.1f MiB\n",
				n, perPage(o.dispCPU, o.pages), o.steps, o.commits, perPage(o.supCPU, o.pages), o.dispRSS, o.supRSS)
		}
	}
	if bf, bb := results["backfill"], results["before"]; bf.split && bb.split {
		fmt.Printf("people: backfill/before: dispatcher CPU per page ×%.2f, steps ×%.2f, commits ×%.2f\n",
			perPage(bf.dispCPU, bf.pages)/perPage(bb.dispCPU, bb.pages), float64(bf.steps)/float64(max(bb.steps, 1)), float64(bf.commits)/float64(max(bb.commits, 1)))
	}
	if bf, ok := results["backfill"]; ok {
		fmt.Printf("people: backfill filled %d of %d values (recall %.3f), %d wrong\n", bf.found, bf.want, float64(bf.found)/float64(max(bf.want, 1)), bf.wrong)
		if c, ok := results["colly"]; ok {
			fmt.Printf("people: backfill/colly: pages/s ×%.2f, job time ×%.2f, CPU per page ×%.2f, the job's CPU ×%.2f, peak RSS ×%.2f\n",
				bf.pagesPerSec()/c.pagesPerSec(), bf.wall.Seconds()/c.wall.Seconds(), bf.cpuPerPage()/c.cpuPerPage(), bf.cpu.Seconds()/c.cpu.Seconds(), bf.rssMiB/c.rssMiB)
		}
		if h, ok := results["httploop"]; ok {
			fmt.Printf("people: backfill/httploop: pages/s ×%.2f\n", bf.pagesPerSec()/h.pagesPerSec())
		}
		if bb, ok := results["before"]; ok {
			fmt.Printf("people: before filled %d of %d values (recall %.3f), %d wrong\n", bb.found, bb.want, float64(bb.found)/float64(max(bb.want, 1)), bb.wrong)
			fmt.Printf("people: backfill/before: pages/s ×%.2f, job time ×%.2f, CPU per page ×%.2f, peak RSS ×%.2f\n",
				bf.pagesPerSec()/bb.pagesPerSec(), bf.wall.Seconds()/bb.wall.Seconds(), bf.cpuPerPage()/bb.cpuPerPage(), bf.rssMiB/bb.rssMiB)
			if c, ok := results["colly"]; ok {
				fmt.Printf("people: before/colly: pages/s ×%.2f, job time ×%.2f, CPU per page ×%.2f, the job's CPU ×%.2f\n",
					bb.pagesPerSec()/c.pagesPerSec(), bb.wall.Seconds()/c.wall.Seconds(), bb.cpuPerPage()/c.cpuPerPage(), bb.cpu.Seconds()/c.cpu.Seconds())
			}
		}
	}
	return results
}

// peopleDir is the benchmark's work directory: a temporary one removed at
// the end, or with PEOPLE_KEEP=1 one that is kept (its path printed), so
// the state, results and logs of each contender can be inspected.
func peopleDir(b *testing.B) string {
	if os.Getenv("PEOPLE_KEEP") != "1" {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp("", "people-bench-")
	if err != nil {
		b.Fatal(err)
	}
	fmt.Printf("people: work directory kept: %s\n", dir)
	return dir
}

// peopleOutcome is one contender's run on the people web.
type peopleOutcome struct {
	outcome
	cpu                time.Duration // user + system
	urls               []string      // distinct pages fetched
	found, want, wrong int           // backfill's values against the truth
	// A split run (PEOPLE_SPLIT): each process's CPU and peak RSS, the
	// dispatcher's steps and commits (from its last log line), and the
	// run's state directory.
	split           bool
	dispCPU, supCPU time.Duration
	dispRSS, supRSS float64
	steps, commits  int
	state           string
}

func perPage(d time.Duration, pages int) float64 {
	return float64(d.Microseconds()) / 1000 / float64(max(pages, 1))
}

// runPeopleSplit runs backfill on the people web as a dispatcher and one
// supervisor (the cluster harness), with the flags runBackfill gives run.
func runPeopleSplit(b *testing.B, cl *clusterBench, name string, depth, workers int) peopleOutcome {
	c := cl.run(b, name, clusterRun{supervisors: 1, workers: workers,
		dispatcher: []string{"--depth", strconv.Itoa(depth), "--host-in-flight", "4"},
		supervisor: []string{"--delay", "0"}, partial: true})
	o := peopleOutcome{split: true, dispCPU: c.dispCPU, supCPU: c.supCPU, dispRSS: c.dispRSS, supRSS: c.supRSS, state: c.state}
	// Pages as runPeople counts them: distinct pages asked for, failed
	// ones included (a page that failed is not asked again in one run).
	o.pages, o.requests, o.robots, o.failed, o.probes, o.wall = c.pages+c.failed, c.requests-c.robots, c.robots, c.failed, c.probes, c.wall
	o.cpu, o.rssMiB = c.dispCPU+c.supCPU, c.dispRSS+c.supRSS
	for _, line := range bytes.Split(c.dispLog, []byte("\n")) {
		var rec struct {
			Msg            string
			Steps, Commits int
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "dispatcher finished" {
			o.steps, o.commits = rec.Steps, rec.Commits
		}
	}
	return o
}

func (o peopleOutcome) cpuPerPage() float64 {
	return float64(o.cpu.Microseconds()) / 1000 / float64(max(o.pages, 1))
}

func (o peopleOutcome) report(b *testing.B) {
	b.ReportMetric(o.pagesPerSec(), "pages/s")
	b.ReportMetric(o.rssMiB, "peakRSS-MiB")
	b.ReportMetric(float64(o.pages), "pages")
	b.ReportMetric(o.cpuPerPage(), "cpu-ms/page")
}

// runPeople runs one contender and counts, from the web's log, the
// distinct pages it fetched (robots.txt and soft-404 probes excluded).
func (cb *crawlBench) runPeople(b *testing.B, cmd *exec.Cmd) peopleOutcome {
	base, before, cpu := cb.runProcess(b, cmd)
	o := peopleOutcome{outcome: base, cpu: cpu}
	o.urls = cb.tally(&o.outcome, before)
	sort.Strings(o.urls)
	return o
}

// peopleRecall compares the values backfill stored with the truth: found
// are the truth's non-empty values it filled, want all of them, wrong the
// values it filled that the truth does not hold.
func peopleRecall(b *testing.B, results string, truth map[string]map[string]string) (found, want, wrong int) {
	ctx := context.Background()
	st, err := store.Open(ctx, results)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	got := map[string]map[string]string{}
	err = st.Records(ctx, func(r store.Record) error {
		m := map[string]string{}
		for f, v := range r.Found {
			m[f] = v.Value
		}
		got[r.ID] = m
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for id, fields := range truth {
		for f, v := range fields {
			g := got[id][f]
			switch {
			case v != "" && g == v:
				found++
				want++
			case v != "":
				want++
				if g != "" {
					wrong++
				}
			case g != "":
				wrong++
			}
		}
	}
	return found, want, wrong
}
