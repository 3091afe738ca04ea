package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"backfill/testweb"
)

// TestRunDryRun: run --dry-run takes the records in and says how long the
// crawl will take at least, naming the busiest host, without a request to
// any host; run again on the same state (the records known now, their
// links not crawled) it says the same.
func TestRunDryRun(t *testing.T) {
	web, err := testweb.Start(testweb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { web.Close() })
	dir := t.TempDir()
	records, _ := writeSample(t, dir)
	args := []string{"run", "--dry-run", "--records", records, "--state-dir", filepath.Join(dir, "state"),
		"--delay", "15s", "--allow-loopback", "--log-level", "warn"}
	for hp, addr := range web.Resolve() {
		args = append(args, "--resolve", hp+":"+addr)
	}
	bound := regexp.MustCompile(`(?m)^the crawl takes at least (\S+) \(≥ \S+: host (\S+), (\d+) requests one every 15\.0s\)$`)
	var first []string
	for i, wantNew := range []string{"new", "0 new"} {
		var stdout, stderr bytes.Buffer
		if code := mainExit(args, &stdout, &stderr); code != exitOK {
			t.Fatalf("dry run %d: exit %d\n%s\n%s", i+1, code, stdout.String(), stderr.String())
		}
		out := stdout.String()
		m := bound.FindStringSubmatch(out)
		if m == nil || !strings.Contains(out, wantNew) || !strings.Contains(out, "  the busiest host, "+m[2]+": ") ||
			!strings.Contains(out, "nothing was fetched") {
			t.Fatalf("dry run %d says:\n%s", i+1, out)
		}
		if i == 0 {
			first = m
		} else if m[0] != first[0] {
			t.Errorf("dry run again on the state: %q, first %q", m[0], first[0])
		}
	}
	if log := web.Log(); len(log) != 0 {
		t.Errorf("a dry run asked hosts %d times, first %s%s", len(log), log[0].Host, log[0].Path)
	}
}
