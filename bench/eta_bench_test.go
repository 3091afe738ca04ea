//go:build unix

package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"backfill/testweb"
)

// BenchmarkETA measures how well a crawl with a delay says how long it
// will take (issue 31, goal 3): `backfill run` crawls the people web
// (ETA_HOSTS hosts × ETA_PAGES profiles, ETA_RECORDS records, depth
// ETA_DEPTH) at --delay ETA_DELAY, every response ETA_LATENCY late, with
// ETA_WORKERS workers, while the benchmark reads its status file every
// quarter second. Each sample's ETA (the dispatcher's estimate and its
// lower bound, status.json's "eta") is set against the time the crawl
// then still took; so is the ETA the progress line gave before, records
// left at the pace records completed over the last 30 s. Printed: the
// dry run's bound (`run --dry-run`), the first bound and when it came, and
// at 10, 25, 50, 75 and 90 % of the crawl each estimate over the time
// left (1.00 is exact). Goal: at half the crawl the estimate within 25 %.
//
// ETA_BEFORE names a binary built from another commit: it runs the same
// crawl first, in the same run, for the baseline (a build without the
// dispatcher's ETA shows the progress line's only).
//
//	cd bench && go test -run '^$' -bench ETA -benchtime 1x -timeout 30m .
func BenchmarkETA(b *testing.B) {
	hosts := envInt(b, "ETA_HOSTS", 20)
	pages := envInt(b, "ETA_PAGES", 200)
	nrec := envInt(b, "ETA_RECORDS", 300)
	depth := envInt(b, "ETA_DEPTH", 2)
	workers := envInt(b, "ETA_WORKERS", 16)
	delay := envDuration(b, "ETA_DELAY", time.Second)
	latency := envDuration(b, "ETA_LATENCY", 20*time.Millisecond)

	web, err := testweb.StartPeople(testweb.PeopleOptions{Hosts: hosts, Pages: pages, Records: nrec, Latency: latency})
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	dir := b.TempDir()
	cb := newCrawlInputs(b, web, dir, workers, testweb.PeopleRecords(web))
	maps := filepath.Join(dir, "mappings")
	if err := os.MkdirAll(maps, 0o755); err != nil {
		b.Fatal(err)
	}
	for name, data := range testweb.PeopleMappings() {
		writeFile(b, maps, name, data)
	}
	fmt.Printf("eta: %d hosts × %d profiles, %d records, depth %d, --delay %s, latency %s, %d workers\n",
		hosts, pages, nrec, depth, delay, latency, workers)
	args := func(state string) []string {
		return append([]string{"run", "--records", cb.records, "--mappings", maps, "--depth", strconv.Itoa(depth),
			"--state-dir", state, "--delay", delay.String(), "--workers", strconv.Itoa(workers),
			"--allow-loopback", "--log-level", "warn"}, cb.resolveA...)
	}
	contenders := [][2]string{}
	if before := os.Getenv("ETA_BEFORE"); before != "" {
		contenders = append(contenders, [2]string{"before", before})
	}
	contenders = append(contenders, [2]string{"backfill", goBuild(b, "..", "./cmd/backfill", filepath.Join(dir, "backfill"))})
	for i, c := range contenders {
		name, bin := c[0], c[1]
		b.Run(name, func(b *testing.B) {
			for n := 0; n < b.N; n++ {
				state := filepath.Join(dir, fmt.Sprintf("%s-%d-%d", name, i, n))
				if out, err := exec.Command(bin, append(args(state+"-dry"), "--dry-run")...).Output(); err == nil {
					for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
						fmt.Printf("eta: %s dry run: %s\n", name, line)
					}
				} else {
					fmt.Printf("eta: %s has no dry run (%v)\n", name, err)
				}
				before := len(web.Log())
				etaRun(b, name, exec.Command(bin, args(state)...), filepath.Join(state, "status.json"))
				busiest(name, web.Log()[before:])
			}
		})
	}
}

// etaSample is what one read of the status file says.
type etaSample struct {
	at                  time.Duration // since the crawl started
	bound, estimate     float64       // the dispatcher's ETA, seconds (0: none)
	by                  string        // what bounds it
	records, complete   int
	pages               int64
	progress            float64 // the progress line's ETA, seconds (NaN: "?")
	requestsLeft, hosts int
	growth              float64 // pages a page left comes to (the estimate's)
}

