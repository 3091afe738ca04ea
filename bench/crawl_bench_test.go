//go:build unix

package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"backfill/testweb"
)

// Scale and shape of the crawl, from the environment so that `make bench`
// and a bare `go test -bench` agree. The defaults are the floor:
// 200 hosts × 100 profiles plus an index each, 20,200 pages.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		b.Fatalf("%s=%q: want a non-negative duration such as 2ms", name, v)
	}
	return d
}

// envDurations reads a comma-separated list of durations from the
// environment, def alone when unset.
func envDurations(b *testing.B, name string, def time.Duration) []time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return []time.Duration{def}
	}
	var ds []time.Duration
	for _, f := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d < 0 {
			b.Fatalf("%s=%q: want non-negative durations such as 0,100ms", name, v)
		}
		ds = append(ds, d)
	}
	return ds
}

// minShare is how much of the web a contender must fetch for its figure to
// count: a crawler that skips pages would otherwise look fast.
const minShare = 0.98

// contenderTimeout bounds one contender's run.
const contenderTimeout = 15 * time.Minute

// outcome is one contender's measured run.
type outcome struct {
	pages    int // distinct pages fetched (robots.txt excluded), from the web's log
	requests int // requests other than robots.txt, duplicates included
	robots   int // robots.txt requests
	failed   int // responses other than 200
	probes   int // soft-404 probes (backfill asks each host for an invented path once)
	wall     time.Duration
	rssMiB   float64
	stdout   []byte
}

func (o outcome) pagesPerSec() float64 { return float64(o.pages) / o.wall.Seconds() }

// crawlBench holds what the contenders share: the web and the input files.
type crawlBench struct {
	web      *testweb.Web
	dir      string
	records  string   // records CSV for backfill
	seeds    string   // the records' links, one a line
	urls     string   // every page URL, one a line
	resolve  string   // host:port:address:port lines
	resolveA []string // the same, as --resolve arguments
	expected int      // pages a complete crawl fetches (robots.txt excluded)
	workers  int
}

func BenchmarkCrawl(b *testing.B) {
	hosts := envInt(b, "BENCH_HOSTS", testweb.DefaultLargeHosts)
	pages := envInt(b, "BENCH_PAGES", testweb.DefaultLargePages)
	workers := envInt(b, "BENCH_WORKERS", 16)
	latency := envDuration(b, "BENCH_LATENCY", 0)

	web, err := testweb.StartLarge(testweb.LargeOptions{Hosts: hosts, Pages: pages, Latency: latency})
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	cb := newCrawlBench(b, web, pages, workers)
	fmt.Printf("crawl: testweb of %d hosts × (%d profiles + index) = %d pages, latency %s, %d workers, GOMAXPROCS %d\n",
		hosts, pages, cb.expected, latency, workers, runtime.GOMAXPROCS(0))

	results := map[string]outcome{}
	b.Run("backfill", func(b *testing.B) {
		bin := goBuild(b, "..", "./cmd/backfill", filepath.Join(cb.dir, "backfill"))
		// The same mappings colly runs: the fixture web's, not the
		// generic bundled ones that run on every page.
		maps := fixtureMappings(b, cb.dir)
		results["backfill"] = cb.measure(b, func(i int) *exec.Cmd {
			args := []string{"run",
				"--records", cb.records,
				"--mappings", maps,
				// With no delay a host answers in a millisecond: four of
				// its tasks in flight keep it busy while results make
				// their round trip through the dispatcher. (The default,
				// 2, suits real Crawl-delays.)
				"--host-in-flight", "4",
				"--state-dir", filepath.Join(cb.dir, fmt.Sprintf("state-%d", i)),
				// No pause between requests to a host.
				"--delay", "0",
				"--workers", strconv.Itoa(workers),
				"--allow-loopback",
				"--log-level", "warn",
			}
			args = append(args, cb.resolveA...)
			return exec.Command(bin, args...)
		})
	})
	b.Run("colly", func(b *testing.B) {
		bin := goBuild(b, ".", "./cmd/collycrawl", filepath.Join(cb.dir, "collycrawl"))
		mappings, err := filepath.Abs("../mappings")
		if err != nil {
			b.Fatal(err)
		}
		o := cb.measure(b, func(int) *exec.Cmd {
			return exec.Command(bin, "-seeds", cb.seeds, "-resolve", cb.resolve,
				"-mappings", mappings, "-parallelism", strconv.Itoa(workers), "-depth", "1")
		})
		// The extraction must have run on every profile, or the
		// comparison is not of the same work.
		var sum struct{ Extracted int }
		if err := json.Unmarshal(o.stdout, &sum); err != nil {
			b.Fatalf("colly summary %q: %v", o.stdout, err)
		}
		if profiles := hosts * pages; float64(sum.Extracted) < minShare*float64(profiles) {
			b.Fatalf("colly extracted fields from %d pages, want about %d profiles", sum.Extracted, profiles)
		}
		results["colly"] = o
	})
	b.Run("httploop", func(b *testing.B) {
		bin := goBuild(b, ".", "./cmd/httploop", filepath.Join(cb.dir, "httploop"))
		results["httploop"] = cb.measure(b, func(int) *exec.Cmd {
			return exec.Command(bin, "-urls", cb.urls, "-resolve", cb.resolve, "-workers", strconv.Itoa(workers))
		})
	})

	// The summary goes to stdout, not b.Logf: a parent benchmark's log is
	// shown only with -v, and these lines are the point of the run.
	var names []string
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		o := results[n]
		fmt.Printf("crawl: %-9s %6d pages (%d requests, %d robots.txt, %d soft-404 probes, %d failed) in %8s: %8.1f pages/s, peak RSS %6.1f MiB\n",
			n, o.pages, o.requests, o.robots, o.probes, o.failed, o.wall.Round(time.Millisecond), o.pagesPerSec(), o.rssMiB)
	}
	bf, ok := results["backfill"]
	for _, other := range []string{"colly", "httploop"} {
		if o, ok2 := results[other]; ok && ok2 {
			fmt.Printf("crawl: backfill/%s: pages/s ×%.2f, peak RSS ×%.2f\n", other, bf.pagesPerSec()/o.pagesPerSec(), bf.rssMiB/o.rssMiB)
		}
	}
}

