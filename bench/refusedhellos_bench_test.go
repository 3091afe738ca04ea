package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"backfill/dispatcher"
	"backfill/wire"
)

// BenchmarkRefusedHellos floods a real `backfill dispatcher` process, on
// a CURVE intake, with Hellos from a member whose key is authorized (a
// compromised droplet): BENCH_HELLOS of them (default 10,000), each with
// a name of BENCH_HELLO_NAME bytes (default 7 MiB, under the 8 MiB frame
// limit) and a mapping digest the dispatcher does not have. It reports the
// dispatcher's resident memory before the flood (after it started and
// settled), 5 s after it, and at its peak, and the bytes it logged.
//
//	cd bench && go test -run '^$' -bench RefusedHellos -benchtime 1x -timeout 30m .
//
// BENCH_HELLOS_BEFORE names an earlier build, flooded in turn with
// BENCH_HELLOS_BEFORE_N Hellos (default 35: it logs every name whole).
// The sender keeps at most helloWindow Hellos ahead of what the
// dispatcher's status says it refused, so that only the dispatcher's
// own queueing is measured.
func BenchmarkRefusedHellos(b *testing.B) {
	dir := b.TempDir()
	n := envInt(b, "BENCH_HELLOS", 10000)
	size := envInt(b, "BENCH_HELLO_NAME", 7<<20)
	bins := []struct {
		name, path string
		n          int
	}{{"this", goBuild(b, "..", "./cmd/backfill", filepath.Join(dir, "backfill")), n}}
	if before := os.Getenv("BENCH_HELLOS_BEFORE"); before != "" {
		bins = append(bins, struct {
			name, path string
			n          int
		}{"before", before, envInt(b, "BENCH_HELLOS_BEFORE_N", 35)})
	}
	for _, bin := range bins {
		b.Run(bin.name, func(b *testing.B) {
			var o helloOutcome
			for i := 0; i < b.N; i++ {
				o = floodHellos(b, bin.path, filepath.Join(dir, fmt.Sprintf("%s-%d", bin.name, i)), bin.n, size)
			}
			b.ReportMetric(o.baseMiB, "baseRSS-MiB")
			b.ReportMetric(o.afterMiB, "afterRSS-MiB")
			b.ReportMetric(o.peakMiB, "peakRSS-MiB")
			b.ReportMetric(o.afterMiB-o.baseMiB, "growth-MiB")
			b.ReportMetric(float64(o.logBytes)/(1<<20), "log-MiB")
			fmt.Printf("refused hellos: %-6s %d of %d MiB names in %.1f s (%d refused): RSS %.1f MiB before, %.1f after (%+.1f), peak %.1f; log %.2f MiB\n",
				bin.name, bin.n, size>>20, o.wall.Seconds(), o.refused, o.baseMiB, o.afterMiB, o.afterMiB-o.baseMiB, o.peakMiB,
				float64(o.logBytes)/(1<<20))
		})
	}
}

// helloWindow is how many Hellos the sender keeps ahead of the
// dispatcher's count of refusals.
const helloWindow = 128

type helloOutcome struct {
	baseMiB, afterMiB, peakMiB float64
	logBytes                   int64
	refused                    int64
	wall                       time.Duration
}

// countingWriter counts what a process logs, keeping the lines that say
// where it listens and that it runs.
type countingWriter struct {
	n     atomic.Int64
	mu    sync.Mutex
	lines []string
}

func (c *countingWriter) scan(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		c.n.Add(int64(len(sc.Bytes()) + 1))
		if line := sc.Text(); strings.Contains(line, `"dispatcher listening"`) || strings.Contains(line, `"dispatcher running"`) {
			c.mu.Lock()
			c.lines = append(c.lines, line)
			c.mu.Unlock()
		}
	}
	io.Copy(io.Discard, r)
}

func (c *countingWriter) find(re *regexp.Regexp, within time.Duration) string {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		for _, l := range c.lines {
			if re.MatchString(l) {
				c.mu.Unlock()
				return l
			}
		}
		c.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	return ""
}

