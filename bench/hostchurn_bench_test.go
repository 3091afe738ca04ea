//go:build unix

package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/testweb"
	"backfill/wire"
)

// BenchmarkHostChurnSoak measures a supervisor's memory over a crawl of
// millions of distinct hosts that nearly all fail at once: the shape of a
// large records file whose links mostly lead nowhere. Whatever the
// supervisor keeps per host it ever saw shows here as a resident set that
// grows with the hosts; kept per host it still works on, as a flat one.
//
// The supervisor is the real binary, as its own process. The benchmark
// process is its dispatcher, speaking the wire protocol over loopback
// ZeroMQ: it welcomes the supervisor, keeps it at its advertised capacity
// with tasks and reads its results and heartbeats (whose RSS field is the
// sample). A dispatcher that feeds tasks as fast as they are answered lets
// a few minutes reach millions of hosts, and measures the supervisor
// alone. Task i goes to its own host 127.x.y.z:9 (i spread over
// 127.0.1.0–127.255.255.255), where nothing listens: the connection is
// refused at once. Every CHURN_LIVE_EVERY-th task (default 50) is instead a
// profile of a small fixture web (100 hosts, --resolve), so pages are
// fetched and extracted too.
//
// It runs for CHURN_FOR (default 4m) or CHURN_HOSTS tasks (default
// 5,000,000), whichever ends first, with CHURN_WORKERS workers (64) and
// --delay 0. CHURN_BASE_BIN names an older build to measure first, in the
// same run, for a before/after ratio (CHURN_BASE_HOSTS, default
// CHURN_HOSTS, stops it sooner: a build whose memory grows with the hosts
// may need several GiB for millions); BACKFILL_BIN the build to measure
// (default: ../cmd/backfill built here); CHURN_ARGS adds supervisor flags
// (e.g. "--metrics 127.0.0.1:9464" to watch its Go heap). Run on demand,
// with SOAK=1:
//
//	cd bench && SOAK=1 CHURN_BASE_BIN=/tmp/backfill-main go test -run '^$' -bench HostChurnSoak -benchtime 1x -timeout 1h .
func BenchmarkHostChurnSoak(b *testing.B) {
	proctest.OptIn(b, "SOAK", "a soak of minutes")
	opts := churnOptions{
		hosts:     envInt(b, "CHURN_HOSTS", 5_000_000),
		runFor:    envDuration(b, "CHURN_FOR", 4*time.Minute),
		workers:   envInt(b, "CHURN_WORKERS", 64),
		liveEvery: envInt(b, "CHURN_LIVE_EVERY", 50),
	}
	web, err := testweb.StartLarge(testweb.LargeOptions{Hosts: churnWebHosts, Pages: churnWebPages})
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	dir := b.TempDir()
	opts.mappings = fixtureMappings(b, dir)
	opts.resolve = resolveFlags(web)
	type build struct {
		name, bin string
		hosts     int
	}
	var builds []build
	if base := os.Getenv("CHURN_BASE_BIN"); base != "" {
		builds = append(builds, build{"base", base, envInt(b, "CHURN_BASE_HOSTS", opts.hosts)})
	}
	bin := os.Getenv("BACKFILL_BIN")
	if bin == "" {
		bin = goBuild(b, "..", "./cmd/backfill", filepath.Join(dir, "backfill"))
	}
	builds = append(builds, build{"this", bin, opts.hosts})
	b.StopTimer()
	var outs []churnOutcome
	for i, bd := range builds {
		run := opts
		run.hosts = bd.hosts
		o := runChurn(b, bd.bin, filepath.Join(dir, fmt.Sprintf("state-%d", i)), run)
		o.name = bd.name
		outs = append(outs, o)
		fmt.Printf("churn %s: %d tasks answered in %s (%.0f/s; %d fetched pages); RSS MiB over time: %s\n",
			o.name, o.answered, o.wall.Round(time.Second), float64(o.answered)/o.wall.Seconds(), o.fetched, o.curve())
		fmt.Printf("churn %s: peak RSS %.1f MiB; after the first fifth %.1f–%.1f MiB; growth %.1f MiB per million hosts after the first fifth\n",
			o.name, o.peakMiB, o.lo, o.hi, o.growthPerMillion())
		b.ReportMetric(o.peakMiB, o.name+"-peakRSS-MiB")
	}
	if len(outs) == 2 {
		base, this := outs[0], outs[1]
		fmt.Printf("churn: this/base: peak RSS ×%.2f, tasks answered per second ×%.2f\n",
			this.peakMiB/base.peakMiB, (float64(this.answered)/this.wall.Seconds())/(float64(base.answered)/base.wall.Seconds()))
	}
}

// The small live web among the refused hosts.
const (
	churnWebHosts = 100
	churnWebPages = 100
)

type churnOptions struct {
	hosts, workers, liveEvery int
	runFor                    time.Duration
	mappings                  string
	resolve                   []string
}

type churnOutcome struct {
	name     string
	answered int64
	fetched  int64 // answered without a failure class
	wall     time.Duration
	samples  []churnSample
	peakMiB  float64 // the process's own high-water mark (rusage)
	lo, hi   float64 // smallest and largest sample after the first fifth
}

type churnSample struct {
	at       time.Duration
	answered int64
	mib      float64
}

// curve is ten samples spread over the run: "time answered MiB".
func (o churnOutcome) curve() string {
	if len(o.samples) == 0 {
		return "no heartbeat"
	}
	var parts []string
	for i := range 10 {
		s := o.samples[i*(len(o.samples)-1)/9]
		parts = append(parts, fmt.Sprintf("%s %dk %.0f", s.at.Round(time.Second), s.answered/1000, s.mib))
	}
	return strings.Join(parts, ", ")
}

