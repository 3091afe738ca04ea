//go:build unix

package bench

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"backfill/testweb"
)

// defaultDelay is backfill's delay between two requests to a host whose
// robots.txt sets no Crawl-delay (run --delay's default).
const defaultDelay = 15 * time.Second

// BenchmarkDefaultDelay is issue 30's first measurement, at the settings
// a real crawl runs with: the people web of DEFAULT_HOSTS (1,000) hosts
// with no Crawl-delay and DEFAULT_LATENCY (100 ms) added to every
// response, DEFAULT_RECORDS (3,000) records, `backfill run` with its
// default flags (so the 15 s default delay, the default depth, workers and
// idle timeout) and DEFAULT_ARGS (none; flags separated by spaces, to try
// one), interrupted with SIGINT after DEFAULT_FOR (100 s).
//
// Each build runs once, the base (POLITE_BASE_BIN, when set) first, then
// the branch, in the same run. From the web's own request log it prints
// the URLs requested twice (which, by whom, how far apart) and the
// intervals from the end of a host's response to its next request that
// are shorter than the delay (how many, the shortest); and the request
// rate over the run against the ideal, hosts with work / 15 s (issue 31,
// goal 1), with the process's peak RSS.
//
//	cd bench && POLITE_BASE_BIN=/tmp/backfill-base go test -run '^$' -bench DefaultDelay -benchtime 1x -timeout 60m .
func BenchmarkDefaultDelay(b *testing.B) {
	hosts := envInt(b, "DEFAULT_HOSTS", 1000)
	nrec := envInt(b, "DEFAULT_RECORDS", 3000)
	latency := envDuration(b, "DEFAULT_LATENCY", 100*time.Millisecond)
	runFor := envDuration(b, "DEFAULT_FOR", 100*time.Second)

	web, err := testweb.StartPeople(testweb.PeopleOptions{Hosts: hosts, Records: nrec, Latency: latency})
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	dir := b.TempDir()
	records := testweb.PeopleRecords(web)
	cb := newCrawlInputs(b, web, dir, 0, records)
	maps := filepath.Join(dir, "mappings")
	if err := os.MkdirAll(maps, 0o755); err != nil {
		b.Fatal(err)
	}
	for name, data := range testweb.PeopleMappings() {
		writeFile(b, maps, name, data)
	}
	// The hosts with work from the start: those of the records' links.
	links, err := recordLinks(records)
	if err != nil {
		b.Fatal(err)
	}
	withWork := map[string]bool{}
	for _, l := range links {
		if u, err := url.Parse(l); err == nil {
			withWork[u.Hostname()] = true
		}
	}
	builds := baseAndBranch(b, "POLITE_BASE_BIN", dir)
	fmt.Printf("default-delay: people web of %d hosts (%d with a record's link), no Crawl-delay, latency %s, %d records; `backfill run` with default flags for %s, then SIGINT; GOMAXPROCS %d\n",
		hosts, len(withWork), latency, nrec, runFor, runtime.GOMAXPROCS(0))

	type result struct {
		polite     politeCounts
		pace       hostPace
		requests   int // arrived before the interrupt
		hostsAsked int
		wall, stop time.Duration
		rssMiB     float64
		cpu        time.Duration
		exit       string
	}
	results := map[string]result{}
	for _, bd := range builds {
		b.Run(bd.name, func(b *testing.B) {
			var r result
			for i := 0; i < b.N; i++ {
				args := []string{"run", "--records", cb.records, "--mappings", maps,
					"--state-dir", filepath.Join(dir, fmt.Sprintf("%s-state-%d", bd.name, i)),
					"--contact", "https://backfill.invalid/" + bd.name,
					"--allow-loopback", "--log-level", "warn"}
				args = append(args, strings.Fields(os.Getenv("DEFAULT_ARGS"))...)
				before := len(web.Log())
				ir := runInterrupted(b, exec.Command(bd.bin, append(args, cb.resolveA...)...), runFor)
				log := web.Log()[before:]
				r = result{wall: ir.interrupted.Sub(ir.start), stop: ir.end.Sub(ir.interrupted), rssMiB: ir.rssMiB, cpu: ir.cpu, exit: ir.exit}
				asked := map[string]bool{}
				for _, q := range log {
					if q.Time.Before(ir.interrupted) {
						r.requests++
						asked[q.Host] = true
					}
				}
				r.hostsAsked = len(asked)
				r.polite = countPoliteness(testweb.CheckPoliteness(log, sameDelay(defaultDelay)), ir.start)
				r.pace = paceOf(log, ir.start, defaultDelay)
			}
			r.polite.report(b, "default-delay", bd.name)
			ideal := float64(len(withWork)) / defaultDelay.Seconds()
			rate := float64(r.requests) / r.wall.Seconds()
			b.ReportMetric(rate, "requests/s")
			b.ReportMetric(rate/ideal, "of-ideal")
			b.ReportMetric(r.rssMiB, "peakRSS-MiB")
			fmt.Printf("default-delay: %-6s %d requests to %d hosts in %s: %.1f requests/s = ×%.2f of the ideal %.1f (%d hosts with work / %s); peak RSS %.1f MiB, CPU %s; stopped %s after SIGINT (%s)\n",
				bd.name, r.requests, r.hostsAsked, r.wall.Round(time.Millisecond), rate, rate/ideal, ideal, len(withWork), defaultDelay,
				r.rssMiB, r.cpu.Round(10*time.Millisecond), r.stop.Round(time.Millisecond), r.exit)
			b.ReportMetric(r.pace.kept, "pace-kept")
			fmt.Printf("default-delay: %-6s hosts' pace while they had work: ×%.3f of their delay and responses kept; %d intervals, %s a host waited past its delay on average; a host's first request %s after the start on average\n",
				bd.name, r.pace.kept, r.pace.gaps, r.pace.meanExtra().Round(time.Millisecond), r.pace.first.Round(time.Millisecond))
			results[bd.name] = r
		})
	}
	got := map[string]politeCounts{}
	for n, r := range results {
		got[n] = r.polite
	}
	comparePoliteness("default-delay", builds, got)
	if base, ok := results["base"]; ok {
		if br, ok := results["branch"]; ok {
			fmt.Printf("default-delay: branch/base: requests/s ×%.2f, peak RSS ×%.2f, CPU ×%.2f\n",
				(float64(br.requests)/br.wall.Seconds())/(float64(base.requests)/base.wall.Seconds()),
				br.rssMiB/base.rssMiB, br.cpu.Seconds()/base.cpu.Seconds())
		}
	}
}

