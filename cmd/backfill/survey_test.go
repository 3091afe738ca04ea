package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"backfill/survey"
	"backfill/survey/surveytest"
)

// surveyRows reads a JSON Lines output file.
func surveyRows[T any](t *testing.T, path string) []T {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r T
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// Timeouts of the survey tests: far longer than any stall of a loaded
// machine. The zones are Prompt (surveytest), and the ports open or
// refused: nothing makes a survey wait a timeout out, so they cost
// nothing.
const (
	surveyTimeout    = "30s"
	surveyDNSTimeout = "10s"
)

// startSurveyDispatcher starts `backfill survey ...` listening for the
// cluster and returns it with its intake endpoint.
func startSurveyDispatcher(t *testing.T, name string, args ...string) (*process, string) {
	t.Helper()
	p := start(t, name, append([]string{"survey"}, args...)...)
	line, ok := p.stderr.wait(regexp.MustCompile(`survey listening`), time.Now().Add(time.Minute))
	if !ok {
		t.Fatalf("survey never said where it listens\n%s", p.stderr)
	}
	var l struct{ Endpoint string }
	if err := json.Unmarshal([]byte(line), &l); err != nil || l.Endpoint == "" {
		t.Fatalf("log line %q: %v", line, err)
	}
	return p, l.Endpoint
}

func startSurveySupervisor(t *testing.T, name, endpoint string) *process {
	return start(t, name, "supervisor", "--name", name, "--dispatcher", endpoint, "--allow-loopback",
		"--state-dir", filepath.Join(t.TempDir(), name))
}

// One machine: `survey web` against the loopback zone, its three outcome
// classes, the summary and the store.
func TestSurveyWebOneMachine(t *testing.T) {
	w := surveytest.Start(t, surveytest.Options{Domains: 300, Addresses: 30, Prompt: true})
	dir := t.TempDir()
	domains := filepath.Join(dir, "domains.txt")
	w.WriteDomains(domains, "bad domain!")
	out := filepath.Join(dir, "survey.jsonl")
	p := start(t, "survey", "survey", "web", "--domains", domains, "--resolver", w.DNS, "--dns-timeout", surveyDNSTimeout,
		"--http-port", strconv.Itoa(w.HTTPPort), "--https-port", strconv.Itoa(w.HTTPSPort), "--allow-loopback",
		"--timeout", surveyTimeout, "--delay", "0", "--rate", "0", "--out", out, "--state-dir", filepath.Join(dir, "state"),
		"--summary", filepath.Join(dir, "summary.json"), "--headers", "X-Powered-By")
	if code := p.waitExit(2 * time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.stderr)
	}
	rows := surveyRows[survey.WebRow](t, out)
	if len(rows) != 300 {
		t.Fatalf("%d rows, want 300", len(rows))
	}
	classes := map[string]bool{}
	for _, r := range rows {
		classes[r.Outcome] = true
	}
	for _, c := range []string{survey.Answered, survey.Unresponsive, survey.Unresolved} {
		if !classes[c] {
			t.Errorf("no %s row", c)
		}
	}
	text := p.stdout.String()
	for _, s := range []string{"survey web/1: 300 rows", "outcomes: answered", "domains.txt:2: \"bad domain!\" is not a domain name"} {
		if !strings.Contains(text, s) {
			t.Errorf("summary lacks %q:\n%s", s, text)
		}
	}
	var sum survey.Summary
	b, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err := json.Unmarshal(b, &sum); err != nil || sum.Rows != 300 || !sum.Finished {
		t.Fatalf("summary.json: %v %+v", err, sum)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "results.db")); err != nil {
		t.Errorf("results store: %v", err)
	}
}

