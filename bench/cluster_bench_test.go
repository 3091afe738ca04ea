//go:build unix

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"backfill/testweb"
)

// The cluster benchmarks run backfill as a cluster of separate OS
// processes on this machine: one `backfill dispatcher` and n `backfill
// supervisor`s talking over loopback ZeroMQ, against one large fixture web
// in the benchmark process. Each supervisor names itself in its User-Agent
// (through --contact), so the web's request log tells which supervisor
// fetched what.

// clusterTimeout bounds one cluster run.
const clusterTimeout = 20 * time.Minute

// clusterBench is one fixture web and what every cluster run against it
// shares: the binary, the records and mappings, the --resolve arguments.
type clusterBench struct {
	web      *testweb.Web
	dir      string
	bin      string
	records  string
	mappings string
	resolveA []string
	hosts    int
	expected int // pages of a complete crawl (robots.txt and probes excluded)
	runs     int // cluster runs so far, for fresh state directories
}

// clusterRun is how one cluster run is started.
type clusterRun struct {
	supervisors int
	workers     int
	dispatcher  []string // extra dispatcher flags
	supervisor  []string // extra supervisor flags
	bin         string   // the backfill binary to run; "": the benchmark's
	// prepare, when set, sees supervisor i's command (i from 1) and its
	// state directory before it starts, to add flags or run it otherwise.
	prepare func(i int, state string, cmd *exec.Cmd)
	// during, when set, runs from the supervisors' start until the
	// dispatcher exits, when its ctx is done; it is given the dispatcher's
	// endpoint.
	during func(ctx context.Context, endpoint string)
	// hostsMove says a host may go from one supervisor to another (one is
	// cut off on purpose): hosts requested by two are counted, not an
	// error.
	hostsMove bool
	// partial says the crawl is not meant to fetch every page (the people
	// web, whose records stop once filled and whose links the frontier
	// prunes): its caller checks the values found instead.
	partial bool
}

// clusterOutcome is one measured cluster run, from the web's request log.
type clusterOutcome struct {
	pages    int           // distinct pages answered 200 (robots.txt and probes excluded)
	requests int           // every request, robots.txt and probes included
	robots   int           // robots.txt requests
	probes   int           // soft-404 probes
	failed   int           // page requests answered other than 200
	wall     time.Duration // dispatcher start to dispatcher exit: the crawl as a user sees it
	// elapsed is the dispatcher's own, from its "dispatcher finished"
	// line: its Run, without the start of the process and the second a
	// finished dispatcher waits to tell supervisors restarted at the end
	// that the run is over (Config.LateJoinWait).
	elapsed time.Duration
	log     []testweb.Request
	// bySup counts pages and hosts per supervisor (from the User-Agent);
	// shared counts hosts requested by more than one supervisor.
	pagesBySup map[string]int
	hostsBySup map[string]int
	shared     int
	// The dispatcher's CPU (user + system) over the run, and what its
	// status file said every half second while the crawl was in full
	// swing (the middle four fifths): per supervisor, the tasks it held
	// (in flight: queued on it or being fetched) on average and at least.
	dispCPU  time.Duration
	inFlight map[string][2]float64 // mean, min
	// The supervisors' CPU (user + system, summed) and the peak resident
	// sets of the dispatcher and of the supervisors (summed), MiB.
	supCPU          time.Duration
	dispRSS, supRSS float64
	// state is the run's state directory (the dispatcher's is its
	// "dispatcher" folder).
	state string
	// When the dispatcher started, and what each process wrote to its
	// stderr: the dispatcher's log and each supervisor's (sup-1 first).
	start   time.Time
	dispLog []byte
	supLogs [][]byte
}

func (o clusterOutcome) pagesPerSec() float64 { return float64(o.pages) / o.wall.Seconds() }

// crawlPagesPerSec is pages over the dispatcher's own elapsed time, or 0
// when its log did not say it.
func (o clusterOutcome) crawlPagesPerSec() float64 {
	if o.elapsed <= 0 {
		return 0
	}
	return float64(o.pages) / o.elapsed.Seconds()
}

