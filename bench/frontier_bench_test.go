//go:build unix

package bench

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"backfill/testweb"
)

// BenchmarkFrontier is issue 35's measurement: how many requests a
// polite crawl makes for what it finds, against an oracle that knows the
// web. The people web (testweb.StartPeople) of FRONTIER_HOSTS (100) hosts
// × FRONTIER_PAGES (100) profiles, FRONTIER_RECORDS (300) records, each
// host asking its own Crawl-delay between FRONTIER_DELAY_MIN (200ms) and
// FRONTIER_DELAY_MAX (500ms) (both 0: no Crawl-delay, so backfill's
// default delay), FRONTIER_LATENCY (0) added to every response;
// `backfill run` at depth FRONTIER_DEPTH (2) with its default flags
// otherwise. FRONTIER_FOR, when set, interrupts each run after that long
// (a shorter run at the default delay).
//
// The oracle (testweb.PeopleOracleOf) is computed from the web's own
// model: the pages on a shortest path from each record's own link to the
// profile holding its values (records with nothing to find need none),
// plus one robots.txt for each host of those pages.
//
// Each build runs once, the base (FRONTIER_BASE_BIN, when set) first,
// then the branch, in the same run. From the web's own request log it
// prints each build's requests: pages by kind (homepages, team pages,
// profiles, host indexes, pages that answer 404), robots.txt and the
// supervisors' soft-404 probes apart, and requests / oracle; recall and
// precision against testweb.PeopleTruth; the wall time, and the hosts'
// time (a host's requests × its delay: the slowest host's, which bounds
// the wall time from below, and their sum).
//
//	cd bench && FRONTIER_BASE_BIN=/tmp/backfill-base go test -run '^$' -bench Frontier -benchtime 1x -timeout 60m .
func BenchmarkFrontier(b *testing.B) {
	hosts := envInt(b, "FRONTIER_HOSTS", 100)
	pages := envInt(b, "FRONTIER_PAGES", 100)
	nrec := envInt(b, "FRONTIER_RECORDS", 300)
	depth := envInt(b, "FRONTIER_DEPTH", 2)
	dmin := envDuration(b, "FRONTIER_DELAY_MIN", 200*time.Millisecond)
	dmax := envDuration(b, "FRONTIER_DELAY_MAX", 500*time.Millisecond)
	latency := envDuration(b, "FRONTIER_LATENCY", 0)
	runFor := envDuration(b, "FRONTIER_FOR", 0)

	web, err := testweb.StartPeople(testweb.PeopleOptions{Hosts: hosts, Pages: pages, Records: nrec,
		CrawlDelay: dmin, CrawlDelayMax: dmax, Latency: latency})
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	dir := b.TempDir()
	if os.Getenv("FRONTIER_KEEP") == "1" {
		if dir, err = os.MkdirTemp("", "frontier-bench-"); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("frontier: work directory kept: %s\n", dir)
	}
	cb := newCrawlInputs(b, web, dir, 0, testweb.PeopleRecords(web))
	maps := filepath.Join(dir, "mappings")
	if err := os.MkdirAll(maps, 0o755); err != nil {
		b.Fatal(err)
	}
	for name, data := range testweb.PeopleMappings() {
		writeFile(b, maps, name, data)
	}
	crawl := testweb.PeopleCrawl{Depth: depth}
	truth := testweb.PeopleTruth(web, crawl)
	oracle := testweb.PeopleOracleOf(web, crawl)
	least, all := testweb.PeopleLeastPages(web, crawl)
	delayOf := func(host string) time.Duration {
		if d := testweb.PeopleHostDelay(web, host); d > 0 {
			return d
		}
		return frontierDefaultDelay
	}
	fmt.Printf("frontier: people web of %d hosts × %d profiles, %d records, Crawl-delay %s..%s, latency %s, depth %d; GOMAXPROCS %d\n",
		hosts, pages, nrec, dmin, dmax, latency, depth, runtime.GOMAXPROCS(0))
	fmt.Printf("frontier: oracle %d requests (%d pages on shortest paths to the %d records' values + %d robots.txt); every page within depth %d: %d; the fewest pages when each record missing a value is crawled to its depth: %d\n",
		oracle.Requests, len(oracle.Pages), oracle.Records, oracle.Robots, depth, all, least)

	type build struct{ name, bin string }
	var builds []build
	if base := os.Getenv("FRONTIER_BASE_BIN"); base != "" {
		builds = append(builds, build{"base", base})
	}
	builds = append(builds, build{"branch", goBuild(b, "..", "./cmd/backfill", filepath.Join(dir, "backfill"))})
	type result struct {
		c                  frontierCounts
		found, want, wrong int
		wall               time.Duration
		slowest, sum       time.Duration // the hosts' time: requests × delay
		summary            string
	}
	results := map[string]result{}
	for _, bd := range builds {
		b.Run(bd.name, func(b *testing.B) {
			var r result
			for i := 0; i < b.N; i++ {
				state := filepath.Join(dir, fmt.Sprintf("%s-state-%d", bd.name, i))
				args := []string{"run", "--records", cb.records, "--mappings", maps,
					"--depth", strconv.Itoa(depth), "--state-dir", state, "--allow-loopback"}
				if level := os.Getenv("FRONTIER_LOG_LEVEL"); level != "" {
					// With FRONTIER_KEEP: why each link was taken or
					// pruned, in the kept directory.
					args = append(args, "--log-level", level, "--log-file", filepath.Join(dir, bd.name+"-log.jsonl"))
				} else {
					args = append(args, "--log-level", "warn")
				}
				cmd := exec.Command(bd.bin, append(args, cb.resolveA...)...)
				before := len(web.Log())
				if runFor > 0 {
					// SIGINT after runFor: the run stops cleanly and
					// prints its summary.
					timer := time.AfterFunc(runFor, func() {
						if cmd.Process != nil {
							cmd.Process.Signal(syscall.SIGINT)
						}
					})
					o, _, _ := cb.runProcess(b, cmd)
					timer.Stop()
					r.wall, r.summary = o.wall, string(o.stdout)
				} else {
					o, _, _ := cb.runProcess(b, cmd)
					r.wall, r.summary = o.wall, string(o.stdout)
				}
				log := web.Log()[before:]
				r.c = countFrontier(log, oracle.Pages)
				if os.Getenv("FRONTIER_KEEP") == "1" {
					var lines strings.Builder
					for _, q := range log {
						fmt.Fprintf(&lines, "%s %d http://%s%s\n", q.Time.Format(time.RFC3339Nano), q.Status, q.Host, q.Path)
					}
					writeFile(b, dir, bd.name+"-requests.txt", []byte(lines.String()))
					writeFile(b, dir, "oracle.txt", []byte(strings.Join(oracle.Pages, "\n")+"\n"))
				}
				r.found, r.want, r.wrong = peopleRecall(b, filepath.Join(state, "results.db"), truth)
				r.sum, r.slowest = 0, 0
				for h, n := range r.c.perHost {
					t := time.Duration(n) * delayOf(h)
					r.sum += t
					r.slowest = max(r.slowest, t)
				}
			}
			b.ReportMetric(float64(r.c.requests()), "requests")
			b.ReportMetric(float64(r.c.requests())/float64(max(oracle.Requests, 1)), "×oracle")
			b.ReportMetric(r.wall.Seconds(), "wall-s")
			results[bd.name] = r
		})
	}
	for _, bd := range builds {
		r, ok := results[bd.name]
		if !ok {
			continue
		}
		c := r.c
		fmt.Printf("frontier: %-6s %5d requests = ×%.2f the oracle (×%.2f without the %d probes): %d pages (%d homepages, %d team pages, %d profiles, %d indexes, %d other; %d answered 404) + %d robots.txt + %d soft-404 probes\n",
			bd.name, c.requests(), float64(c.requests())/float64(max(oracle.Requests, 1)),
			float64(c.requests()-c.probes)/float64(max(oracle.Requests, 1)), c.probes,
			c.pages, c.kinds["home"], c.kinds["team"], c.kinds["profile"], c.kinds["index"], c.kinds["other"], c.notFound, c.robots, c.probes)
		fmt.Printf("frontier: %-6s pages the oracle does without: %d homepages, %d team pages, %d profiles, %d indexes, %d other\n",
			bd.name, c.extra["home"], c.extra["team"], c.extra["profile"], c.extra["index"], c.extra["other"])
		precision := 1.0
		if n := r.found + r.wrong; n > 0 {
			precision = float64(r.found) / float64(n)
		}
		fmt.Printf("frontier: %-6s recall %.3f (%d of %d values), precision %.3f (%d wrong); wall %s; hosts' time (requests × delay) slowest %s, sum %s\n",
			bd.name, float64(r.found)/float64(max(r.want, 1)), r.found, r.want, precision, r.wrong,
			r.wall.Round(time.Millisecond), r.slowest.Round(time.Millisecond), r.sum.Round(time.Millisecond))
		for _, line := range strings.Split(r.summary, "\n") {
			if strings.Contains(line, "per complete record") || strings.Contains(line, "pruned") {
				fmt.Printf("frontier: %-6s summary: %s\n", bd.name, strings.TrimSpace(line))
			}
		}
	}
	base, okBase := results["base"]
	br, okBranch := results["branch"]
	if okBase && okBranch {
		fmt.Printf("frontier: branch/base: requests ×%.2f, wall ×%.2f, hosts' time slowest ×%.2f, sum ×%.2f\n",
			float64(br.c.requests())/float64(max(base.c.requests(), 1)), br.wall.Seconds()/base.wall.Seconds(),
			br.slowest.Seconds()/max(base.slowest.Seconds(), 1e-9), br.sum.Seconds()/max(base.sum.Seconds(), 1e-9))
	}
}

