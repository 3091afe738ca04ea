package main

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backfill/proctest"
	"backfill/testweb"
)

// TestLearnPeopleWebAtDepth is the depth search's acceptance test: on
// the people web (five layouts on a hundred numbered hosts, a record's
// profile one or two links from its own link), a fifth of the records
// teach with their values known, `mappings learn --depth 2` finds their
// profiles and learns, and a crawl with the learned mappings alone fills
// the other four fifths at precision ≥ 0.99 and recall ≥ 0.95 of what a
// correct crawl finds (testweb.PeopleTruth; JavaScript profiles show
// nothing without a browser, to the crawl as to learning).
func TestLearnPeopleWebAtDepth(t *testing.T) {
	proctest.Short(t, "learns and crawls the people web")
	web, err := testweb.StartPeople(testweb.PeopleOptions{Hosts: 100, Pages: 4, Records: 300})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := t.TempDir()
	known := testweb.PeopleTruth(web, testweb.PeopleCrawl{Depth: 2, Render: true})
	rows, err := csv.NewReader(bytes.NewReader(testweb.PeopleRecords(web))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	var teachers, targets bytes.Buffer
	tw, gw := csv.NewWriter(&teachers), csv.NewWriter(&targets)
	tw.Write(rows[0])
	gw.Write(rows[0])
	targetIDs := map[string]bool{}
	for i, r := range rows[1:] {
		if i%5 != 0 {
			gw.Write(r)
			targetIDs[r[col["id"]]] = true
			continue
		}
		r = append([]string(nil), r...)
		for f, v := range known[r[col["id"]]] {
			if v != "" {
				r[col[f]] = v
			}
		}
		tw.Write(r)
	}
	tw.Flush()
	gw.Flush()
	teachersCSV, targetsCSV := filepath.Join(dir, "teachers.csv"), filepath.Join(dir, "targets.csv")
	if err := os.WriteFile(teachersCSV, teachers.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(targetsCSV, targets.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	learned := filepath.Join(dir, "learned")
	fields := strings.Join(testweb.PeopleFields, ",")
	report := runBackfill(t, append([]string{"mappings", "learn", "--records", teachersCSV, "--fields", fields,
		"--depth", "2", "-o", learned}, webFlags(web)...)...)
	t.Logf("learn:\n%s", report)
	checkPoliteness(t, web.Log(), 0)
	if !strings.Contains(report, "within 2 link(s)") {
		t.Errorf("the report does not say how deep teacher pages were looked for:\n%s", report)
	}

	empty := filepath.Join(dir, "no-mappings")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	runBackfill(t, append([]string{"run", "--records", targetsCSV, "--state-dir", state, "--depth", "2", "--fields", fields,
		"--mappings", empty, "--use-learned", learned}, webFlags(web)...)...)
	got := foundValues(t, strings.NewReader(runBackfill(t, "export", "--state-dir", state, "--format", "jsonl", "--provenance")))

	truth := testweb.PeopleTruth(web, testweb.PeopleCrawl{Depth: 2})
	var right, filled, want int
	for id := range targetIDs {
		for f, v := range truth[id] {
			g := got[id][f]
			if v != "" {
				want++
			}
			if g == "" {
				continue
			}
			filled++
			if g == v {
				right++
			} else {
				t.Logf("%s %s: filled %q, the truth is %q", id, f, g, v)
			}
		}
	}
	precision, recall := float64(right)/float64(max(filled, 1)), float64(right)/float64(max(want, 1))
	t.Logf("learned mappings on %d records: %d values filled, %d right, %d findable: precision %.3f, recall %.3f", len(targetIDs), filled, right, want, precision, recall)
	if want == 0 || precision < 0.99 || recall < 0.95 {
		t.Errorf("precision %.3f, recall %.3f; want ≥ 0.99 and ≥ 0.95", precision, recall)
	}
}