func newClusterBench(b *testing.B, opts testweb.LargeOptions) *clusterBench {
	web, err := testweb.StartLarge(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { web.Close() })
	dir := b.TempDir()
	cb := &clusterBench{web: web, dir: dir, hosts: opts.Hosts}
	// BACKFILL_BIN runs a binary built beforehand, so that repeated runs
	// measure one build while the tree changes.
	if cb.bin = os.Getenv("BACKFILL_BIN"); cb.bin == "" {
		cb.bin = goBuild(b, "..", "./cmd/backfill", filepath.Join(dir, "backfill"))
	}
	cb.records = writeFile(b, dir, "records.csv", testweb.LargeRecords(web))
	// The fixture web's own mappings, as BenchmarkCrawl runs them.
	cb.mappings = fixtureMappings(b, dir)
	cb.resolveA = resolveFlags(web)
	cb.expected = opts.Hosts * (opts.Pages + 1)
	return cb
}

// supContact is supervisor i's --contact URL; it ends up in its User-Agent.
func supContact(i int) string { return fmt.Sprintf("https://backfill.invalid/bench/sup-%d", i) }

// run starts a dispatcher and r.supervisors supervisors, waits for the
// dispatcher to finish the crawl, stops the supervisors and reads the
// web's log. Every process it starts is gone when it returns.
func (cb *clusterBench) run(b *testing.B, id string, r clusterRun) clusterOutcome {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	// A fresh state directory every run (with -count the same id comes
	// again): a dispatcher on an old one would resume a finished crawl.
	cb.runs++
	id = fmt.Sprintf("%s-run%d", id, cb.runs)
	state := filepath.Join(cb.dir, id)

	dargs := []string{"dispatcher",
		"--records", cb.records,
		"--mappings", cb.mappings,
		"--state-dir", filepath.Join(state, "dispatcher"),
		"--listen", "tcp://127.0.0.1:*",
		"--expect", strconv.Itoa(r.supervisors),
		// Info: the line naming the bound endpoint (no per-page lines).
		"--log-level", "info",
	}
	dargs = append(dargs, r.dispatcher...)
	bin := cb.bin
	if r.bin != "" {
		bin = r.bin
	}
	disp := exec.CommandContext(ctx, bin, dargs...)
	var dout bytes.Buffer
	disp.Stdout = &dout
	endpoint := make(chan string, 1)
	var elapsed atomic.Int64 // ns, from the "dispatcher finished" line
	dlog := &lockedBuffer{onLine: func(line []byte) {
		var rec struct {
			Msg, Endpoint string
			Elapsed       float64 `json:"elapsed_seconds"`
		}
		if json.Unmarshal(line, &rec) != nil {
			return
		}
		switch {
		case rec.Msg == "dispatcher listening" && rec.Endpoint != "":
			select {
			case endpoint <- rec.Endpoint:
			default:
			}
		case rec.Msg == "dispatcher finished":
			elapsed.Store(int64(rec.Elapsed * float64(time.Second)))
		}
	}}
	disp.Stderr = dlog

	before := len(cb.web.Log())
	start := time.Now()
	if err := disp.Start(); err != nil {
		b.Fatalf("start dispatcher: %v", err)
	}
	dispDone := make(chan error, 1)
	go func() { dispDone <- disp.Wait() }()

	var sups []*exec.Cmd
	var souts []*lockedBuffer
	var supCPU time.Duration
	var supRSS float64
	stopSups := func() {
		for _, s := range sups {
			s.Process.Signal(syscall.SIGTERM)
		}
		for i, s := range sups {
			done := make(chan error, 1)
			go func() { done <- s.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					b.Errorf("supervisor %d: %v\n%s", i+1, err, tail(souts[i].Bytes()))
				}
				supCPU += cpuOf(s)
				supRSS += peakRSSMiB(s)
			case <-time.After(15 * time.Second):
				s.Process.Kill()
				<-done
				b.Errorf("supervisor %d did not stop within 15s of SIGTERM", i+1)
			}
		}
		sups = nil
	}
	fail := func(format string, args ...any) {
		disp.Process.Kill()
		<-dispDone
		stopSups()
		b.Fatalf(format+"\ndispatcher log:\n%s", append(args, tail(dlog.Bytes()))...)
	}

	var ep string
	select {
	case ep = <-endpoint:
	case err := <-dispDone:
		dispDone <- err
		fail("dispatcher exited before listening: %v", err)
	case <-time.After(time.Minute):
		fail("dispatcher did not say where it listens within a minute")
	}
	for i := 1; i <= r.supervisors; i++ {
		supState := filepath.Join(state, fmt.Sprintf("sup-%d", i))
		sargs := []string{"supervisor",
			"--dispatcher", ep,
			"--name", fmt.Sprintf("sup-%d", i),
			"--workers", strconv.Itoa(r.workers),
			"--mappings", cb.mappings,
			"--state-dir", supState,
			"--contact", supContact(i),
			"--allow-loopback",
			"--log-level", "warn",
		}
		sargs = append(sargs, r.supervisor...)
		sargs = append(sargs, cb.resolveA...)
		s := exec.Command(bin, sargs...)
		out := &lockedBuffer{}
		s.Stdout, s.Stderr = out, out
		if r.prepare != nil {
			r.prepare(i, supState, s)
		}
		if err := s.Start(); err != nil {
			fail("start supervisor %d: %v", i, err)
		}
		sups = append(sups, s)
		souts = append(souts, out)
	}
	statusPath := filepath.Join(state, "dispatcher", "status.json")
	var statusSamples []map[string]int
	stopStatus := make(chan struct{})
	statusDone := make(chan struct{})
	go func() {
		defer close(statusDone)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopStatus:
				return
			case <-t.C:
			}
			var st struct {
				State   string
				Members []struct {
					Name     string
					InFlight int `json:"in_flight"`
				}
			}
			data, err := os.ReadFile(statusPath)
			if err != nil || json.Unmarshal(data, &st) != nil || st.State != "running" || len(st.Members) == 0 {
				continue
			}
			m := map[string]int{}
			for _, mm := range st.Members {
				m[mm.Name] = mm.InFlight
			}
			statusSamples = append(statusSamples, m)
		}
	}()
	duringDone := make(chan struct{})
	duringCtx, stopDuring := context.WithCancel(ctx)
	go func() {
		defer close(duringDone)
		if r.during != nil {
			r.during(duringCtx, ep)
		}
	}()
	err := <-dispDone
	wall := time.Since(start)
	stopDuring()
	<-duringDone
	close(stopStatus)
	<-statusDone
	stopSups()
	if err != nil {
		b.Fatalf("dispatcher: %v\nstdout:\n%s\nlog:\n%s", err, tail(dout.Bytes()), tail(dlog.Bytes()))
	}

	o := clusterOutcome{wall: wall, elapsed: time.Duration(elapsed.Load()), log: cb.web.Log()[before:],
		pagesBySup: map[string]int{}, hostsBySup: map[string]int{}, inFlight: map[string][2]float64{},
		start: start, dispLog: dlog.Bytes()}
	for _, out := range souts {
		o.supLogs = append(o.supLogs, out.Bytes())
	}
	o.dispCPU, o.dispRSS = cpuOf(disp), peakRSSMiB(disp)
	o.supCPU, o.supRSS = supCPU, supRSS
	o.state = state
	if n := len(statusSamples); n >= 5 {
		mid := statusSamples[n/10 : n-n/10]
		sums, mins := map[string]float64{}, map[string]float64{}
		for _, m := range mid {
			for name, v := range m {
				sums[name] += float64(v)
				if cur, ok := mins[name]; !ok || float64(v) < cur {
					mins[name] = float64(v)
				}
			}
		}
		for name := range sums {
			o.inFlight[name] = [2]float64{sums[name] / float64(len(mid)), mins[name]}
		}
	}
	seen := map[string]bool{}
	owner := map[string]string{}
	for _, q := range o.log {
		o.requests++
		sup := supOf(q.UserAgent)
		if prev, ok := owner[q.Host]; !ok {
			owner[q.Host] = sup
			o.hostsBySup[sup]++
		} else if prev != sup && prev != "" {
			o.shared++
			owner[q.Host] = "" // count a host once
		}
		switch {
		case q.Path == "/robots.txt":
			o.robots++
			continue
		case strings.HasPrefix(q.Path, "/backfill-probe-"):
			o.probes++
			continue
		case q.Status != 200:
			o.failed++
			continue
		}
		if !seen[q.Host+q.Path] {
			seen[q.Host+q.Path] = true
			o.pagesBySup[sup]++
		}
	}
	o.pages = len(seen)
	// BENCH_LOG_DIR keeps each run's request log (TSV: arrival in µs from
	// the first request, host, path, status, supervisor) and the
	// dispatcher's log for analysis.
	if dir := os.Getenv("BENCH_LOG_DIR"); dir != "" && len(o.log) > 0 {
		var buf bytes.Buffer
		for _, q := range o.log {
			fmt.Fprintf(&buf, "%d\t%s\t%s\t%d\t%s\n", q.Time.Sub(o.log[0].Time).Microseconds(), q.Host, q.Path, q.Status, supOf(q.UserAgent))
		}
		if err := os.WriteFile(filepath.Join(dir, id+"-dispatcher.log"), dlog.Bytes(), 0o644); err != nil {
			b.Errorf("keep dispatcher log: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, id+".tsv"), buf.Bytes(), 0o644); err != nil {
			b.Errorf("keep request log: %v", err)
		}
	}
	if !r.partial && float64(o.pages) < minShare*float64(cb.expected) {
		b.Fatalf("cluster of %d fetched %d distinct pages of %d (%d requests, %d failed); a partial crawl is not comparable\ndispatcher stdout:\n%s",
			r.supervisors, o.pages, cb.expected, o.requests, o.failed, tail(dout.Bytes()))
	}
	if o.shared > 0 && !r.hostsMove {
		b.Errorf("%d hosts were requested by more than one supervisor", o.shared)
	}
	return o
}

