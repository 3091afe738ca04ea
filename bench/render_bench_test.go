//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/testweb"
)

// BenchmarkRender crawls the people web (testweb.StartPeople: five
// profile layouts, one written by JavaScript, five mappings sharing one
// URL pattern) without --render and with it, one run after the other, in
// two shapes: `backfill run`, one process (as a user starts it), and
// `backfill dispatcher` beside one `backfill supervisor --exit-when-done`,
// two processes on loopback, so that each one's CPU is its own. It prints
// each run's wall time (start to the end of `run`, or of the dispatcher),
// the peak RSS of its largest process, the peak PSS of its whole process
// tree (both trees when split, the browser's processes included, sampled
// from /proc every 100 ms), the pages rendered, the requests the web got,
// the fields filled against the web's truth, CPU per page fetched of the
// dispatcher, the supervisor and the browser (split), and the ratios
// render/static. Every run must keep the Crawl-delay on every host, browser
// requests included, and no favicon or image may be requested.
//
// BENCH_RENDER_HOSTS, BENCH_RENDER_RECORDS and BENCH_RENDER_DELAY size the
// crawl (defaults: 100 hosts of 4 profiles, 60 records, Crawl-delay 1s,
// depth 2). The render run's browser is found as a render node finds it
// (a headless shell first), or is BENCH_RENDER_BROWSER; when it is not the
// full browser (chromium), a run "render-full" renders with that one too.
// BENCH_RENDER_BEFORE, the path of another backfill binary, adds a run of
// it with --render and the full browser in each shape, to compare with an
// earlier build.
func BenchmarkRender(b *testing.B) {
	lookPath := func(names ...string) string {
		for _, name := range names {
			if p, err := exec.LookPath(name); err == nil {
				return p
			}
		}
		return ""
	}
	// As a render node looks for one: a headless shell first.
	shell := lookPath("chromium-headless-shell", "chrome-headless-shell")
	full := lookPath("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
	browser := cmp.Or(os.Getenv("BENCH_RENDER_BROWSER"), shell, full)
	if browser == "" {
		proctest.NoChromium(b, "the render benchmark (Debian package chromium-headless-shell, or chromium)")
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
		name, bin, browser string
		render             bool
	}
	contenders := []contender{{"static", bin, "", false}, {"render", bin, browser, true}}
	if full != "" && full != browser {
		contenders = append(contenders, contender{"render-full", bin, full, true})
	}
	if before := os.Getenv("BENCH_RENDER_BEFORE"); before != "" {
		// The browser an earlier build finds itself.
		contenders = append(contenders, contender{"before", before, cmp.Or(full, browser), true})
	}
	for _, c := range contenders {
		if c.render {
			fmt.Printf("render: %s renders with %s\n", c.name, c.browser)
		}
	}
	type key struct{ shape, name string }
	results := map[key]renderOutcome{}
	for _, split := range []bool{false, true} {
		shape := "run"
		if split {
			shape = "split"
		}
		for _, c := range contenders {
			b.Run(shape+"-"+c.name, func(b *testing.B) {
				var o renderOutcome
				for i := 0; i < b.N; i++ {
					state := filepath.Join(dir, fmt.Sprintf("state-%s-%s-%d", shape, c.name, i))
					common := []string{"--mappings", maps, "--allow-loopback", "--contact", "https://backfill.invalid/bench/render"}
					if c.render {
						common = append(common, "--render", "--chromium", c.browser)
					}
					common = append(common, resolve...)
					crawl := []string{"--records", recordsPath, "--state-dir", state, "--summary", state + ".json", "--depth", strconv.Itoa(depth)}
					rr := renderRun{web: web, delay: delay, polite: c.bin == bin} // an earlier build is measured as it is
					if split {
						rr.disp = exec.Command(c.bin, append(append([]string{"dispatcher", "--listen", "tcp://127.0.0.1:*", "--expect", "1",
							"--log-level", "info"}, crawl...), "--mappings", maps)...)
						rr.sup = func(endpoint string) *exec.Cmd {
							return exec.Command(c.bin, append([]string{"supervisor", "--dispatcher", endpoint, "--exit-when-done",
								"--state-dir", state + "-sup", "--log-level", "warn"}, common...)...)
						}
					} else {
						rr.disp = exec.Command(c.bin, append(append([]string{"run", "--log-level", "warn"}, crawl...), common...)...)
					}
					o = rr.run(b)
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
				results[key{shape, c.name}] = o
			})
		}
	}
	keys := make([]key, 0, len(results))
	for k := range results {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].shape+" "+keys[i].name < keys[j].shape+" "+keys[j].name
	})
	perPage := func(d time.Duration, pages int) float64 {
		if pages == 0 {
			return 0
		}
		return float64(d.Microseconds()) / 1000 / float64(pages)
	}
	for _, k := range keys {
		o := results[k]
		fmt.Printf("render: %-5s %-11s %7s wall, peak RSS %5.1f MiB (largest process), tree peak PSS %6.1f MiB, %3d pages rendered, %4d requests (%d pages, %d favicons and images, %d sooner than the delay), %d/%d findable fields filled\n",
			k.shape, k.name, o.wall.Round(100*time.Millisecond), o.rssMiB, o.treePSS, o.rendered, o.requests, o.pages, o.assets, o.early, o.filled, o.findable)
		var kinds []string
		for kind, k := range o.peakKinds {
			kinds = append(kinds, fmt.Sprintf("%s ×%d %.0f", kind, k.n, k.pssMiB))
		}
		sort.Strings(kinds)
		fmt.Printf("render: %-5s %-11s PSS at the peak by process (MiB): %s\n", k.shape, k.name, strings.Join(kinds, ", "))
		if k.shape == "split" {
			fmt.Printf("render: %-5s %-11s CPU per page fetched: dispatcher %.2f ms, supervisor %.2f ms, browser %.2f ms (of %v, %v, %v)\n",
				k.shape, k.name, perPage(o.dispCPU, o.pages), perPage(o.supCPU, o.pages), perPage(o.browserCPU, o.pages),
				o.dispCPU.Round(time.Millisecond), o.supCPU.Round(time.Millisecond), o.browserCPU.Round(time.Millisecond))
		} else {
			fmt.Printf("render: %-5s %-11s CPU per page fetched: backfill %.2f ms, browser %.2f ms (of %v, %v)\n",
				k.shape, k.name, perPage(o.dispCPU, o.pages), perPage(o.browserCPU, o.pages),
				o.dispCPU.Round(time.Millisecond), o.browserCPU.Round(time.Millisecond))
		}
	}
	for _, shape := range []string{"run", "split"} {
		s := results[key{shape, "static"}]
		for _, name := range []string{"render", "render-full", "before"} {
			r, ok := results[key{shape, name}]
			if !ok || s.wall == 0 || r.wall == 0 {
				continue
			}
			fmt.Printf("render: %-5s %s/static: wall ×%.2f, tree peak PSS ×%.2f, requests ×%.2f\n",
				shape, name, r.wall.Seconds()/s.wall.Seconds(), r.treePSS/s.treePSS, float64(r.requests)/float64(s.requests))
		}
		for _, name := range []string{"render", "render-full"} {
			if r, bf := results[key{shape, name}], results[key{shape, "before"}]; r.wall > 0 && bf.wall > 0 {
				fmt.Printf("render: %-5s %s/before: wall ×%.2f, tree peak PSS ×%.2f, browser CPU ×%.2f\n", shape, name,
					r.wall.Seconds()/bf.wall.Seconds(), r.treePSS/bf.treePSS, r.browserCPU.Seconds()/bf.browserCPU.Seconds())
			}
		}
	}
}