// frontierDefaultDelay is backfill's delay between two requests to a
// host whose robots.txt sets no Crawl-delay (run --delay's default).
const frontierDefaultDelay = 15 * time.Second

// frontierCounts are a crawl's requests to the people web, from its log.
type frontierCounts struct {
	pages, robots, probes, notFound int
	kinds                           map[string]int // pages by kind
	extra                           map[string]int // distinct pages outside the oracle's, by kind
	perHost                         map[string]int // every request, by host
}

func (c frontierCounts) requests() int { return c.pages + c.robots + c.probes }

// countFrontier counts the requests of log, and the distinct pages not
// among the oracle's. A page asked twice counts twice.
func countFrontier(log []testweb.Request, oracle []string) frontierCounts {
	c := frontierCounts{kinds: map[string]int{}, extra: map[string]int{}, perHost: map[string]int{}}
	need := map[string]bool{}
	for _, u := range oracle {
		need[u] = true
	}
	for _, r := range log {
		c.perHost[r.Host]++
		switch {
		case r.Path == "/robots.txt":
			c.robots++
			continue
		case strings.HasPrefix(r.Path, "/backfill-probe-"):
			c.probes++
			continue
		}
		c.pages++
		if r.Status == 404 {
			c.notFound++
		}
		kind := "other"
		switch {
		case strings.HasPrefix(r.Path, "/home/"):
			kind = "home"
		case strings.HasPrefix(r.Path, "/team/"):
			kind = "team"
		case strings.HasPrefix(r.Path, "/people/"):
			kind = "profile"
		case r.Path == "/":
			kind = "index"
		}
		c.kinds[kind]++
		if u := "http://" + r.Host + r.Path; !need[u] {
			need[u] = true // once
			c.extra[kind]++
		}
	}
	return c
}