// supOf names the supervisor whose User-Agent ua is ("sup-3"), or "?".
func supOf(ua string) string {
	const mark = "backfill.invalid/bench/"
	i := strings.Index(ua, mark)
	if i < 0 {
		return "?"
	}
	s := ua[i+len(mark):]
	if j := strings.IndexAny(s, ") "); j >= 0 {
		s = s[:j]
	}
	return s
}

// spread renders per-supervisor counts as "sup-1=120 sup-2=95 …".
func spread(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// lockedBuffer is a bytes.Buffer written by a child process's output
// copier while the benchmark may read it for a failure message. onLine,
// when set, sees every complete line as it arrives.
type lockedBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	onLine  func([]byte)
	scanned int // bytes of b already split into lines
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.b.Write(p)
	if l.onLine != nil {
		for {
			rest := l.b.Bytes()[l.scanned:]
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				break
			}
			l.onLine(rest[:i])
			l.scanned += i + 1
		}
	}
	return n, err
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.b.Bytes())
}

// BenchmarkScaleOut measures how the crawl rate grows with supervisor
// processes: a web whose every response takes SCALE_LATENCY (100ms), no
// Crawl-delay and --delay 0, so each worker is latency-bound and a
// supervisor of SCALE_WORKERS workers fetches at most
// SCALE_WORKERS/latency pages a second. The same crawl runs with 1, 2 and
// 4 supervisors of SCALE_WORKERS workers each; the figure is pages / wall
// time (dispatcher start to exit), and the summary prints the 2/1 and 4/1
// ratios. The target is 4/1 ≥ 3.5.
func BenchmarkScaleOut(b *testing.B) {
	hosts := envInt(b, "SCALE_HOSTS", 400)
	pages := envInt(b, "SCALE_PAGES", 20)
	workers := envInt(b, "SCALE_WORKERS", 8)
	latency := envDuration(b, "SCALE_LATENCY", 100*time.Millisecond)
	cb := newClusterBench(b, testweb.LargeOptions{Hosts: hosts, Pages: pages, Latency: latency})
	fmt.Printf("scale-out: %d hosts × (%d profiles + index) = %d pages, latency %s, no Crawl-delay, --delay 0, %d workers per supervisor, GOMAXPROCS %d, %d CPUs\n",
		hosts, pages, cb.expected, latency, workers, runtime.GOMAXPROCS(0), runtime.NumCPU())

	// With -count the sub-benchmarks repeat; the k-th rates of each size
	// make the k-th ratios.
	rates, crawlRates := map[int][]float64{}, map[int][]float64{}
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("supervisors=%d", n), func(b *testing.B) {
			b.StopTimer()
			var o clusterOutcome
			for i := 0; i < b.N; i++ {
				b.StartTimer()
				o = cb.run(b, fmt.Sprintf("scale-%d-%d", n, i), clusterRun{
					supervisors: n,
					workers:     workers,
					supervisor:  []string{"--delay", "0"},
				})
				b.StopTimer()
			}
			rates[n] = append(rates[n], o.pagesPerSec())
			crawlRates[n] = append(crawlRates[n], o.crawlPagesPerSec())
			b.ReportMetric(o.pagesPerSec(), "pages/s")
			b.ReportMetric(float64(o.pages), "pages")
			ceiling := float64(n*workers) / latency.Seconds()
			fmt.Printf("scale-out: %d supervisor(s): %d pages (%d requests: %d robots.txt, %d probes, %d failed) in %s: %.1f pages/s (latency ceiling of %d workers %.0f requests/s); pages by supervisor %s; hosts %s\n",
				n, o.pages, o.requests, o.robots, o.probes, o.failed, o.wall.Round(time.Millisecond), o.pagesPerSec(),
				n*workers, ceiling, spread(o.pagesBySup), spread(o.hostsBySup))
			var held []string
			for _, name := range slices.Sorted(maps.Keys(o.inFlight)) {
				v := o.inFlight[name]
				held = append(held, fmt.Sprintf("%s mean %.1f min %.0f", name, v[0], v[1]))
			}
			fmt.Printf("scale-out: %d supervisor(s): dispatcher CPU %.1f s over %s (%.1f %% of one core, %.3f ms/page); tasks held by each supervisor (%d workers): %s\n",
				n, o.dispCPU.Seconds(), o.wall.Round(time.Millisecond), 100*o.dispCPU.Seconds()/o.wall.Seconds(),
				o.dispCPU.Seconds()*1000/float64(max(o.pages, 1)), workers, strings.Join(held, "; "))
		})
	}
	for k, r1 := range rates[1] {
		for _, n := range []int{2, 4} {
			if k < len(rates[n]) && r1 > 0 {
				fmt.Printf("scale-out: run %d: %d/1 supervisors: pages/s ×%.2f\n", k+1, n, rates[n][k]/r1)
			}
			if c1 := crawlRates[1][k]; k < len(crawlRates[n]) && c1 > 0 && crawlRates[n][k] > 0 {
				fmt.Printf("scale-out: run %d: %d/1 supervisors: pages/s over the dispatcher's own elapsed time (%.1f against %.1f) ×%.2f\n",
					k+1, n, crawlRates[n][k], c1, crawlRates[n][k]/c1)
			}
		}
	}
}