// etaRun runs one crawl, reading its status file every quarter second,
// and prints how each sample's ETA compares with the time then left.
func etaRun(b *testing.B, name string, cmd *exec.Cmd, statusPath string) {
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var samples []etaSample
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-tick.C:
			if s, ok := readETASample(statusPath, time.Since(start)); ok {
				samples = append(samples, s)
			}
		}
	}
	wall := time.Since(start)
	if err != nil {
		b.Fatalf("%s: %v\n%s", name, err, tail([]byte(stderr.String())))
	}
	progressETA(samples)
	fmt.Printf("eta: %s crawled in %s, %d status samples, CPU %s\n", name, wall.Round(100*time.Millisecond), len(samples),
		cpuOf(cmd).Round(10*time.Millisecond))
	for _, s := range samples {
		if s.bound > 0 {
			fmt.Printf("eta: %s first bound at %s: %s (%.0f s; the crawl then took %.0f s more: ×%.2f), by %s\n",
				name, s.at.Round(100*time.Millisecond), time.Duration(s.bound*float64(time.Second)).Round(time.Second),
				s.bound, (wall - s.at).Seconds(), s.bound/(wall-s.at).Seconds(), s.by)
			break
		}
	}
	fmt.Printf("eta: %s %5s %9s %9s %9s %9s %7s  %s\n", name, "at", "left", "estimate", "bound", "progress", "growth", "bound by")
	for _, pct := range []float64{0.1, 0.25, 0.5, 0.75, 0.9} {
		at := time.Duration(pct * float64(wall))
		var s etaSample
		found := false
		for _, c := range samples {
			if c.at <= at {
				s, found = c, true
			}
		}
		if !found {
			continue
		}
		left := (wall - s.at).Seconds()
		ratio := func(v float64) string {
			if v <= 0 || math.IsNaN(v) {
				return "-"
			}
			return fmt.Sprintf("×%.2f", v/left)
		}
		fmt.Printf("eta: %s %4.0f%% %8.0fs %9s %9s %9s %7.2f  %s\n", name, 100*pct, left, ratio(s.estimate), ratio(s.bound), ratio(s.progress), s.growth, s.by)
	}
}

// busiest prints, from the web's log, the host asked most often: its
// requests, their span and the mean gap between two, the pace the crawl
// kept it at.
func busiest(name string, log []testweb.Request) {
	type span struct {
		n           int
		first, last time.Time
	}
	hosts := map[string]*span{}
	top := ""
	for _, q := range log {
		s := hosts[q.Host]
		if s == nil {
			s = &span{first: q.Time}
			hosts[q.Host] = s
		}
		s.n++
		s.last = q.Time
		if t := hosts[top]; t == nil || s.n > t.n || (s.n == t.n && q.Host < top) {
			top = q.Host
		}
	}
	if s := hosts[top]; s != nil && s.n > 1 {
		d := s.last.Sub(s.first)
		fmt.Printf("eta: %s busiest host %s: %d requests over %s, one every %.2fs\n", name, top, s.n,
			d.Round(100*time.Millisecond), d.Seconds()/float64(s.n-1))
	}
	// The first page of each host: how long after its robots.txt it was
	// asked for, and the soft-404 probes made.
	robots, first := map[string]time.Time{}, map[string]time.Time{}
	probes := 0
	for _, q := range log {
		switch {
		case q.Path == "/robots.txt":
			if _, ok := robots[q.Host]; !ok {
				robots[q.Host] = q.Time
			}
		case strings.HasPrefix(q.Path, "/backfill-probe-"):
			probes++
		default:
			if _, ok := first[q.Host]; !ok {
				first[q.Host] = q.Time
			}
		}
	}
	var sum time.Duration
	n := 0
	for h, at := range first {
		if r, ok := robots[h]; ok {
			sum += at.Sub(r)
			n++
		}
	}
	if n > 0 {
		fmt.Printf("eta: %s first page of a host %.2fs after its robots.txt on average (%d hosts), %d soft-404 probes\n",
			name, sum.Seconds()/float64(n), n, probes)
	}
}

// readETASample reads the status file; ok is false when it is not there
// yet or not of a running crawl.
func readETASample(path string, at time.Duration) (etaSample, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return etaSample{}, false
	}
	var st struct {
		State    string
		Records  int
		Complete int
		Pages    int64
		ETA      *struct {
			Seconds     float64 `json:"seconds"`
			Estimate    float64 `json:"estimate_seconds"`
			Host        string  `json:"host"`
			HostSeconds float64 `json:"host_seconds"`
			RateSeconds float64 `json:"rate_seconds"`
			Requests    int     `json:"requests"`
			Hosts       int     `json:"hosts"`
			Growth      float64 `json:"growth"`
		} `json:"eta"`
	}
	if json.Unmarshal(data, &st) != nil || st.State != "running" {
		return etaSample{}, false
	}
	s := etaSample{at: at, records: st.Records, complete: st.Complete, pages: st.Pages}
	if e := st.ETA; e != nil {
		s.bound, s.estimate, s.requestsLeft, s.hosts, s.growth = e.Seconds, e.Estimate, e.Requests, e.Hosts, e.Growth
		s.by = fmt.Sprintf("%d requests on %d hosts at the rate allowed", e.Requests, e.Hosts)
		if e.Host != "" && e.HostSeconds >= e.RateSeconds {
			s.by = "host " + e.Host
		}
	}
	return s, true
}

// progressETA fills in the ETA the progress line gave before the
// dispatcher had one: records left at the pace records completed over
// the last 30 s (NaN while none completed in it).
func progressETA(samples []etaSample) {
	const window = 30 * time.Second
	for i := range samples {
		j := 0
		for j < i && samples[i].at-samples[j].at > window {
			j++
		}
		a, c := samples[j], samples[i]
		dt := (c.at - a.at).Seconds()
		samples[i].progress = math.NaN()
		if done := c.complete - a.complete; dt >= 1 && done > 0 {
			samples[i].progress = float64(c.records-c.complete) / (float64(done) / dt)
		}
	}
}