// The cluster: `survey web --cluster` with two supervisor processes; each
// /24 is probed by one supervisor.
func TestSurveyWebCluster(t *testing.T) {
	w := surveytest.Start(t, surveytest.Options{Domains: 400, Addresses: 300, Prompt: true})
	dir := t.TempDir()
	domains := filepath.Join(dir, "domains.txt")
	w.WriteDomains(domains)
	out := filepath.Join(dir, "survey.jsonl")
	disp, endpoint := startSurveyDispatcher(t, "survey", "web", "--cluster", "tcp://127.0.0.1:0", "--expect", "2",
		"--domains", domains, "--resolver", w.DNS, "--dns-timeout", surveyDNSTimeout, "--schemes", "http",
		"--http-port", strconv.Itoa(w.HTTPPort), "--timeout", surveyTimeout, "--delay", "0", "--rate", "0", "--out", out,
		"--state-dir", filepath.Join(dir, "state"))
	startSurveySupervisor(t, "crawler-1", endpoint)
	startSurveySupervisor(t, "crawler-2", endpoint)
	if code := disp.waitExit(2 * time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, disp.stderr)
	}
	rows := surveyRows[survey.WebRow](t, out)
	if len(rows) != 400 {
		t.Fatalf("%d rows, want 400", len(rows))
	}
	owner := map[string]string{}
	for _, r := range rows {
		if r.Supervisor == "" || r.SharedIP || r.CopiedFrom != "" {
			continue
		}
		blk := netip.PrefixFrom(netip.MustParseAddr(r.IP), 24).Masked().String()
		if o, ok := owner[blk]; ok && o != r.Supervisor {
			t.Errorf("%s probed by %s and %s", blk, o, r.Supervisor)
		}
		owner[blk] = r.Supervisor
	}
	if len(owner) < 2 {
		t.Errorf("blocks probed: %v", owner)
	}
}

// kill -9 of a survey's dispatcher mid-run: started again on the same
// state directory, it finishes with every ip:port once.
func TestSurveyPortsClusterKill(t *testing.T) {
	ports := fmt.Sprintf("%d,%d,1", surveytest.OpenPort(t, "127.4.0.1"), surveytest.OpenPort(t, "127.4.0.1"))
	dir := t.TempDir()
	out := filepath.Join(dir, "ports.jsonl")
	args := []string{"ports", "--cluster", "tcp://127.0.0.1:0", "--expect", "2", "--targets", "127.4.0.0/24", "--ports", ports,
		"--allow-loopback", "--rate", "150", "--delay", "0", "--timeout", surveyTimeout, "--lease", "5s", "--out", out, "--state-dir", filepath.Join(dir, "state")}
	disp, endpoint := startSurveyDispatcher(t, "survey-1", args...)
	startSurveySupervisor(t, "crawler-1", endpoint)
	startSurveySupervisor(t, "crawler-2", endpoint)
	deadline := time.Now().Add(time.Minute)
	for {
		b, _ := os.ReadFile(out)
		if bytes.Count(b, []byte("\n")) >= 150 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no progress\n%s", disp.stderr)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	disp.cmd.Process.Signal(syscall.SIGKILL)
	disp.waitExit(10 * time.Second)
	// Started again on the same endpoint, so the supervisors find it.
	args[2] = endpoint
	disp2 := start(t, "survey-2", append([]string{"survey"}, args...)...)
	if code := disp2.waitExit(2 * time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, disp2.stderr)
	}
	rows := surveyRows[survey.PortRow](t, out)
	seen := map[string]bool{}
	for _, r := range rows {
		k := net.JoinHostPort(r.IP, strconv.Itoa(r.Port))
		if seen[k] {
			t.Errorf("%s twice", k)
		}
		seen[k] = true
		if r.IP == "127.4.0.1" && r.Port != 1 && r.State != survey.PortOpen {
			t.Errorf("%s: %s, want open", k, r.State)
		}
	}
	if len(seen) != 256*3 {
		t.Fatalf("%d rows after the restart, want %d", len(seen), 256*3)
	}
	if !strings.Contains(disp2.stderr.String(), "resuming survey run") {
		t.Errorf("the second dispatcher did not resume:\n%s", disp2.stderr)
	}
}

// A port survey without any blocklist refuses to start; the dry run prints
// targets and connects to nothing.
func TestSurveyPortsRefusalAndDryRun(t *testing.T) {
	p := start(t, "survey", "survey", "ports", "--random", "5", "--no-default-blocklist", "--state-dir", t.TempDir())
	if code := p.waitExit(time.Minute); code != exitUsage || !strings.Contains(p.stderr.String(), "no blocklist in effect") {
		t.Fatalf("exit %d: %s", code, p.stderr)
	}
	p = start(t, "survey", "survey", "ports", "--random", "50", "--seed", "7", "--ports", "web", "--dry-run")
	if code := p.waitExit(time.Minute); code != 0 {
		t.Fatalf("exit %d: %s", code, p.stderr)
	}
	lines := strings.Split(strings.TrimSpace(p.stdout.String()), "\n")
	if len(lines) != 50*7 {
		t.Fatalf("%d targets, want %d", len(lines), 50*7)
	}
	bl := survey.DefaultBlocklist()
	for _, l := range lines {
		if ap, err := netip.ParseAddrPort(l); err != nil || bl.Blocks(ap.Addr()) {
			t.Fatalf("target %q: %v", l, err)
		}
	}
}