// BenchmarkPoliteness measures how close the crawl comes to the rate
// politeness allows: POLITE_HOSTS hosts (400) whose robots.txt sets a
// Crawl-delay of POLITE_DELAY (2s), so no crawler may exceed
// hosts/delay pages a second (200). It runs with 1 and with 4 supervisors
// of POLITE_WORKERS workers (8) and default politeness flags, and reports:
//
//   - pages/s: distinct pages / wall time (dispatcher start to exit), and
//     that as a share of the ideal hosts/delay. This is the achieved rate:
//     it charges the crawl for everything a user waits for — process
//     start, each host's robots.txt and soft-404 probe turns (requests
//     that take a delay slot but are not pages), dispatcher round trips
//     and the tail.
//   - pacing: Σ over hosts of (requests−1)×delay divided by Σ of the time
//     between the host's first and last request: how tightly each host's
//     requests follow one another while it is being crawled (1 = every
//     gap exactly the delay).
//   - violations: consecutive requests to one host (robots.txt and probes
//     included) arriving less than the delay apart. Any is a failure.
func BenchmarkPoliteness(b *testing.B) {
	hosts := envInt(b, "POLITE_HOSTS", 400)
	pages := envInt(b, "POLITE_PAGES", testweb.DefaultLargePages)
	workers := envInt(b, "POLITE_WORKERS", 8)
	delay := envDuration(b, "POLITE_DELAY", 2*time.Second)
	latency := envDuration(b, "POLITE_LATENCY", 0)
	// POLITE_HOST_IN_FLIGHT sets the dispatcher's --host-in-flight; unset
	// keeps its default.
	var dflags []string
	if os.Getenv("POLITE_HOST_IN_FLIGHT") != "" {
		dflags = []string{"--host-in-flight", strconv.Itoa(envInt(b, "POLITE_HOST_IN_FLIGHT", 2))}
	}
	if delay <= 0 {
		b.Fatal("POLITE_DELAY must be positive")
	}
	cb := newClusterBench(b, testweb.LargeOptions{Hosts: hosts, Pages: pages, Latency: latency, CrawlDelay: delay})
	ideal := float64(hosts) / delay.Seconds()
	fmt.Printf("politeness: %d hosts × (%d profiles + index) = %d pages, Crawl-delay %s, latency %s, %d workers per supervisor, dispatcher flags %q, ideal %.1f pages/s, GOMAXPROCS %d, %d CPUs\n",
		hosts, pages, cb.expected, delay, latency, workers, dflags, ideal, runtime.GOMAXPROCS(0), runtime.NumCPU())

	for _, n := range []int{1, 4} {
		b.Run(fmt.Sprintf("supervisors=%d", n), func(b *testing.B) {
			b.StopTimer()
			var o clusterOutcome
			for i := 0; i < b.N; i++ {
				b.StartTimer()
				o = cb.run(b, fmt.Sprintf("polite-%d-%d", n, i), clusterRun{supervisors: n, workers: workers, dispatcher: dflags})
				b.StopTimer()
			}
			p := pacing(o.log, delay)
			if p.violations > 0 {
				b.Errorf("%d requests reached their host less than %s after the one before (shortest gap %s, %s)",
					p.violations, delay, p.minGap, p.worst)
			}
			rate := o.pagesPerSec()
			b.ReportMetric(rate, "pages/s")
			b.ReportMetric(100*rate/ideal, "%ideal")
			b.ReportMetric(float64(p.violations), "violations")
			fmt.Printf("politeness: %d supervisor(s): %d pages (%d requests: %d robots.txt, %d probes, %d failed) in %s: %.1f pages/s = %.1f%% of ideal %.0f; requests first→last %s; pacing %.3f; gaps min %s median %s p99 %s max %s; violations %d; hosts %s\n",
				n, o.pages, o.requests, o.robots, o.probes, o.failed, o.wall.Round(time.Millisecond), rate, 100*rate/ideal, ideal,
				p.span.Round(time.Millisecond), p.efficiency, p.minGap.Round(time.Millisecond), p.median.Round(time.Millisecond),
				p.p99.Round(time.Millisecond), p.maxGap.Round(time.Millisecond), p.violations, spread(o.hostsBySup))
		})
	}
}

