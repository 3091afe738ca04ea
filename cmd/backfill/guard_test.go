package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backfill/dispatcher"
	"backfill/fetch"
)

// TestRunNamesTheGuardFlag: a crawl of pages on this machine without
// --allow-loopback is refused by the address guard, and the summary says
// which flag lifts it instead of a bare blocked-address count.
func TestRunNamesTheGuardFlag(t *testing.T) {
	web := startWeb(t, 0)
	dir := t.TempDir()
	records, _ := writeSample(t, dir)
	sumPath := filepath.Join(dir, "summary.json")
	args := []string{"run", "--records", records, "--state-dir", filepath.Join(dir, "state"), "--summary", sumPath,
		"--delay", "0", "--workers", "2", "--contact", "https://backfill.invalid/guard-test"}
	for host, addr := range web.Resolve() {
		args = append(args, "--resolve", host+":"+addr)
	}
	var stdout, stderr bytes.Buffer
	if code := mainExit(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(sumPath)
	if err != nil {
		t.Fatal(err)
	}
	var s dispatcher.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	blocked := s.Errors[string(fetch.ClassBlocked)]
	if blocked == 0 || s.BlockedBy[fetch.RefusedLoopback] != blocked {
		t.Errorf("summary: blocked-address %d, blocked_by %v; want every refusal counted as loopback", blocked, s.BlockedBy)
	}
	if out := stdout.String(); !strings.Contains(out, "loopback (pass --allow-loopback") {
		t.Errorf("the summary does not name --allow-loopback:\n%s", out)
	}
}

// TestSurveyPortsLoopbackHint: loopback targets are excluded by default,
// and the survey says which flag takes them in, in its summary and in a
// dry run.
func TestSurveyPortsLoopbackHint(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"run", []string{"--state-dir", t.TempDir(), "--timeout", "100ms"}},
		{"dry run", []string{"--dry-run"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"survey", "ports", "--targets", "127.0.0.1", "--ports", "9"}, c.args...)
			if code := mainExit(args, &stdout, &stderr); code != exitOK {
				t.Fatalf("exit %d:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), "pass --allow-loopback to probe them") {
				t.Errorf("no hint naming --allow-loopback:\n%s", stderr.String())
			}
		})
	}
}

// TestSurveyPortsDryRunOut: a dry run writes its targets to --out, and
// first says how many there are.
func TestSurveyPortsDryRunOut(t *testing.T) {
	out := filepath.Join(t.TempDir(), "targets.txt")
	var stdout, stderr bytes.Buffer
	args := []string{"survey", "ports", "--targets", "192.0.2.0/30,203.0.113.0/28", "--no-default-blocklist",
		"--blocklist", filepath.Join("testdata", "survey-blocklist.txt"), "--ports", "1-110", "--dry-run", "--out", out}
	if code := mainExit(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	if first, _, _ := strings.Cut(stdout.String(), "\n"); first != "20 addresses × 110 ports = 2,200 targets" {
		t.Errorf("first line %q, want the count; stdout:\n%s", first, stdout.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2200 || lines[0] != "192.0.2.0:1" || lines[2199] != "203.0.113.15:110" {
		t.Errorf("--out holds %d lines (%q … %q), want 2200 from 192.0.2.0:1 to 203.0.113.15:110", len(lines), lines[0], lines[len(lines)-1])
	}
	if strings.Contains(stdout.String(), ":110\n") {
		t.Errorf("targets written to standard output too:\n%.300s", stdout.String())
	}
}
