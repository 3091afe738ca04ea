package main

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
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/testweb"
)

// buildBinary builds cmd/backfill once per test binary run.
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func backfillBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "backfill-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "backfill")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// process is a backfill subcommand running as its own OS process.
type process struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr *lineLog
	done   <-chan struct{}
	proc   *proctest.Process
}

// lineLog is a process's stderr, its lines waited for; wait is the name
// the tests call proctest's Wait by.
type lineLog struct{ *proctest.Lines }

func (l *lineLog) wait(re *regexp.Regexp, deadline time.Time) (string, bool) {
	return l.Wait(re, deadline)
}

// writeSample writes the fixture web's sample records into dir and
// returns their path and the known truth.
func writeSample(t *testing.T, dir string) (string, map[string]map[string]string) {
	t.Helper()
	records, truth := testweb.Sample()
	path := filepath.Join(dir, "records.csv")
	if err := os.WriteFile(path, records, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, truth
}

// startDispatcher starts `backfill dispatcher` with args and returns it
// with the intake endpoint it logs once it listens.
func startDispatcher(t *testing.T, args ...string) (*process, string) {
	t.Helper()
	disp := start(t, "dispatcher", append([]string{"dispatcher"}, args...)...)
	line, ok := disp.stderr.wait(regexp.MustCompile(`dispatcher listening`), time.Now().Add(time.Minute))
	if !ok {
		t.Fatalf("dispatcher never said where it listens\n%s", disp.stderr)
	}
	var listening struct{ Endpoint string }
	if err := json.Unmarshal([]byte(line), &listening); err != nil || listening.Endpoint == "" {
		t.Fatalf("dispatcher log line %q: %v", line, err)
	}
	return disp, listening.Endpoint
}

func start(t *testing.T, name string, args ...string) *process {
	t.Helper()
	p := &process{t: t, name: name}
	p.cmd = exec.Command(backfillBinary(t), args...)
	p.cmd.Stdout = &p.stdout
	p.proc = proctest.Start(t, p.cmd)
	p.stderr, p.done = &lineLog{&p.proc.Stderr}, p.proc.Done()
	t.Cleanup(func() {
		checkLogKeys(t, name, p.stderr.String())
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, p.stderr)
		}
	})
	return p
}

// waitExit waits for the process to end and returns its exit code.
func (p *process) waitExit(timeout time.Duration) int {
	p.t.Helper()
	code, err := p.proc.Wait(timeout)
	if err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
	return code
}