// BenchmarkFrontierLearn is issue 35's measurement of `mappings learn`:
// the pages its depth search fetches to find the same teachers. The
// people web of LEARN_HOSTS (100) hosts × LEARN_PAGES (4) profiles and
// LEARN_RECORDS (300) records, as the learning acceptance test has it;
// every fifth record teaches, with the values a correct crawl that
// renders finds (testweb.PeopleTruth); `backfill mappings learn --depth
// LEARN_DEPTH (2)` with no delay. Each build runs once, the base
// (FRONTIER_BASE_BIN, when set) first, then the branch; it prints the
// requests each made (robots.txt apart) and whether they learned the
// same mappings.
//
//	cd bench && FRONTIER_BASE_BIN=/tmp/backfill-base go test -run '^$' -bench FrontierLearn -benchtime 1x -timeout 30m .
func BenchmarkFrontierLearn(b *testing.B) {
	hosts := envInt(b, "LEARN_HOSTS", 100)
	pages := envInt(b, "LEARN_PAGES", 4)
	nrec := envInt(b, "LEARN_RECORDS", 300)
	depth := envInt(b, "LEARN_DEPTH", 2)
	web, err := testweb.StartPeople(testweb.PeopleOptions{Hosts: hosts, Pages: pages, Records: nrec})
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	dir := b.TempDir()
	teachers, n := peopleTeachers(b, web)
	teachersCSV := writeFile(b, dir, "teachers.csv", teachers)
	fmt.Printf("frontier-learn: people web of %d hosts × %d profiles, %d records, %d of them teachers, --depth %d; GOMAXPROCS %d\n",
		hosts, pages, nrec, n, depth, runtime.GOMAXPROCS(0))

	type build struct{ name, bin string }
	var builds []build
	if base := os.Getenv("FRONTIER_BASE_BIN"); base != "" {
		builds = append(builds, build{"base", base})
	}
	builds = append(builds, build{"branch", goBuild(b, "..", "./cmd/backfill", filepath.Join(dir, "backfill"))})
	learned := map[string]map[string]string{} // build → learned file → content
	for _, bd := range builds {
		b.Run(bd.name, func(b *testing.B) {
			var c frontierCounts
			var wall time.Duration
			for i := 0; i < b.N; i++ {
				out := filepath.Join(dir, fmt.Sprintf("%s-learned-%d", bd.name, i))
				args := []string{"mappings", "learn", "--records", teachersCSV, "--fields", strings.Join(testweb.PeopleFields, ","),
					"--depth", strconv.Itoa(depth), "-o", out, "--allow-loopback", "--delay", "0", "--contact", "https://backfill.invalid/bench"}
				before := len(web.Log())
				start := time.Now()
				cmd := exec.Command(bd.bin, append(args, resolveFlags(web)...)...)
				if msg, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%s: %v\n%s", bd.name, err, tail(msg))
				}
				wall = time.Since(start)
				c = countFrontier(web.Log()[before:], nil)
				learned[bd.name] = readDir(b, out)
			}
			b.ReportMetric(float64(c.pages), "pages")
			fmt.Printf("frontier-learn: %-6s %4d requests for pages (%d homepages, %d team pages, %d profiles, %d indexes; %d answered 404) + %d robots.txt in %s; %d mapping files learned\n",
				bd.name, c.pages, c.kinds["home"], c.kinds["team"], c.kinds["profile"], c.kinds["index"], c.notFound, c.robots,
				wall.Round(time.Millisecond), len(learned[bd.name]))
		})
	}
	if base, ok := learned["base"]; ok {
		same := len(base) == len(learned["branch"])
		for name, content := range base {
			same = same && learned["branch"][name] == content
		}
		fmt.Printf("frontier-learn: branch and base learned the same mapping files: %v\n", same)
	}
}

// peopleTeachers is the records CSV of a people web with every fifth
// record teaching: the values a correct crawl that renders finds filled
// in. It returns the CSV and the teachers' count.
func peopleTeachers(b *testing.B, web *testweb.Web) ([]byte, int) {
	known := testweb.PeopleTruth(web, testweb.PeopleCrawl{Depth: 2, Render: true})
	rows, err := csv.NewReader(bytes.NewReader(testweb.PeopleRecords(web))).ReadAll()
	if err != nil {
		b.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	var out bytes.Buffer
	w := csv.NewWriter(&out)
	w.Write(rows[0])
	n := 0
	for i, r := range rows[1:] {
		if i%5 != 0 {
			continue
		}
		for f, v := range known[r[col["id"]]] {
			if v != "" {
				r[col[f]] = v
			}
		}
		w.Write(r)
		n++
	}
	w.Flush()
	return out.Bytes(), n
}

// readDir reads every file of dir, by name.
func readDir(b *testing.B, dir string) map[string]string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		out[e.Name()] = string(data)
	}
	return out
}