// renderOutcome is one measured run of BenchmarkRender.
type renderOutcome struct {
	wall     time.Duration
	rssMiB   float64 // peak RSS of the largest process (backfill, or the browser it waited for)
	treePSS  float64 // peak PSS of backfill and every descendant, MiB
	requests int     // requests the web got during the run
	pages    int     // of which pages answered 200 (robots.txt and soft-404 probes left out)
	assets   int     // of which favicons and images
	early    int     // of which sooner after the previous one to their host than the delay
	rendered int     // pages the dispatcher sent to be rendered
	filled   int     // fields filled
	findable int     // fields the web's truth says a correct crawl fills
	// CPU (user + system): of the dispatcher process (of `backfill run`
	// in one process), of the supervisor process without its browser, and
	// of the browser's processes. A process that ran a browser, and the
	// browser, are sampled from /proc with the memory (treeSample): their
	// last 100 ms are not counted.
	dispCPU, supCPU, browserCPU time.Duration
	peakKinds                   map[string]procKind // processes by kind at the peak
}

// renderRun is one run of BenchmarkRender: disp alone (`backfill run`),
// or disp (`backfill dispatcher`) and the supervisor sup makes once the
// dispatcher said where it listens.
type renderRun struct {
	web    *testweb.Web
	delay  time.Duration
	polite bool // fail on a request sooner than the delay, or a favicon or image
	disp   *exec.Cmd
	sup    func(endpoint string) *exec.Cmd
}

