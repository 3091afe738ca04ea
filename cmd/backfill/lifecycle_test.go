package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/testweb"
)

// TestSupervisorLifecycle runs a dispatcher and two supervisors started
// with --exit-when-done as processes. One is stopped with SIGTERM part way
// through the crawl: it exits at once, cleanly, and its tasks go to the
// other, so nothing is lost; the other exits by itself when the
// dispatcher's run is finished.
func TestSupervisorLifecycle(t *testing.T) {
	proctest.Short(t, "end-to-end crawl")
	web := startWeb(t, testweb.DefaultCrawlDelay)
	dir := t.TempDir()
	records, truth := writeSample(t, dir)
	stateDir := filepath.Join(dir, "state")
	disp, endpoint := startDispatcher(t, "--records", records, "--state-dir", stateDir, "--listen", "tcp://127.0.0.1:*",
		"--lease", "3s", "--expect", "2", "--log-level", "debug")
	supArgs := append([]string{"supervisor", "--dispatcher", endpoint, "--store", filepath.Join(stateDir, "results.db"),
		"--workers", "2", "--exit-when-done"}, crawlArgs(web, "lifecycle")...)
	stopped := start(t, "sup-1", append(supArgs, "--name", "sup-1")...)
	other := start(t, "sup-2", append(supArgs, "--name", "sup-2")...)
	if _, ok := disp.stderr.wait(regexp.MustCompile(`"supervisor joined".*"members":2`), time.Now().Add(time.Minute)); !ok {
		t.Fatalf("the supervisors did not join:\n%s", disp.stderr)
	}
	if _, ok := stopped.stderr.wait(regexp.MustCompile(`"registered with dispatcher"`), time.Now().Add(time.Minute)); !ok {
		t.Fatalf("sup-1 did not register:\n%s", stopped.stderr)
	}
	// The stop comes part way: once the crawl has got somewhere.
	if _, ok := disp.stderr.wait(regexp.MustCompile(`"record: page accepted"`), time.Now().Add(time.Minute)); !ok {
		t.Fatalf("no page crawled:\n%s", disp.stderr)
	}
	stopped.cmd.Process.Signal(syscall.SIGTERM)
	// It stops within stopGrace-bounded steps; 4s leaves room for a loaded
	// machine while catching a stop that waits out a send or a back-off.
	if code := stopped.waitExit(4 * time.Second); code != exitOK {
		t.Errorf("sup-1 exit code %d after SIGTERM, want 0", code)
	}
	if code := disp.waitExit(3 * time.Minute); code != exitOK {
		t.Fatalf("dispatcher exit code %d", code)
	}
	if code := other.waitExit(30 * time.Second); code != exitOK {
		t.Errorf("sup-2 exit code %d when the run was finished", code)
	}
	if !strings.Contains(other.stderr.String(), "the dispatcher's run is finished; exiting") {
		t.Errorf("sup-2 did not say why it exits:\n%s", other.stderr)
	}
	for _, p := range []*process{disp, stopped, other} {
		if log := p.stderr.String(); strings.Contains(log, `"level":"ERROR"`) {
			t.Errorf("%s logged an error:\n%s", p.name, log)
		}
	}
	// Nothing was lost: every record ends as a full crawl leaves it.
	exportMatchesTruth(t, "after a supervisor was stopped", stateDir, truth)
}
