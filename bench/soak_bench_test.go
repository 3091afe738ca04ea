//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/testweb"
)

// The soak benchmarks run backfill as a cluster of separate processes (one
// dispatcher, one supervisor) over a long crawl and sample each process's
// resident memory from /proc every second. They are run on demand, not by
// `make bench`: each takes minutes.
//
//	cd bench && SOAK_RECORDS=/tmp/10m.jsonl go test -run '^$' -bench DispatcherSoak -benchtime 1x -timeout 2h .
//	cd bench && SOAK=1 go test -run '^$' -bench SupervisorSoak -benchtime 1x -timeout 2h .

// rssSampler samples a process's VmRSS every interval until stopped.
type rssSampler struct {
	mu      sync.Mutex
	samples []rssSample
	stop    chan struct{}
	done    chan struct{}
}

type rssSample struct {
	at  time.Duration
	mib float64
}

func sampleRSS(pid int, every time.Duration) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if kib, ok := vmRSS(pid); ok {
				s.mu.Lock()
				s.samples = append(s.samples, rssSample{time.Since(start), float64(kib) / 1024})
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) finish() []rssSample {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// vmRSS reads the resident set of pid in KiB.
func vmRSS(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n, err == nil
		}
	}
	return 0, false
}

// rssSummary prints a curve of samples (every tenth of the run) and
// returns the peak and, over the last four fifths of the run, the
// smallest and largest sample: flat means those two are close.
func rssSummary(name string, ss []rssSample) (peak, lo, hi float64) {
	if len(ss) == 0 {
		return 0, 0, 0
	}
	lo = ss[len(ss)-1].mib
	for i, s := range ss {
		peak = max(peak, s.mib)
		if i >= len(ss)/5 {
			lo, hi = min(lo, s.mib), max(hi, s.mib)
		}
	}
	var curve []string
	for i := 0; i < 10; i++ {
		s := ss[i*(len(ss)-1)/9]
		curve = append(curve, fmt.Sprintf("%s %.0f", s.at.Round(time.Second), s.mib))
	}
	fmt.Printf("soak: %s RSS MiB over time: %s\n", name, strings.Join(curve, ", "))
	return peak, lo, hi
}

// soakCluster is one dispatcher and one supervisor over a web.
type soakCluster struct {
	disp, sup *exec.Cmd
	dlog      *lockedBuffer
	dsamp     *rssSampler
	ssamp     *rssSampler
	start     time.Time
	loaded    chan time.Duration // when the dispatcher logged "records loaded"
	firstTask chan time.Duration // when the supervisor's first page reached the web
}