// newCrawlBench writes the contenders' input files for web.
func newCrawlBench(b *testing.B, web *testweb.Web, pages, workers int) *crawlBench {
	records := testweb.LargeRecords(web)
	if len(records) == 0 {
		b.Fatal("testweb.LargeRecords returned nothing")
	}
	cb := newCrawlInputs(b, web, b.TempDir(), workers, records)

	// Every page of the large web, as StartLarge documents it: the index
	// at / and the profiles /p/0001 … on each host.
	var urls bytes.Buffer
	for _, h := range web.Hosts() {
		fmt.Fprintf(&urls, "http://%s/\n", h)
		for p := 1; p <= pages; p++ {
			fmt.Fprintf(&urls, "http://%s/p/%04d\n", h, p)
		}
		cb.expected += pages + 1
	}
	cb.urls = writeFile(b, cb.dir, "urls.txt", urls.Bytes())
	return cb
}

// newCrawlInputs writes in dir what every contender of a crawl of web
// reads: the records, their links as seeds, and the host:port:address:port
// lines that point at web's hosts (a file, and --resolve arguments).
func newCrawlInputs(b *testing.B, web *testweb.Web, dir string, workers int, records []byte) *crawlBench {
	cb := &crawlBench{web: web, dir: dir, workers: workers}
	cb.records = writeFile(b, dir, "records.csv", records)
	seeds, err := recordLinks(records)
	if err != nil {
		b.Fatal(err)
	}
	cb.seeds = writeFile(b, dir, "seeds.txt", []byte(strings.Join(seeds, "\n")+"\n"))
	cb.resolveA = resolveFlags(web)
	var res strings.Builder
	for i := 1; i < len(cb.resolveA); i += 2 {
		res.WriteString(cb.resolveA[i] + "\n")
	}
	cb.resolve = writeFile(b, dir, "resolve.txt", []byte(res.String()))
	return cb
}

// recordLinks returns every http(s) value of a records CSV, as backfill
// reads a record's links.
func recordLinks(records []byte) ([]string, error) {
	rows, err := csv.NewReader(bytes.NewReader(records)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("records csv: %w", err)
	}
	var links []string
	for _, row := range rows[1:] {
		for _, v := range row {
			if strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://") {
				links = append(links, v)
			}
		}
	}
	if len(links) == 0 {
		return nil, fmt.Errorf("records csv: no links")
	}
	return links, nil
}

// measure runs the contender b.N times (once with -benchtime 1x), each
// from a fresh start, and checks from the web's log that it crawled
// (nearly) the whole web. It reports the last run.
func (cb *crawlBench) measure(b *testing.B, command func(i int) *exec.Cmd) outcome {
	b.StopTimer()
	var o outcome
	for i := 0; i < b.N; i++ {
		o = cb.runOnce(b, command(i))
	}
	b.ReportMetric(o.pagesPerSec(), "pages/s")
	b.ReportMetric(o.rssMiB, "peakRSS-MiB")
	b.ReportMetric(float64(o.pages), "pages")
	return o
}

