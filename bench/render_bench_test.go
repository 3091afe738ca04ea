//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"backfill/testweb"
)

// BenchmarkRender crawls the people web (testweb.StartPeople: five
// profile layouts, one written by JavaScript, five mappings sharing one
// URL pattern) with `backfill run` twice in one invocation, as two OS
// processes one after the other: without --render and with it. It prints
// each run's wall time, the peak RSS of its largest process, the peak PSS of
// its whole process tree (the browser's processes included, sampled from
// /proc every 100 ms), the pages rendered, the requests the web got, the
// fields filled against the web's truth, and the ratios render/static.
// Every run must keep the Crawl-delay on every host, browser requests
// included, and no favicon or image may be requested.
//
// BENCH_RENDER_HOSTS, BENCH_RENDER_RECORDS and BENCH_RENDER_DELAY size the
// crawl (defaults: 100 hosts of 4 profiles, 60 records, Crawl-delay 1s,
// depth 2). BENCH_RENDER_BEFORE, the path of another backfill binary, adds
// a third run of it with --render, to compare with an earlier build.
func BenchmarkRender(b *testing.B) {
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		b.Skip("no Chromium on PATH (Debian package chromium): the render benchmark needs one")
	}
	hosts := envInt(b, "BENCH_RENDER_HOSTS", testweb.DefaultPeopleHosts)
	records := envInt(b, "BENCH_RENDER_RECORDS", 60)
	delay := envDuration(b, "BENCH_RENDER_DELAY", time.Second)
	const depth = 2
	web, err := testweb.StartPeople(testweb.PeopleOptions{Hosts: hosts, Records: records, CrawlDelay: delay})
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	dir := b.TempDir()
	recordsPath := writeFile(b, dir, "records.csv", testweb.PeopleRecords(web))
	maps := filepath.Join(dir, "mappings")
	if err := os.Mkdir(maps, 0o755); err != nil {
		b.Fatal(err)
	}
	for name, data := range testweb.PeopleMappings() {
		writeFile(b, maps, name, data)
	}
	var resolve []string
	for hp, addr := range web.Resolve() {
		resolve = append(resolve, "--resolve", hp+":"+addr)
	}
	bin := goBuild(b, "..", "./cmd/backfill", filepath.Join(dir, "backfill"))
	fmt.Printf("render: people web of %d hosts, %d records, depth %d, Crawl-delay %v\n", hosts, records, depth, delay)

	type contender struct {
		name, bin string
		render    bool
	}
	runs := []contender{{"static", bin, false}, {"render", bin, true}}
	if before := os.Getenv("BENCH_RENDER_BEFORE"); before != "" {
		runs = append(runs, contender{"before", before, true})
	}
	results := map[string]renderOutcome{}
	for _, c := range runs {
		b.Run(c.name, func(b *testing.B) {
			var o renderOutcome
			for i := 0; i < b.N; i++ {
				state := filepath.Join(dir, fmt.Sprintf("state-%s-%d", c.name, i))
				args := []string{"run", "--records", recordsPath, "--mappings", maps, "--state-dir", state,
					"--summary", state + ".json", "--depth", strconv.Itoa(depth), "--allow-loopback",
					"--contact", "https://backfill.invalid/bench/render", "--log-level", "warn"}
				if c.render {
					args = append(args, "--render", "--chromium", browser)
				}
				args = append(args, resolve...)
				// An earlier build is measured as it is; this one must be
				// polite.
				o = runRender(b, web, exec.Command(c.bin, args...), delay, c.bin == bin)
				o.rendered, o.filled = renderSummary(b, c.bin, state)
			}
			truth := testweb.PeopleTruth(web, testweb.PeopleCrawl{Depth: depth, Render: c.render})
			for _, fields := range truth {
				for _, v := range fields {
					if v != "" {
						o.findable++
					}
				}
			}
			b.ReportMetric(o.wall.Seconds(), "wall-s")
			b.ReportMetric(o.treePSS, "peakTreePSS-MiB")
			results[c.name] = o
		})
	}
	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		o := results[n]
		fmt.Printf("render: %-6s %7s wall, peak RSS %5.1f MiB (largest process), tree peak PSS %6.1f MiB, %3d pages rendered, %4d requests (%d favicons and images, %d sooner than the delay), %d/%d findable fields filled\n",
			n, o.wall.Round(100*time.Millisecond), o.rssMiB, o.treePSS, o.rendered, o.requests, o.assets, o.early, o.filled, o.findable)
	}
	if s, r := results["static"], results["render"]; s.wall > 0 && r.wall > 0 {
		fmt.Printf("render: render/static: wall ×%.2f, tree peak PSS ×%.2f, requests ×%.2f\n",
			r.wall.Seconds()/s.wall.Seconds(), r.treePSS/s.treePSS, float64(r.requests)/float64(s.requests))
	}
}