func startSoak(b *testing.B, bin, dir, records, mappings string, web *testweb.Web, resolve []string, dargs, sargs []string) *soakCluster {
	c := &soakCluster{loaded: make(chan time.Duration, 1), firstTask: make(chan time.Duration, 1)}
	endpoint := make(chan string, 1)
	c.dlog = &lockedBuffer{onLine: func(line []byte) {
		var rec struct{ Msg, Endpoint string }
		if json.Unmarshal(line, &rec) != nil {
			return
		}
		switch rec.Msg {
		case "dispatcher listening":
			select {
			case endpoint <- rec.Endpoint:
			default:
			}
		case "records loaded", "records file taken in before; not read again":
			select {
			case c.loaded <- time.Since(c.start):
			default:
			}
		}
	}}
	args := append([]string{"dispatcher", "--records", records, "--mappings", mappings,
		"--state-dir", filepath.Join(dir, "dispatcher"), "--listen", "tcp://127.0.0.1:*", "--expect", "1",
		"--log-level", "info"}, dargs...)
	c.disp = exec.Command(bin, args...)
	c.disp.Stderr = c.dlog
	c.start = time.Now()
	if err := c.disp.Start(); err != nil {
		b.Fatal(err)
	}
	c.dsamp = sampleRSS(c.disp.Process.Pid, time.Second)
	var ep string
	select {
	case ep = <-endpoint:
	case <-time.After(30 * time.Minute):
		c.disp.Process.Kill()
		b.Fatalf("dispatcher did not listen:\n%s", tail(c.dlog.Bytes()))
	}
	sa := append([]string{"supervisor", "--dispatcher", ep, "--name", "soak", "--mappings", mappings,
		"--state-dir", filepath.Join(dir, "sup"), "--allow-loopback", "--log-level", "warn"}, sargs...)
	c.sup = exec.Command(bin, append(sa, resolve...)...)
	out := &lockedBuffer{}
	c.sup.Stdout, c.sup.Stderr = out, out
	if err := c.sup.Start(); err != nil {
		c.disp.Process.Kill()
		b.Fatal(err)
	}
	c.ssamp = sampleRSS(c.sup.Process.Pid, time.Second)
	// The first task handed out: the dispatcher's status file shows a
	// task in flight or answered (most of a generated file's links go to
	// hosts that refuse at once, which the web never sees).
	status := filepath.Join(dir, "dispatcher", "status.json")
	go func() {
		for time.Since(c.start) < 2*time.Hour {
			var st struct {
				InFlight int              `json:"in_flight"`
				Pages    int64            `json:"pages"`
				Errors   map[string]int64 `json:"errors"`
			}
			if data, err := os.ReadFile(status); err == nil && json.Unmarshal(data, &st) == nil && (st.InFlight > 0 || st.Pages > 0 || len(st.Errors) > 0) {
				c.firstTask <- time.Since(c.start)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return c
}

// stop ends the cluster (SIGTERM; the dispatcher first if it still runs)
// and returns the samples.
func (c *soakCluster) stop(b *testing.B, dispatcherDone bool) (disp, sup []rssSample) {
	if !dispatcherDone {
		c.disp.Process.Signal(syscall.SIGTERM)
		c.disp.Wait()
	}
	c.sup.Process.Signal(syscall.SIGTERM)
	c.sup.Wait()
	return c.dsamp.finish(), c.ssamp.finish()
}

// BenchmarkDispatcherSoak takes in the records file SOAK_RECORDS (made by
// cmd/genrecords; skipped without it) and then crawls for SOAK_FOR
// (default 10m) with one supervisor of 64 workers, the records' links to
// people-NNNN.example going to a large fixture web of SOAK_WEB_HOSTS hosts
// (genrecords -web) and the others refused at once (127.x.y.z:9). It
// reports the intake's records/s, the dispatcher's peak RSS and its curve
// over the whole run, and the state's bytes per record. With
// SOAK_RESUME=1 it first runs and stops the cluster once, then measures a
// restart on the same state: the time from the dispatcher's start to the
// first task handed out (its status file shows it). SOAK_DIR keeps the
// state there (a later run on it is a resume).
func BenchmarkDispatcherSoak(b *testing.B) {
	records := proctest.OptIn(b, "SOAK_RECORDS", "the dispatcher soak (a records file from cmd/genrecords)")
	hosts := envInt(b, "SOAK_WEB_HOSTS", 2000)
	crawlFor := envDuration(b, "SOAK_FOR", 10*time.Minute)
	web, err := testweb.StartLarge(testweb.LargeOptions{Hosts: hosts, Pages: 100})
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	dir := os.Getenv("SOAK_DIR") // kept, to resume later; else a temporary one
	if dir == "" {
		dir = b.TempDir()
	}
	bin := os.Getenv("BACKFILL_BIN")
	if bin == "" {
		bin = goBuild(b, "..", "./cmd/backfill", filepath.Join(dir, "backfill"))
	}
	maps := fixtureMappings(b, dir)
	resolve := resolveFlags(web)
	b.StopTimer()
	runs := 1
	if os.Getenv("SOAK_RESUME") == "1" {
		runs = 2
	}
	for run := 1; run <= runs; run++ {
		c := startSoak(b, bin, dir, records, maps, web, resolve, nil, []string{"--workers", "64", "--delay", "0"})
		var loaded, first time.Duration
		select {
		case loaded = <-c.loaded:
		case <-time.After(2 * time.Hour):
		}
		select {
		case first = <-c.firstTask:
		case <-time.After(10 * time.Minute):
		}
		done := make(chan error, 1)
		go func() { done <- c.disp.Wait() }()
		finished := false
		select {
		case <-done:
			finished = true
		case <-time.After(crawlFor):
		}
		pages := len(web.Log())
		ds, ss := c.stop(b, finished)
		dpeak, _, _ := rssSummary(fmt.Sprintf("run %d dispatcher", run), ds)
		speak, _, _ := rssSummary(fmt.Sprintf("run %d supervisor", run), ss)
		size := dirSize(filepath.Join(dir, "dispatcher"))
		n := countLines(b, records)
		fmt.Printf("soak: run %d: %d records taken in after %s (%.0f records/s from process start); first task handed out at %s; %d requests to the fixture web by the end; dispatcher peak RSS %.1f MiB, supervisor %.1f MiB; state dir %d bytes (%.0f bytes per record)\n",
			run, n, loaded.Round(time.Millisecond), float64(n)/loaded.Seconds(), first.Round(time.Millisecond), pages, dpeak, speak, size, float64(size)/float64(n))
		b.ReportMetric(dpeak, "dispatcher-peakRSS-MiB")
	}
}

// BenchmarkSupervisorSoak crawls SOAK_PAGES pages (default 1,000,000) of a
// large fixture web, 1,000 hosts of SOAK_PAGES/1000 profiles each, at depth
// 1 from each host's index, with one supervisor of 64 workers and no
// delays, and reports the supervisor's RSS over the crawl: its peak, and
// the smallest and largest sample after the first fifth (the goal: flat
// within ±10 % and under 150 MiB). It runs only with SOAK=1.
func BenchmarkSupervisorSoak(b *testing.B) {
	proctest.OptIn(b, "SOAK", "a soak of minutes")
	total := envInt(b, "SOAK_PAGES", 1_000_000)
	hosts := 1000
	pages := max(total/hosts, 1)
	web, err := testweb.StartLarge(testweb.LargeOptions{Hosts: hosts, Pages: pages})
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	dir := b.TempDir()
	bin := os.Getenv("BACKFILL_BIN")
	if bin == "" {
		bin = goBuild(b, "..", "./cmd/backfill", filepath.Join(dir, "backfill"))
	}
	maps := fixtureMappings(b, dir)
	records := writeFile(b, dir, "records.csv", testweb.LargeRecords(web))
	resolve := resolveFlags(web)
	b.StopTimer()
	c := startSoak(b, bin, dir, records, maps, web, resolve,
		[]string{"--record-budget", "0", "--host-budget", "0", "--host-in-flight", "4"},
		[]string{"--workers", "64", "--delay", "0"})
	if err := c.disp.Wait(); err != nil {
		c.stop(b, true)
		b.Fatalf("dispatcher: %v\n%s", err, tail(c.dlog.Bytes()))
	}
	wall := time.Since(c.start)
	ds, ss := c.stop(b, true)
	seen := map[string]bool{}
	for _, r := range web.Log() {
		if r.Path != "/robots.txt" && !strings.HasPrefix(r.Path, "/backfill-probe-") {
			seen[r.Host+r.Path] = true
		}
	}
	speak, lo, hi := rssSummary("supervisor", ss)
	dpeak, _, _ := rssSummary("dispatcher", ds)
	mid := (lo + hi) / 2
	fmt.Printf("soak: %d pages in %s (%.0f pages/s); supervisor RSS peak %.1f MiB, after the first fifth %.1f–%.1f MiB (±%.1f %% around %.1f); dispatcher peak %.1f MiB\n",
		len(seen), wall.Round(time.Second), float64(len(seen))/wall.Seconds(), speak, lo, hi, 100*(hi-lo)/2/mid, mid, dpeak)
	dcpu, scpu := cpuOf(c.disp), cpuOf(c.sup)
	fmt.Printf("soak: CPU: dispatcher %.1f s (%.3f ms/page, %.0f %% of one core), supervisor %.1f s (%.3f ms/page)\n",
		dcpu.Seconds(), dcpu.Seconds()*1000/float64(len(seen)), 100*dcpu.Seconds()/wall.Seconds(), scpu.Seconds(), scpu.Seconds()*1000/float64(len(seen)))
	b.ReportMetric(speak, "supervisor-peakRSS-MiB")
	b.ReportMetric(float64(len(seen)), "pages")
}

func dirSize(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func countLines(b *testing.B, path string) int {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	n := 0
	r := bufio.NewReaderSize(f, 1<<20)
	buf := make([]byte, 1<<20)
	for {
		k, err := r.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if err != nil {
			break
		}
	}
	return n
}
