package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"backfill/dispatcher"
	"backfill/proctest"
	"backfill/testweb"
)

// TestInterruptAndResume stops a run with Ctrl-C (SIGINT) part way: it
// says so and how to resume, exits 130, and logs no error; the same
// command then finishes the crawl, and its summary and the status cover
// the whole crawl, the restart counted.
func TestInterruptAndResume(t *testing.T) {
	proctest.Short(t, "end-to-end crawl")
	web := startWeb(t, testweb.DefaultCrawlDelay)
	dir := t.TempDir()
	records, truth := writeSample(t, dir)
	stateDir := filepath.Join(dir, "state")
	sumPath := filepath.Join(dir, "summary.json")
	args := append([]string{"run", "--records", records, "--state-dir", stateDir, "--workers", "4",
		"--log-level", "debug", "--summary", sumPath}, crawlArgs(web, "interrupt")...)

	first := start(t, "first run", args...)
	if _, ok := first.stderr.wait(regexp.MustCompile(`record: page accepted`), time.Now().Add(time.Minute)); !ok {
		t.Fatalf("the run applied no page:\n%s", first.stderr)
	}
	first.cmd.Process.Signal(syscall.SIGINT)
	if code := first.waitExit(time.Minute); code != exitInterrupted {
		t.Fatalf("exit %d after SIGINT, want %d", code, exitInterrupted)
	}
	log := first.stderr.String()
	if !strings.HasSuffix(log, interruptedMsg) {
		t.Errorf("stderr does not end with %q:\n%s", interruptedMsg, log)
	}
	if strings.Contains(log, "context canceled") || strings.Contains(log, `"level":"ERROR"`) {
		t.Errorf("an interrupted run logs errors:\n%s", log)
	}
	if !strings.Contains(first.stdout.String(), "the crawl stopped before it finished") {
		t.Errorf("the summary reads as if the crawl had ended:\n%s", first.stdout.String())
	}
	before := readSummary(t, sumPath)
	if before.Finished || before.Pages == 0 || before.Restarts != 0 {
		t.Fatalf("first summary: finished %v, %d pages, %d restarts", before.Finished, before.Pages, before.Restarts)
	}

	second := start(t, "second run", args...)
	if code := second.waitExit(2 * time.Minute); code != exitOK {
		t.Fatalf("resumed run: exit %d", code)
	}
	if log := second.stderr.String(); strings.Contains(log, `"level":"ERROR"`) {
		t.Errorf("a successful run logs errors:\n%s", log)
	}
	after := readSummary(t, sumPath)
	if !after.Finished || after.Restarts != 1 || after.Pages < before.Pages || after.ElapsedSeconds < before.ElapsedSeconds {
		t.Errorf("resumed summary: finished %v, %d restarts, %d pages (first %d), %.1fs (first %.1fs): want the whole crawl",
			after.Finished, after.Restarts, after.Pages, before.Pages, after.ElapsedSeconds, before.ElapsedSeconds)
	}
	complete := 0
	for _, f := range truth {
		filled := true
		for _, v := range f {
			filled = filled && v != ""
		}
		if filled {
			complete++
		}
	}
	if after.Records != len(truth) || after.Complete != complete {
		t.Errorf("resumed summary: %d records, %d complete; want %d and %d", after.Records, after.Complete, len(truth), complete)
	}
	if !strings.Contains(second.stdout.String(), "(the whole crawl: 1 dispatcher restart(s))") {
		t.Errorf("the printed summary does not count the restart:\n%s", second.stdout.String())
	}
	st, err := dispatcher.ReadStatus(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Restarts != 1 || st.Pages != after.Pages || st.State != dispatcher.StateFinished {
		t.Errorf("status: %d restarts, %d pages, %s; want 1, %d, finished", st.Restarts, st.Pages, st.State, after.Pages)
	}
}

func readSummary(t *testing.T, path string) dispatcher.Summary {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s dispatcher.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}
