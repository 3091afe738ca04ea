package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"backfill/dispatcher"
	"backfill/proctest"
)

// TestOutcomes crawls the sample, whose unfilled records each stay so for
// a known reason, and checks that every outcome is explained: the summary
// counts the incomplete records by reason with their ids, export
// --provenance says why for each (the page and key of a refused page),
// --log-level debug logs each record's decisions, Refused counts the
// match-key refusals, and the --summary JSON has snake_case keys.
func TestOutcomes(t *testing.T) {
	proctest.Short(t, "crawls the fixture web")
	web := startWeb(t, 0)
	dir := t.TempDir()
	records, _ := writeSample(t, dir)
	stateDir := filepath.Join(dir, "state")
	sumPath := filepath.Join(dir, "summary.json")
	args := append([]string{"run", "--records", records, "--state-dir", stateDir, "--delay", "0",
		"--workers", "4", "--log-level", "debug", "--summary", sumPath}, crawlArgs(web, "outcomes")...)
	var stdout, stderr bytes.Buffer
	if code := mainExit(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("run exit %d:\n%s", code, stderr.String())
	}

	// Why each unfilled record of the sample stays unfilled (see
	// testweb.Sample), and r4, whose email a decoy offered.
	want := map[string]string{
		"r4":  dispatcher.ReasonRefused,   // his profile links to Carol's: a decoy's email
		"r9":  dispatcher.ReasonFailed,    // a 404
		"r10": dispatcher.ReasonNoMapping, // a page no mapping matches; its link is disallowed
		"r11": dispatcher.ReasonRobots,    // its only link is disallowed
		"r12": dispatcher.ReasonRefused,   // her blog links to two decoys
		"r13": dispatcher.ReasonNoLinks,
	}

	b, err := os.ReadFile(sumPath)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for k := range raw {
		if !regexp.MustCompile(`^[a-z][a-z0-9_]*$`).MatchString(k) {
			t.Errorf("--summary key %q is not snake_case", k)
		}
	}
	for _, k := range []string{"elapsed_seconds", "incomplete_by_reason", "refused", "refused_by", "restarts"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("--summary lacks %q:\n%s", k, b)
		}
	}
	var sum dispatcher.Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.ElapsedSeconds <= 0 || !sum.Finished {
		t.Errorf("summary: elapsed_seconds %v, finished %v", sum.ElapsedSeconds, sum.Finished)
	}
	got := map[string]string{}
	for reason, c := range sum.Reasons {
		for _, id := range c.IDs {
			got[id] = reason
		}
	}
	for id, reason := range want {
		if got[id] != reason {
			t.Errorf("summary: record %s incomplete for %q, want %q", id, got[id], reason)
		}
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(reason) + ` +\d+: .*\b` + id + `\b`).MatchString(stdout.String()) {
			t.Errorf("printed summary does not list %s under %s:\n%s", id, reason, stdout.String())
		}
	}
	if len(got) != len(want) {
		t.Errorf("incomplete records %v, want %v", got, want)
	}
	if sum.RefusedBy["match-key"] < 3 || sum.Refused < sum.RefusedBy["match-key"] {
		t.Errorf("refused %d by %v: want the match-key refusals (r4's one, r12's two) counted", sum.Refused, sum.RefusedBy)
	}

	// The debug log: a record's pages accepted, refused, failed.
	for _, re := range []string{
		`"msg":"record: page refused, a match key disagrees","record":"r12","page":"http://people.example/p/alice".*"key":"name"`,
		`"msg":"record: page accepted","record":"r1",.*"filled":\["email","location"\]`,
		`"msg":"record: page failed","record":"r9","page":"http://quiet.example/gone".*"class":"bad-status"`,
		`"msg":"record: page failed","record":"r11",.*"class":"robots"`,
	} {
		if !regexp.MustCompile(re).MatchString(stderr.String()) {
			t.Errorf("debug log lacks %s", re)
		}
	}

	// The export says why, for each incomplete record.
	stdout.Reset()
	if code := mainExit([]string{"export", "--state-dir", stateDir, "--provenance"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("export exit %d: %s", code, stderr.String())
	}
	sc := bufio.NewScanner(&stdout)
	seen := 0
	for sc.Scan() {
		var line struct {
			ID      string `json:"id"`
			Outcome *struct {
				Reason string `json:"reason"`
				Detail string `json:"detail"`
				Page   string `json:"refused_page"`
				Key    string `json:"refused_key"`
				Failed map[string]int
			} `json:"outcome"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		reason, incomplete := want[line.ID]
		switch {
		case !incomplete && line.Outcome != nil:
			t.Errorf("complete record %s has an outcome %+v", line.ID, line.Outcome)
		case incomplete && line.Outcome == nil:
			t.Errorf("record %s has no outcome in the export", line.ID)
		case incomplete:
			seen++
			if line.Outcome.Reason != reason || line.Outcome.Detail == "" {
				t.Errorf("record %s: outcome %+v, want %s with a detail", line.ID, line.Outcome, reason)
			}
			if reason == dispatcher.ReasonRefused && (line.Outcome.Key != "name" || !strings.HasPrefix(line.Outcome.Page, "http://")) {
				t.Errorf("record %s: refusal without page and key: %+v", line.ID, line.Outcome)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d outcomes exported, want %d", seen, len(want))
	}
}