// pacingReport is what the request log says about per-host delays.
type pacingReport struct {
	violations                  int
	worst                       string // the shortest gap's host and paths
	minGap, median, p99, maxGap time.Duration
	efficiency                  float64 // Σ (n−1)×delay / Σ (last−first), over hosts
	span                        time.Duration
}

// pacing checks every pair of consecutive requests to one host in log
// (arrival times, robots.txt and probes included) against delay.
func pacing(log []testweb.Request, delay time.Duration) pacingReport {
	var p pacingReport
	if len(log) == 0 {
		return p
	}
	p.span = log[len(log)-1].Time.Sub(log[0].Time)
	byHost := map[string][]testweb.Request{}
	for _, q := range log {
		byHost[q.Host] = append(byHost[q.Host], q)
	}
	var gaps []time.Duration
	var ideal, actual time.Duration
	p.minGap = -1
	for host, qs := range byHost {
		// The log is in arrival order; sort anyway so the check does not
		// rest on that.
		sort.SliceStable(qs, func(i, j int) bool { return qs[i].Time.Before(qs[j].Time) })
		for i := 1; i < len(qs); i++ {
			g := qs[i].Time.Sub(qs[i-1].Time)
			gaps = append(gaps, g)
			if g < delay {
				p.violations++
			}
			if p.minGap < 0 || g < p.minGap {
				p.minGap = g
				p.worst = fmt.Sprintf("%s %s → %s", host, qs[i-1].Path, qs[i].Path)
			}
		}
		if len(qs) > 1 {
			ideal += time.Duration(len(qs)-1) * delay
			actual += qs[len(qs)-1].Time.Sub(qs[0].Time)
		}
	}
	if len(gaps) > 0 {
		slices.Sort(gaps)
		p.median = gaps[len(gaps)/2]
		p.p99 = gaps[len(gaps)*99/100]
		p.maxGap = gaps[len(gaps)-1]
	}
	if actual > 0 {
		p.efficiency = float64(ideal) / float64(actual)
	}
	return p
}