// growthPerMillion is the RSS added per million tasks answered between
// the first fifth of the samples and the last one.
func (o churnOutcome) growthPerMillion() float64 {
	if len(o.samples) < 5 {
		return 0
	}
	a, z := o.samples[len(o.samples)/5], o.samples[len(o.samples)-1]
	if z.answered == a.answered {
		return 0
	}
	return (z.mib - a.mib) / float64(z.answered-a.answered) * 1e6
}

// churnURL is task i's URL and politeness host: a profile of the live web
// every liveEvery-th task, else a loopback address of its own where
// nothing listens.
func churnURL(i, liveEvery int) (string, string) {
	if i%liveEvery == 0 {
		k := i / liveEvery
		host := fmt.Sprintf("people-%04d.example", 1+k%churnWebHosts)
		return fmt.Sprintf("http://%s/p/%04d", host, 1+(k/churnWebHosts)%churnWebPages), host
	}
	h := i + 256 // 127.0.1.0 upwards: 16M addresses, one per task
	host := fmt.Sprintf("127.%d.%d.%d:9", h>>16&255, h>>8&255, h&255)
	return "http://" + host + "/people/" + fmt.Sprint(i), host
}

// runChurn runs one supervisor process against the benchmark's own
// dispatcher end until the time or the hosts run out, then stops it.
func runChurn(b *testing.B, bin, state string, o churnOptions) churnOutcome {
	intake, err := wire.Listen("tcp://127.0.0.1:*")
	if err != nil {
		b.Fatal(err)
	}
	defer intake.Close()
	args := append([]string{"supervisor", "--dispatcher", intake.Endpoint(), "--name", "churn",
		"--mappings", o.mappings, "--state-dir", state, "--allow-loopback",
		"--workers", fmt.Sprint(o.workers), "--delay", "0", "--log-level", "warn"}, o.resolve...)
	args = append(args, strings.Fields(os.Getenv("CHURN_ARGS"))...)
	cmd := exec.Command(bin, args...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{}) // closed once the process is gone; then waitErr is set
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()

	var (
		mu       sync.Mutex
		samples  []churnSample
		answered int64
		fetched  int64
		sender   *wire.Sender
		capacity int
	)
	welcomed := make(chan struct{})
	slots := make(chan struct{}, 1<<16) // one per task in flight, drained by results
	stopRead := make(chan struct{})
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			select {
			case <-stopRead:
				return
			default:
			}
			kind, v, err := intake.Recv(25 * time.Millisecond)
			if err != nil {
				continue
			}
			switch kind {
			case wire.KindHello:
				h := v.(*wire.Hello)
				mu.Lock()
				if sender == nil {
					if sender, err = wire.Dial(h.Endpoint); err == nil {
						capacity = h.Capacity
						sender.Send(wire.KindWelcome, wire.Welcome{Dispatcher: "churn", Run: "churn"}, 5*time.Second)
						close(welcomed)
					}
				}
				mu.Unlock()
			case wire.KindHeartbeat:
				hb := v.(*wire.Heartbeat)
				mu.Lock()
				samples = append(samples, churnSample{at: time.Since(start), answered: answered, mib: float64(hb.RSS) / (1 << 20)})
				mu.Unlock()
			case wire.KindResult:
				r := v.(*wire.Result)
				mu.Lock()
				answered++
				if r.Class == "" {
					fetched++
				}
				mu.Unlock()
				select {
				case <-slots:
				default:
				}
			}
		}
	}()
	stop := func() {
		close(stopRead)
		<-readDone
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-exited
		}
		if sender != nil {
			sender.Close()
		}
	}
	select {
	case <-welcomed:
	case <-exited:
		stop()
		b.Fatalf("supervisor exited before saying hello: %v\n%s", waitErr, tail(out.Bytes()))
	case <-time.After(time.Minute):
		stop()
		b.Fatalf("no hello from the supervisor within a minute\n%s", tail(out.Bytes()))
	}
	capacity = min(capacity, cap(slots))
	deadline := time.After(o.runFor)
	i := 0
feed:
	for i = 1; i <= o.hosts; i++ {
		// At most capacity tasks in flight: a slot is taken per task and
		// given back by its result.
		for len(slots) >= capacity {
			select {
			case <-deadline:
				break feed
			case <-exited:
				stop()
				b.Fatalf("supervisor exited: %v\n%s", waitErr, tail(out.Bytes()))
			case <-time.After(time.Millisecond):
			}
		}
		select {
		case <-deadline:
			break feed
		default:
		}
		u, host := churnURL(i, o.liveEvery)
		slots <- struct{}{}
		if err := sender.Send(wire.KindTask, wire.Task{ID: fmt.Sprint(i), Lease: 1, URL: u, Host: host}, 10*time.Second); err != nil {
			if errors.Is(err, wire.ErrTimeout) {
				continue
			}
			stop()
			b.Fatalf("task %d: %v", i, err)
		}
	}
	wall := time.Since(start)
	stop()
	o2 := churnOutcome{wall: wall}
	mu.Lock()
	o2.samples, o2.answered, o2.fetched = samples, answered, fetched
	mu.Unlock()
	o2.peakMiB = peakRSSMiB(cmd)
	if n := len(o2.samples); n > 0 {
		o2.lo = o2.samples[n-1].mib
		for _, s := range o2.samples[n/5:] {
			o2.lo, o2.hi = min(o2.lo, s.mib), max(o2.hi, s.mib)
		}
	}
	if o2.answered == 0 {
		b.Fatalf("no task answered\n%s", tail(out.Bytes()))
	}
	return o2
}
