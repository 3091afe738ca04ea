package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"backfill/dispatcher"
	"backfill/testweb"
)

// TestPeopleWebEndToEnd crawls the people web (testweb.StartPeople) with
// `backfill run` to depth 2, a real dispatcher and supervisor over ZeroMQ
// and SQLite state and store, in two runs on one state directory: in the
// first one host is down (its connections refused), in the second it is
// back. Each run ends with exactly the values testweb.PeopleTruth computes
// for it: every findable record filled, none with a value it should not
// have; the rerun retries the failed pages, and only those, and says so;
// and no host is asked twice within its Crawl-delay, across both runs.
//
// Each leg is one row: a leg with JavaScript rendering is a row with the
// render flags and render set.
func TestPeopleWebEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end crawl")
	}
	const crawlDelay = 50 * time.Millisecond
	for _, leg := range []struct {
		name   string
		flags  []string
		render bool // JavaScript profiles are filled too
	}{
		{"static", nil, false},
	} {
		t.Run(leg.name, func(t *testing.T) {
			web, err := testweb.StartPeople(testweb.PeopleOptions{Hosts: 100, Pages: 4, Records: 300, CrawlDelay: crawlDelay})
			if err != nil {
				t.Fatal(err)
			}
			defer web.Close()
			dir := t.TempDir()
			records := filepath.Join(dir, "records.csv")
			maps := filepath.Join(dir, "mappings")
			if err := os.WriteFile(records, testweb.PeopleRecords(web), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(maps, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, b := range testweb.PeopleMappings() {
				if err := os.WriteFile(filepath.Join(maps, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			full := testweb.PeopleCrawl{Depth: 2, Render: leg.render}
			want := testweb.PeopleTruth(web, full)
			// The host to take down: the first whose absence loses values.
			var down string
			var wantDown map[string]map[string]string
			for _, h := range web.Hosts() {
				c := full
				c.Down = []string{h}
				if td := testweb.PeopleTruth(web, c); filledCount(td) < filledCount(want) {
					down, wantDown = h, td
					break
				}
			}
			if down == "" {
				t.Fatal("no host of the people web holds a findable value")
			}
			if err := web.SetDown(down, true); err != nil {
				t.Fatal(err)
			}
			stateDir := filepath.Join(dir, "state")
			run := func(name string) *dispatcher.Summary {
				t.Helper()
				summaryPath := filepath.Join(dir, name+".json")
				args := []string{"run", "--records", records, "--mappings", maps, "--state-dir", stateDir,
					"--depth", "2", "--summary", summaryPath, "--allow-loopback", "--delay", "1s", "--workers", "16",
					"--contact", "https://backfill.invalid/people-e2e"}
				for host, addr := range web.Resolve() {
					args = append(args, "--resolve", host+":"+addr)
				}
				args = append(args, leg.flags...)
				var stdout, stderr bytes.Buffer
				start := time.Now()
				if code := mainExit(args, &stdout, &stderr); code != exitOK {
					t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", name, code, stdout.String(), stderr.String())
				}
				t.Logf("%s took %v; summary:%s", name, time.Since(start).Round(time.Millisecond), stdout.String())
				var sum dispatcher.Summary
				if b, err := os.ReadFile(summaryPath); err != nil {
					t.Fatal(err)
				} else if err := json.Unmarshal(b, &sum); err != nil {
					t.Fatalf("summary file: %v", err)
				}
				return &sum
			}

			// Run 1: the host is down.
			first := run("run-1")
			if first.Errors["connect"] == 0 {
				t.Errorf("run 1 with %s down: errors %v, want connect failures", down, first.Errors)
			}
			checkTruth(t, "run 1 ("+down+" down)", exportJS(t, stateDir), wantDown)

			// Run 2: the host is back; its failed pages are retried.
			if err := web.SetDown(down, false); err != nil {
				t.Fatal(err)
			}
			before := len(web.Log())
			second := run("run-2")
			if second.Retried["connect"] != first.Errors["connect"] {
				t.Errorf("run 2 retried %v, want the %d connect failures of run 1", second.Retried, first.Errors["connect"])
			}
			checkTruth(t, "run 2", exportJS(t, stateDir), want)
			for _, r := range web.Log()[before:] {
				if r.Host == down {
					continue
				}
				// Elsewhere only what the retried pages led to: pages new
				// to the crawl (nothing is asked twice: checkPoliteness),
				// a soft-404 probe, and no robots.txt (the store has it).
				if r.Path == "/robots.txt" {
					t.Errorf("run 2 asked %s for robots.txt again", r.Host)
				}
			}
			checkPoliteness(t, web.Log(), crawlDelay)
		})
	}
}

func filledCount(truth map[string]map[string]string) int {
	n := 0
	for _, fields := range truth {
		for _, v := range fields {
			if v != "" {
				n++
			}
		}
	}
	return n
}

// checkTruth compares an export with the truth: every target field, and
// nothing filled that is not a target.
func checkTruth(t *testing.T, what string, got, truth map[string]map[string]string) {
	t.Helper()
	if len(got) != len(truth) {
		t.Errorf("%s: export has %d records, truth %d", what, len(got), len(truth))
	}
	missed, wrong := 0, 0
	for id, fields := range truth {
		for f, want := range fields {
			if g := got[id][f]; g != want {
				if g == "" {
					missed++
				} else {
					wrong++
				}
				t.Errorf("%s: record %s field %s = %q, want %q", what, id, f, g, want)
			}
		}
		for f, v := range got[id] {
			if _, ok := fields[f]; !ok {
				t.Errorf("%s: record %s field %s filled with %q but it is not a target", what, id, f, v)
			}
		}
	}
	t.Logf("%s: %d values to find, %d missed, %d wrong", what, filledCount(truth), missed, wrong)
}