// interruptedRun is a process run for a while and then interrupted.
type interruptedRun struct {
	start, interrupted, end time.Time
	rssMiB                  float64
	cpu                     time.Duration
	exit                    string // how it ended: its exit status
	output                  []byte
}

// runInterrupted starts cmd, sends it SIGINT after d, and waits for it to
// end, as a user stopping a crawl with Ctrl-C. A process still running a
// minute after the interrupt is killed and fails the benchmark; one that
// ends before d fails it too, since the run was meant to be cut short.
func runInterrupted(b *testing.B, cmd *exec.Cmd, d time.Duration) interruptedRun {
	const patience = time.Minute
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	r := interruptedRun{start: time.Now()}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", cmd.Path, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
		b.Fatalf("%s ended after %s, before the interrupt at %s: %v\n%s", cmd.Path, time.Since(r.start), d, err, tail(out.Bytes()))
	case <-time.After(d):
	}
	r.interrupted = time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err = <-done:
	case <-time.After(patience):
		cmd.Process.Kill()
		<-done
		b.Fatalf("%s still running %s after SIGINT\n%s", cmd.Path, patience, tail(out.Bytes()))
	}
	r.end = time.Now()
	r.rssMiB, r.cpu, r.output = peakRSSMiB(cmd), cpuOf(cmd), out.Bytes()
	r.exit = "exit 0"
	if err != nil {
		r.exit = err.Error()
	}
	return r
}
