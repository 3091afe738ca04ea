package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"backfill/dispatcher"
	"backfill/proctest"
	"backfill/testweb"
)

// TestRunStream crawls the fixture web with run --stream and holds the
// stream to the export: every record once, each line the export's line
// for it, the records complete first.
func TestRunStream(t *testing.T) {
	proctest.Short(t, "crawl")
	web, err := testweb.Start(testweb.Options{}) // no Crawl-delay: a quick crawl
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := t.TempDir()
	records, _ := writeSample(t, dir)
	state := filepath.Join(dir, "state")
	streamPath := filepath.Join(dir, "stream.jsonl")
	args := []string{"run", "--records", records, "--state-dir", state, "--allow-loopback", "--delay", "0",
		"--stream", streamPath, "--summary", filepath.Join(dir, "summary.json")}
	for host, addr := range web.Resolve() {
		args = append(args, "--resolve", host+":"+addr)
	}
	var stdout, stderr strings.Builder
	if code := mainExit(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("run exit %d\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(streamPath)
	if err != nil {
		t.Fatal(err)
	}
	var sum dispatcher.Summary
	if sb, err := os.ReadFile(filepath.Join(dir, "summary.json")); err != nil || json.Unmarshal(sb, &sum) != nil {
		t.Fatalf("summary: %v", err)
	}
	checkStream(t, state, string(b), sum.Complete-sum.Skipped)
}

// checkStream holds stream, JSON Lines written as records settled, to the
// export of the crawl in state: the same lines, each record once, and
// (when complete > 0) the first complete lines those of records complete
// during the crawl, which the stream writes as they complete.
func checkStream(t *testing.T, state, stream string, complete int) {
	t.Helper()
	var exp strings.Builder
	if code := mainExit([]string{"export", "--wrap", "--state-dir", state}, &exp, io.Discard); code != exitOK {
		t.Fatalf("export exit %d", code)
	}
	lines := func(s string) []string {
		var l []string
		sc := bufio.NewScanner(strings.NewReader(s))
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			l = append(l, sc.Text())
		}
		return l
	}
	got, want := lines(stream), lines(exp.String())
	ids := map[string]int{}
	for _, l := range got {
		var rec struct{ ID string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("stream line %q: %v", l, err)
		}
		ids[rec.ID]++
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("record %s streamed %d times", id, n)
		}
	}
	sortedGot, sortedWant := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(sortedGot, sortedWant) {
		t.Errorf("stream differs from the export:\nstream:\n%s\nexport:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if complete == 0 {
		t.Fatal("no record completed during the crawl")
	}
	// Complete records have no null field the mappings fill; a record given
	// up on does. The first complete lines are complete records.
	for i, l := range got[:min(complete, len(got))] {
		if strings.Contains(l, `"email":null`) || strings.Contains(l, `"location":null`) {
			t.Errorf("stream line %d, among the first %d (complete), lacks a value: %s", i+1, complete, l)
		}
	}
}