// floodHellos starts bin's dispatcher in state, waits for it to settle,
// sends it n Hellos of size-byte names and measures it.
func floodHellos(b *testing.B, bin, state string, n, size int) helloOutcome {
	if err := os.MkdirAll(filepath.Join(state, "authorized"), 0o700); err != nil {
		b.Fatal(err)
	}
	disp, err := wire.NewKeys()
	if err != nil {
		b.Fatal(err)
	}
	member, err := wire.NewKeys()
	if err != nil {
		b.Fatal(err)
	}
	if err := wire.WriteKeys(filepath.Join(state, "dispatcher"), disp, false); err != nil {
		b.Fatal(err)
	}
	writeFile(b, filepath.Join(state, "authorized"), "droplet.pub", []byte(member.Public+"\n"))
	records := writeFile(b, state, "records.csv", []byte("id,url,email\n1,https://a.invalid/,\n"))
	c := exec.Command(bin, "dispatcher", "--records", records, "--state-dir", filepath.Join(state, "crawl"),
		"--listen", "tcp://127.0.0.1:0", "--key", filepath.Join(state, "dispatcher.key"),
		"--authorized-keys", filepath.Join(state, "authorized"), "--expect", "1", "--expect-timeout", "0", "--log-format", "json")
	stderr, err := c.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	var logs countingWriter
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		logs.scan(stderr)
	}()
	defer func() {
		c.Process.Signal(syscall.SIGINT)
		c.Wait()
		<-scanned
	}()
	line := logs.find(regexp.MustCompile(`"dispatcher listening"`), time.Minute)
	var listening struct{ Endpoint string }
	if json.Unmarshal([]byte(line), &listening) != nil || listening.Endpoint == "" {
		b.Fatalf("the dispatcher did not say where it listens: %q", line)
	}
	if logs.find(regexp.MustCompile(`"dispatcher running"`), time.Minute) == "" {
		b.Fatal("the dispatcher did not start running")
	}
	time.Sleep(2 * time.Second) // settled: waiting for its supervisor
	var o helloOutcome
	o.baseMiB = float64(procKiB(c.Process.Pid, "VmRSS:")) / 1024
	logBefore := logs.n.Load()

	s, err := wire.DialSecure(listening.Endpoint, wire.Security{Keys: member, ServerKey: disp.Public})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	name := bytes.Repeat([]byte{'x'}, size)
	start := time.Now()
	status := filepath.Join(state, "crawl", dispatcher.StatusFile)
	paced := n > helloWindow
	for i := range n {
		copy(name, fmt.Sprintf("%08d", i)) // a new name each time
		h := wire.Hello{Supervisor: string(name), Endpoint: "tcp://127.0.0.1:1", Capacity: 8, Key: member.Public,
			Mappings: "not-the-dispatchers", Started: start}
		if err := s.Send(wire.KindHello, h, time.Minute); err != nil {
			b.Fatalf("hello %d: %v", i, err)
		}
		for paced && int64(i+1)-refusedOf(status, member.Public) > helloWindow {
			time.Sleep(50 * time.Millisecond)
			if time.Since(start) > 20*time.Minute {
				b.Fatalf("the dispatcher refused %d of %d hellos in 20 minutes", refusedOf(status, member.Public), i+1)
			}
		}
	}
	if paced {
		for o.refused = refusedOf(status, member.Public); o.refused < int64(n); o.refused = refusedOf(status, member.Public) {
			time.Sleep(100 * time.Millisecond)
			if time.Since(start) > 25*time.Minute {
				b.Fatalf("the dispatcher refused %d of %d hellos", o.refused, n)
			}
		}
	} else {
		// An earlier build says nothing of its refusals: wait until its
		// log is quiet.
		for last := int64(-1); logs.n.Load() != last; {
			last = logs.n.Load()
			time.Sleep(2 * time.Second)
		}
	}
	o.wall = time.Since(start)
	time.Sleep(5 * time.Second)
	o.afterMiB = float64(procKiB(c.Process.Pid, "VmRSS:")) / 1024
	o.peakMiB = float64(procKiB(c.Process.Pid, "VmHWM:")) / 1024
	o.logBytes = logs.n.Load() - logBefore
	return o
}

// refusedOf is how many frames from key the dispatcher's status file says
// it refused, in every category.
func refusedOf(status, key string) int64 {
	data, err := os.ReadFile(status)
	if err != nil {
		return 0
	}
	var st dispatcher.Status
	if json.Unmarshal(data, &st) != nil {
		return 0
	}
	var n int64
	for _, r := range st.RefusedMembers {
		if r.Key == key {
			n += r.Count
		}
	}
	return n
}