// renderOutcome is one measured run of BenchmarkRender.
type renderOutcome struct {
	wall     time.Duration
	rssMiB   float64 // peak RSS of the largest process (backfill, or the browser it waited for)
	treePSS  float64 // peak PSS of backfill and every descendant, MiB
	requests int     // requests the web got during the run
	assets   int     // of which favicons and images
	early    int     // of which sooner after the previous one to their host than the delay
	rendered int     // pages the dispatcher sent to be rendered
	filled   int     // fields filled
	findable int     // fields the web's truth says a correct crawl fills
}

// runRender runs cmd, sampling its process tree's memory, and checks from
// the web's log that every host's delay held.
func runRender(b *testing.B, web *testweb.Web, cmd *exec.Cmd, delay time.Duration, polite bool) renderOutcome {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	before := len(web.Log())
	b.StartTimer()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", cmd.Path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), contenderTimeout)
	var peak float64
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, treePSSMiB(cmd.Process.Pid))
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	stop := context.AfterFunc(ctx, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	wall := time.Since(start)
	b.StopTimer()
	stop()
	cancel()
	wg.Wait()
	if err != nil {
		b.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, tail(stdout.Bytes()), tail(stderr.Bytes()))
	}
	o := renderOutcome{wall: wall, treePSS: peak}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		o.rssMiB = float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	last := map[string]time.Time{}
	for _, r := range web.Log()[before:] {
		o.requests++
		if r.Path == "/favicon.ico" || strings.HasPrefix(r.Path, "/img/") {
			o.assets++
		}
		if l, ok := last[r.Host]; ok && r.Time.Sub(l) < delay {
			o.early++
			if polite {
				b.Errorf("%s%s requested %v after the previous request to its host; Crawl-delay %v", r.Host, r.Path, r.Time.Sub(l), delay)
			}
		}
		last[r.Host] = r.Time
	}
	if polite && o.assets > 0 {
		b.Errorf("%d favicon and image requests: the browser's kinds must not be fetched", o.assets)
	}
	return o
}

// renderSummary reads a finished run's pages rendered from its summary and
// its filled fields from an export of its state.
func renderSummary(b *testing.B, bin, state string) (rendered, filled int) {
	data, err := os.ReadFile(state + ".json")
	if err != nil {
		b.Fatal(err)
	}
	var sum struct {
		RenderRetried int `json:"render_retried"`
	}
	if err := json.Unmarshal(data, &sum); err != nil {
		b.Fatalf("summary: %v", err)
	}
	out, err := exec.Command(bin, "export", "--state-dir", state, "--format", "jsonl", "--provenance").Output()
	if err != nil {
		b.Fatalf("export: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var rec struct {
			Provenance map[string]json.RawMessage `json:"provenance"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			b.Fatalf("export line %q: %v", sc.Text(), err)
		}
		filled += len(rec.Provenance)
	}
	return sum.RenderRetried, filled
}

// treePSSMiB sums the proportional set size of pid and its descendants.
func treePSSMiB(pid int) float64 {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], p)
	}
	var kib uint64
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if roll, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/smaps_rollup"); err == nil {
			for line := range strings.Lines(string(roll)) {
				if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
					if f := strings.Fields(rest); len(f) > 0 {
						n, _ := strconv.ParseUint(f[0], 10, 64)
						kib += n
					}
					break
				}
			}
		}
		queue = append(queue, children[p]...)
	}
	return float64(kib) / 1024
}