func (cb *crawlBench) runOnce(b *testing.B, cmd *exec.Cmd) outcome {
	o, before, _ := cb.runProcess(b, cmd)
	cb.tally(&o, before)
	if float64(o.pages) < minShare*float64(cb.expected) {
		b.Fatalf("%s fetched %d distinct pages of %d (%d requests, %d failed); a partial crawl is not comparable\nstdout:\n%s",
			filepath.Base(cmd.Path), o.pages, cb.expected, o.requests, o.failed, tail(o.stdout))
	}
	return o
}

// tally counts into o the web's requests from before on in its log, and
// returns the distinct pages fetched (robots.txt and soft-404 probes
// excluded) as URLs, in the order first fetched.
func (cb *crawlBench) tally(o *outcome, before int) []string {
	seen := map[string]bool{}
	var urls []string
	for _, r := range cb.web.Log()[before:] {
		if r.Path == "/robots.txt" {
			o.robots++
			continue
		}
		o.requests++
		if strings.HasPrefix(r.Path, "/backfill-probe-") {
			o.probes++ // backfill's soft-404 probe: a request, not a page
			continue
		}
		if r.Status != 200 {
			o.failed++
		}
		u := "http://" + r.Host + r.Path
		if !seen[u] {
			seen[u] = true
			urls = append(urls, u)
		}
	}
	o.pages = len(urls)
	return urls
}

// runProcess runs one contender under the timer and returns its wall time,
// peak RSS and stdout, where its requests begin in the web's log, and its
// CPU (user + system). A contender that fails fails the benchmark.
func (cb *crawlBench) runProcess(b *testing.B, cmd *exec.Cmd) (o outcome, before int, cpu time.Duration) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	ctx, cancel := context.WithTimeout(context.Background(), contenderTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
	})
	defer stop()

	before = len(cb.web.Log())
	b.StartTimer()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", cmd.Path, err)
	}
	err := cmd.Wait()
	wall := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(cmd.Path), err, tail(stdout.Bytes()), tail(stderr.Bytes()))
	}
	o = outcome{wall: wall, stdout: bytes.TrimSpace(stdout.Bytes()), rssMiB: peakRSSMiB(cmd)}
	return o, before, cpuOf(cmd)
}

// peakRSSMiB is the largest resident set of a finished process, in MiB.
func peakRSSMiB(c *exec.Cmd) float64 {
	if c.ProcessState == nil {
		return 0
	}
	ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	maxrss := float64(ru.Maxrss) // KiB on Linux
	if runtime.GOOS == "darwin" {
		maxrss /= 1024 // bytes there
	}
	return maxrss / 1024
}

// cpuOf is the user and system time of a finished process.
func cpuOf(c *exec.Cmd) time.Duration {
	if c.ProcessState == nil {
		return 0
	}
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return 0
}

// goBuild builds pkg of the module in dir into out, outside the timer.
func goBuild(b *testing.B, dir, pkg, out string) string {
	b.StopTimer()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build %s: %v\n%s", pkg, err, msg)
	}
	return out
}

// fixtureMappings copies the fixture web's own mappings
// (../mappings/testweb-*.json) into dir/mappings and returns that folder.
func fixtureMappings(b *testing.B, dir string) string {
	maps := filepath.Join(dir, "mappings")
	if err := os.MkdirAll(maps, 0o755); err != nil {
		b.Fatal(err)
	}
	files, _ := filepath.Glob("../mappings/testweb-*.json")
	if len(files) == 0 {
		b.Fatal("no fixture-web mappings in ../mappings")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		writeFile(b, maps, filepath.Base(f), data)
	}
	return maps
}

func writeFile(b *testing.B, dir, name string, data []byte) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return p
}

// resolveFlags are the --resolve flags that point backfill at web's
// hosts, in a stable order.
func resolveFlags(web *testweb.Web) []string {
	res := web.Resolve()
	hostPorts := make([]string, 0, len(res))
	for hp := range res {
		hostPorts = append(hostPorts, hp)
	}
	sort.Strings(hostPorts)
	var flags []string
	for _, hp := range hostPorts {
		flags = append(flags, "--resolve", hp+":"+res[hp])
	}
	return flags
}

// tail keeps the end of a process's output for a failure message.
func tail(p []byte) []byte {
	const keep = 4000
	if len(p) > keep {
		return append([]byte("…"), p[len(p)-keep:]...)
	}
	return p
}
