package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkIntakeCLI times intake as a user meets it: the built binary,
// `backfill dispatcher --records FILE` until it logs "dispatcher running"
// (ready to hand out its first task), and `backfill run --records FILE`
// until its supervisor reports its first page (a task handed out and
// answered), from the process's start. It reports records/s, the peak
// RSS at that moment and the bytes per record of state.db and results.db
// once the process stopped (an interrupted run writes each record's
// outcome, "not-fetched", which counts here).
//
//	go run ./cmd/genrecords -n 1000000 -o /tmp/1m.jsonl
//	BENCH_INTAKE_RECORDS=/tmp/1m.jsonl BENCH_INTAKE_BEFORE=/tmp/backfill-before \
//	  go test -run '^$' -bench IntakeCLI -benchtime 1x -timeout 1h .
//
// Without BENCH_INTAKE_RECORDS it generates BENCH_INTAKE_N records
// (default 100,000). BENCH_INTAKE_BEFORE names an earlier build, run in
// turn with this one (this, before, this, before…) so that their ratio
// holds on a loaded machine.
func BenchmarkIntakeCLI(b *testing.B) {
	dir := b.TempDir()
	records := os.Getenv("BENCH_INTAKE_RECORDS")
	if records == "" {
		gen := goBuild(b, ".", "./cmd/genrecords", filepath.Join(dir, "genrecords"))
		records = filepath.Join(dir, "records.jsonl")
		n := envInt(b, "BENCH_INTAKE_N", 100_000)
		if msg, err := exec.Command(gen, "-n", strconv.Itoa(n), "-o", records).CombinedOutput(); err != nil {
			b.Fatalf("genrecords: %v\n%s", err, msg)
		}
	}
	n := countLines(b, records)
	bins := []struct{ name, path string }{{"this", goBuild(b, "..", "./cmd/backfill", filepath.Join(dir, "backfill"))}}
	if before := os.Getenv("BENCH_INTAKE_BEFORE"); before != "" {
		bins = append(bins, struct{ name, path string }{"before", before})
	}
	for _, cmd := range []string{"dispatcher", "run"} {
		for _, bin := range bins {
			b.Run(cmd+"/"+bin.name, func(b *testing.B) {
				var o intakeOutcome
				for i := 0; i < b.N; i++ {
					o = runIntake(b, bin.path, cmd, records, filepath.Join(dir, fmt.Sprintf("%s-%s-%d", cmd, bin.name, i)))
				}
				rate := float64(n) / o.ready.Seconds()
				b.ReportMetric(rate, "records/s")
				b.ReportMetric(o.peakMiB, "peakRSS-MiB")
				b.ReportMetric(float64(o.bytes)/float64(n), "B/record")
				b.ReportMetric(o.cpu.Seconds(), "cpu-s")
				fmt.Printf("intake: %-10s %-6s %d records in %6.2f s (CPU %6.2f s): %7.0f records/s, peak RSS %5.1f MiB, state.db+results.db %4.0f B/record\n",
					cmd, bin.name, n, o.ready.Seconds(), o.cpu.Seconds(), rate, o.peakMiB, float64(o.bytes)/float64(n))
			})
		}
	}
}

type intakeOutcome struct {
	ready   time.Duration
	cpu     time.Duration // user + system until ready
	peakMiB float64
	bytes   int64
}

// runIntake starts bin's cmd on records in the state directory state,
// waits for its first task (see BenchmarkIntakeCLI), interrupts it and
// waits for it to stop.
func runIntake(b *testing.B, bin, cmd, records, state string) intakeOutcome {
	args := []string{cmd, "--records", records, "--state-dir", state, "--log-format", "json"}
	marker := []byte(`"msg":"dispatcher running"`)
	if cmd == "run" {
		args = append(args, "--log-level", "debug", "--allow-loopback", "--contact", "https://backfill.invalid/bench/intake")
		marker = []byte(`"msg":"page failed"`) // genrecords' hosts refuse at once
	} else {
		args = append(args, "--listen", "tcp://127.0.0.1:0")
	}
	c := exec.Command(bin, args...)
	stderr, err := c.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	var o intakeOutcome
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	found := false
	for sc.Scan() {
		if !found && bytes.Contains(sc.Bytes(), marker) {
			found = true
			o.ready = time.Since(start)
			o.peakMiB = float64(procHWM(c.Process.Pid)) / 1024
			o.cpu = procCPU(c.Process.Pid)
			c.Process.Signal(syscall.SIGINT)
		}
	}
	if err := c.Wait(); err != nil && !found {
		b.Fatalf("%s %s: %v", bin, cmd, err)
	}
	if !found {
		b.Fatalf("%s %s: no first task", bin, cmd)
	}
	for _, name := range []string{"state.db", "results.db"} {
		for _, suffix := range []string{"", "-wal"} {
			if fi, err := os.Stat(filepath.Join(state, name+suffix)); err == nil {
				o.bytes += fi.Size()
			}
		}
	}
	os.RemoveAll(state)
	return o
}

// procCPU is the user and system time a process has used so far, 0 when
// it cannot be read (/proc/PID/stat counts in ticks of 1/100 s).
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// procHWM is a process's peak resident set size in KiB (VmHWM), 0 when
// it cannot be read.
func procHWM(pid int) int64 { return procKiB(pid, "VmHWM:") }

// procKiB is a size in KiB that /proc/PID/status gives under field
// ("VmRSS:", "VmHWM:"), 0 when it cannot be read.
func procKiB(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}