// run runs the processes, sampling their process trees' memory and the
// browser's CPU, and checks from the web's log that every host's delay
// held.
func (rr renderRun) run(b *testing.B) renderOutcome {
	var dout bytes.Buffer
	endpoint := make(chan string, 1)
	dlog := &lockedBuffer{onLine: func(line []byte) {
		var rec struct{ Msg, Endpoint string }
		if json.Unmarshal(line, &rec) == nil && rec.Msg == "dispatcher listening" && rec.Endpoint != "" {
			select {
			case endpoint <- rec.Endpoint:
			default:
			}
		}
	}}
	rr.disp.Stdout, rr.disp.Stderr = &dout, dlog
	before := len(rr.web.Log())
	b.StartTimer()
	start := time.Now()
	if err := rr.disp.Start(); err != nil {
		b.Fatalf("start %s: %v", rr.disp.Path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), contenderTimeout)
	defer cancel()
	var dispErr error
	dispDone := make(chan struct{})
	go func() {
		dispErr = rr.disp.Wait()
		close(dispDone)
	}()
	// Whatever way this returns, no process is left behind.
	defer func() {
		rr.disp.Process.Kill()
		<-dispDone
	}()
	stopKill := context.AfterFunc(ctx, func() { rr.disp.Process.Kill() })
	defer stopKill()

	var sup *exec.Cmd
	var supLog lockedBuffer
	var supPID atomic.Int64
	if rr.sup != nil {
		var ep string
		select {
		case ep = <-endpoint:
		case <-dispDone:
			b.Fatalf("dispatcher exited before listening: %v\n%s", dispErr, tail(dlog.Bytes()))
		case <-ctx.Done():
			b.Fatalf("dispatcher did not say where it listens\n%s", tail(dlog.Bytes()))
		}
		sup = rr.sup(ep)
		sup.Stdout, sup.Stderr = &supLog, &supLog
		if err := sup.Start(); err != nil {
			b.Fatalf("start supervisor: %v", err)
		}
		supPID.Store(int64(sup.Process.Pid))
		defer func() {
			if sup.ProcessState == nil {
				sup.Process.Kill()
				sup.Wait()
			}
		}()
	}

	var peak float64
	var peakKinds map[string]procKind
	var browser, own time.Duration
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			d := sampleTree(rr.disp.Process.Pid)
			pss, kinds := d.pssMiB, d.kinds
			// The browser is the descendants of the process that runs the
			// supervisor.
			browserNow, ownNow := d.childCPU, d.ownCPU
			if p := int(supPID.Load()); p > 0 {
				s := sampleTree(p)
				pss += s.pssMiB
				browserNow, ownNow = s.childCPU, s.ownCPU
				for k, v := range s.kinds {
					sum := kinds[k]
					sum.pssMiB += v.pssMiB
					sum.n += v.n
					kinds[k] = sum
				}
			}
			if pss > peak {
				peak, peakKinds = pss, kinds
			}
			browser = max(browser, browserNow)
			own = max(own, ownNow)
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()
	<-dispDone
	wall := time.Since(start)
	b.StopTimer()
	if dispErr != nil {
		close(stopSampling)
		<-sampled
		b.Fatalf("%v\nstdout:\n%s\nlog:\n%s", dispErr, tail(dout.Bytes()), tail(dlog.Bytes()))
	}
	if sup != nil {
		done := make(chan error, 1)
		go func() { done <- sup.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			sup.Process.Signal(syscall.SIGTERM)
			err = <-done
			b.Errorf("supervisor did not exit within 30s of the dispatcher's end (--exit-when-done)")
		}
		if err != nil {
			b.Errorf("supervisor: %v\n%s", err, tail(supLog.Bytes()))
		}
	}
	close(stopSampling)
	<-sampled

	o := renderOutcome{wall: wall, treePSS: peak, peakKinds: peakKinds, browserCPU: browser}
	o.rssMiB = peakRSSMiB(rr.disp)
	// The usage of a process that ran a browser holds only what of the
	// browser it waited for (the browser's children outlive it, adopted
	// by another), so the process's own CPU is the one sampled.
	o.dispCPU = cpuOf(rr.disp)
	if sup != nil {
		o.rssMiB = max(o.rssMiB, peakRSSMiB(sup))
		o.supCPU = own
	} else if browser > 0 {
		o.dispCPU = own
	}
	last := map[string]time.Time{}
	for _, r := range rr.web.Log()[before:] {
		o.requests++
		if r.Path == "/favicon.ico" || strings.HasPrefix(r.Path, "/img/") {
			o.assets++
		}
		if r.Status == 200 && r.Path != "/robots.txt" && !strings.HasPrefix(r.Path, "/backfill-probe-") {
			o.pages++
		}
		if l, ok := last[r.Host]; ok && r.Time.Sub(l) < rr.delay {
			o.early++
			if rr.polite {
				b.Errorf("%s%s requested %v after the previous request to its host; Crawl-delay %v", r.Host, r.Path, r.Time.Sub(l), rr.delay)
			}
		}
		last[r.Host] = r.Time
	}
	if rr.polite && o.assets > 0 {
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

// treeSample is what /proc says of a process tree at one moment.
type treeSample struct {
	pssMiB float64 // proportional set size of the process and every descendant
	// ownCPU is the CPU (user + system) of the process itself; childCPU
	// that of its descendants: of the live ones, with what each waited for
	// from its own children, and of the children the process itself
	// waited for. A descendant whose parent died before it is adopted by
	// another process, and what it spends after its last sample is lost;
	// so is the last 100 ms of the process itself.
	ownCPU, childCPU time.Duration
	// kinds is the PSS (MiB) and the count of the tree's processes by
	// kind: the command's name, with a browser process's --type.
	kinds map[string]procKind
}

// procKind is the processes of one kind in a treeSample.
type procKind struct {
	pssMiB float64
	n      int
}

// clockTick is the unit of times in /proc/PID/stat (USER_HZ, 100 on
// Linux).
const clockTick = 10 * time.Millisecond

// sampleTree reads the memory and the CPU of pid's tree.
func sampleTree(pid int) treeSample {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	cpu := map[int][2]int64{} // own and waited-for children's ticks
	names := map[int]string{}
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
		j := bytes.IndexByte(stat, '(')
		if i < 0 || j < 0 || j > i {
			continue
		}
		// After the command: state ppid ... utime(12th) stime cutime cstime.
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], p)
		var t [4]int64
		for k := range t {
			t[k], _ = strconv.ParseInt(f[11+k], 10, 64)
		}
		cpu[p] = [2]int64{t[0] + t[1], t[2] + t[3]}
		names[p] = string(stat[j+1 : i])
	}
	s := treeSample{kinds: map[string]procKind{}, ownCPU: time.Duration(cpu[pid][0]) * clockTick}
	ticks := cpu[pid][1]
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p != pid {
			ticks += cpu[p][0] + cpu[p][1]
		}
		dir := "/proc/" + strconv.Itoa(p)
		if roll, err := os.ReadFile(dir + "/smaps_rollup"); err == nil {
			for line := range strings.Lines(string(roll)) {
				if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
					if f := strings.Fields(rest); len(f) > 0 {
						n, _ := strconv.ParseUint(f[0], 10, 64)
						mib := float64(n) / 1024
						s.pssMiB += mib
						kind := names[p]
						if cmd, err := os.ReadFile(dir + "/cmdline"); err == nil {
							// A browser's children rewrite their command
							// line into one string, spaces between.
							for _, arg := range strings.Fields(strings.ReplaceAll(string(cmd), "\x00", " ")) {
								if t, ok := strings.CutPrefix(arg, "--type="); ok {
									kind += " " + t
								}
							}
						}
						k := s.kinds[kind]
						k.pssMiB += mib
						k.n++
						s.kinds[kind] = k
					}
					break
				}
			}
		}
		queue = append(queue, children[p]...)
	}
	s.childCPU = time.Duration(ticks) * clockTick
	return s
}