// TestEndToEnd runs a dispatcher and two supervisors as separate OS
// processes over tcp on 127.0.0.1, crawls the fixture web and checks the
// results against the known truth and the request log against politeness.
func TestEndToEnd(t *testing.T) {
	proctest.Short(t, "end-to-end crawl")
	const crawlDelay = 1 // seconds, in every fixture host's robots.txt
	web, err := testweb.Start(testweb.Options{CrawlDelay: crawlDelay})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()

	dir := t.TempDir()
	recordsPath, truth := writeSample(t, dir)
	stateDir := filepath.Join(dir, "state")
	storePath := filepath.Join(stateDir, "results.db")

	disp, endpoint := startDispatcher(t,
		"--records", recordsPath, "--state-dir", stateDir, "--listen", "tcp://127.0.0.1:*",
		"--lease", "30s")
	deadline := time.Now().Add(time.Minute)

	supArgs := []string{"supervisor", "--dispatcher", endpoint, "--store", storePath,
		"--allow-loopback", "--delay", "2s", "--workers", "4", "--contact", "https://backfill.invalid/e2e"}
	for host, addr := range web.Resolve() {
		supArgs = append(supArgs, "--resolve", host+":"+addr)
	}
	sups := []*process{
		start(t, "supervisor-1", append(supArgs, "--name", "sup-1")...),
		start(t, "supervisor-2", append(supArgs, "--name", "sup-2")...),
	}

	// While it crawls, `backfill status` shows both supervisors.
	var members []string
	for time.Now().Before(deadline) && len(members) != 2 {
		st := start(t, "status", "status", "--state-dir", stateDir, "--json")
		if st.waitExit(30*time.Second) != 0 {
			continue // the dispatcher has not written its first status yet
		}
		var s struct{ Members []struct{ Name string } }
		if err := json.Unmarshal(st.stdout.Bytes(), &s); err != nil {
			t.Fatalf("status --json: %v\n%s", err, st.stdout.String())
		}
		members = members[:0]
		for _, m := range s.Members {
			members = append(members, m.Name)
		}
	}
	if strings.Join(members, ",") != "sup-1,sup-2" {
		t.Errorf("status members = %v, want sup-1 and sup-2", members)
	}

	if code := disp.waitExit(3 * time.Minute); code != 0 {
		t.Fatalf("dispatcher exit code %d\n%s", code, disp.stderr)
	}
	st := start(t, "status", "status", "--state-dir", stateDir)
	if code := st.waitExit(30 * time.Second); code != 0 {
		t.Fatalf("status exit code %d", code)
	}
	for _, want := range []string{" finished", "records    15: ", "sup-1", "sup-2", "0 queued, 0 in flight"} {
		if !strings.Contains(st.stdout.String(), want) {
			t.Errorf("status after the crawl lacks %q:\n%s", want, st.stdout.String())
		}
	}
	for _, s := range sups {
		s.cmd.Process.Signal(syscall.SIGTERM)
		if code := s.waitExit(30 * time.Second); code != 0 {
			t.Errorf("%s exit code %d after SIGTERM, want 0", s.name, code)
		}
	}
	summary := disp.stdout.String()
	t.Logf("dispatcher summary:%s", summary)

	// Every record's filled fields equal the known truth.
	exp := start(t, "export", "export", "--state-dir", stateDir, "--format", "jsonl", "--provenance")
	if code := exp.waitExit(time.Minute); code != 0 {
		t.Fatalf("export exit code %d", code)
	}
	got := foundValues(t, &exp.stdout)
	if len(got) != len(truth) {
		t.Errorf("export has %d records, truth has %d", len(got), len(truth))
	}
	var unfilled []string
	for id, fields := range truth {
		anyFilled := false
		for f, want := range fields {
			if g := got[id][f]; g != want {
				t.Errorf("record %s field %s = %q, want %q", id, f, g, want)
			}
			if want != "" {
				anyFilled = true
			}
		}
		if !anyFilled && len(fields) > 0 {
			unfilled = append(unfilled, id)
		}
		for f := range got[id] {
			if _, known := fields[f]; !known {
				t.Errorf("record %s: field %s filled with %q but it is not a target", id, f, got[id][f])
			}
		}
	}
	// Records with nothing findable are reported as such.
	sort.Strings(unfilled)
	if len(unfilled) == 0 {
		t.Errorf("the fixture has no record that must stay unfilled")
	}
	for _, id := range unfilled {
		if !regexp.MustCompile(`(?m)^  [a-z-]+ +\d+: .*\b` + regexp.QuoteMeta(id) + `\b`).MatchString(summary) {
			t.Errorf("unfilled record %s not reported in the summary's reasons", id)
		}
	}

	checkPoliteness(t, web.Log(), crawlDelay*time.Second)
}

// checkPoliteness asserts what site operators care about: robots.txt
// obeyed, the Crawl-delay kept between requests to one host, no page
// fetched twice, and an identifying User-Agent on every request.
func checkPoliteness(t testing.TB, log []testweb.Request, delay time.Duration) {
	t.Helper()
	if len(log) == 0 {
		t.Fatal("the fixture web received no request")
	}
	seen := map[string]int{}
	last := map[string]time.Time{}
	for _, r := range log {
		key := r.Host + r.Path
		seen[key]++
		if seen[key] == 2 {
			t.Errorf("%s requested more than once", key)
		}
		if strings.HasPrefix(r.Path, "/private/") {
			t.Errorf("robots.txt-disallowed %s%s was requested", r.Host, r.Path)
		}
		if !strings.Contains(r.UserAgent, "backfill/") || !strings.Contains(r.UserAgent, "+https://") {
			t.Errorf("request %s%s has User-Agent %q, want an identifying one with a contact URL", r.Host, r.Path, r.UserAgent)
		}
		if prev, ok := last[r.Host]; ok {
			if gap := r.Time.Sub(prev); gap < delay {
				t.Errorf("%s: %s between requests, Crawl-delay is %s", r.Host, gap, delay)
			}
		}
		last[r.Host] = r.Time
	}
	t.Logf("%d requests to %d hosts, all polite", len(log), len(last))
}

// TestBadInputExits checks that what cannot go on says so clearly and exits
// non-zero.
func TestBadInputExits(t *testing.T) {
	dir := t.TempDir()
	badMapping := filepath.Join(dir, "maps")
	if err := os.MkdirAll(badMapping, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(badMapping, "broken.json"), []byte(`{"name": "broken", "url_patterns": [{"type": "regex", "pattern": "("}], "fields": []}`), 0o644)
	records := filepath.Join(dir, "r.csv")
	os.WriteFile(records, []byte("id,name,homepage\n1,A,http://a.example/\n"), 0o644)

	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, exitUsage, "usage"},
		{"unknown command", []string{"fly"}, exitUsage, `unknown command "fly"`},
		{"missing records flag", []string{"run"}, exitUsage, "--records is required"},
		{"missing records file", []string{"run", "--records", filepath.Join(dir, "nope.csv")}, exitFail, "nope.csv"},
		{"missing mappings dir", []string{"run", "--records", records, "--mappings", filepath.Join(dir, "nomaps")}, exitFail, "nomaps"},
		{"invalid mapping", []string{"run", "--records", records, "--mappings", badMapping, "--state-dir", filepath.Join(dir, "s")}, exitFail, "broken.json"},
		{"bad flag", []string{"run", "--depth", "deep"}, exitUsage, "invalid value"},
		{"bad export format", []string{"export", "--format", "xml"}, exitUsage, "jsonl or csv"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := mainExit(c.args, &stdout, &stderr)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, c.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.want) {
				t.Errorf("stderr %q does not mention %q", stderr.String(), c.want)
			}
		})
	}
}

// TestSupervisorWaitsForDispatcher checks that a supervisor started before
// its dispatcher retries with back-off and says so, then stops cleanly.
func TestSupervisorWaitsForDispatcher(t *testing.T) {
	proctest.Short(t, "starts a process")
	dir := t.TempDir()
	sup := start(t, "supervisor", "supervisor", "--dispatcher", "tcp://127.0.0.1:1", "--state-dir", dir)
	if _, ok := sup.stderr.wait(regexp.MustCompile(`(?i)dispatcher not answering`), time.Now().Add(30*time.Second)); !ok {
		t.Fatalf("supervisor did not report the missing dispatcher:\n%s", sup.stderr)
	}
	sup.cmd.Process.Signal(syscall.SIGTERM)
	if code := sup.waitExit(20 * time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}

// foundValues reads an export with provenance (JSON Lines) and returns,
// per record, the fields backfill filled in.
func foundValues(t testing.TB, export io.Reader) map[string]map[string]string {
	t.Helper()
	got := map[string]map[string]string{}
	sc := bufio.NewScanner(export)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var rec struct {
			ID         string                     `json:"id"`
			Fields     map[string]any             `json:"fields"`
			Provenance map[string]json.RawMessage `json:"provenance"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("export line %q: %v", sc.Text(), err)
		}
		got[rec.ID] = map[string]string{}
		for f := range rec.Provenance {
			if v, ok := rec.Fields[f].(string); ok {
				got[rec.ID][f] = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read export: %v", err)
	}
	return got
}
