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
	learnPeopleWeb(t, testweb.PeopleOptions{Hosts: 100, Pages: 4, Records: 300})
}

// TestLearnStructuredPeopleWeb is issue 32's: on a people web whose
// profiles come in a definition list, a table, prose, JSON-LD and a
// script-JSON blob, the last two holding a location in pieces (city and
// country), learning from a fifth of the records at --depth 2 fills the
// other four fifths at precision ≥ 0.99 and recall ≥ 0.95, and every
// layout at ≥ 0.9 of both.
func TestLearnStructuredPeopleWeb(t *testing.T) {
	learnPeopleWeb(t, testweb.PeopleOptions{Hosts: 100, Pages: 4, Records: 300, Structured: true})
}

// peopleScore counts, for one layout, the values filled, of them right,
// and the values a correct crawl finds.
type peopleScore struct{ right, filled, want int }

func (s peopleScore) precision() float64 { return float64(s.right) / float64(max(s.filled, 1)) }
func (s peopleScore) recall() float64    { return float64(s.right) / float64(max(s.want, 1)) }

// learnPeopleWeb learns a people web from every fifth record, crawls the
// others with the learned mappings alone, and scores what they filled,
// in all and per layout.
func learnPeopleWeb(t *testing.T, opts testweb.PeopleOptions) {
	proctest.Short(t, "learns and crawls the people web")
	web, err := testweb.StartPeople(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := t.TempDir()
	teachersCSV, targetsCSV, targetIDs := splitPeopleRecords(t, web, dir)
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
	byLayout := map[string]peopleScore{}
	for id := range targetIDs {
		_, layout := testweb.PeopleProfileURL(web, id)
		s := byLayout[layout]
		for f, v := range truth[id] {
			g := got[id][f]
			if v != "" {
				s.want++
			}
			if g == "" {
				continue
			}
			s.filled++
			if g == v {
				s.right++
			} else {
				t.Logf("%s %s (%s): filled %q, the truth is %q", id, f, layout, g, v)
			}
		}
		byLayout[layout] = s
	}
	var all peopleScore
	for _, s := range byLayout {
		all.right, all.filled, all.want = all.right+s.right, all.filled+s.filled, all.want+s.want
	}
	t.Logf("learned mappings on %d records: %d values filled, %d right, %d findable: precision %.3f, recall %.3f", len(targetIDs), all.filled, all.right, all.want, all.precision(), all.recall())
	if all.want == 0 || all.precision() < 0.99 || all.recall() < 0.95 {
		t.Errorf("precision %.3f, recall %.3f; want ≥ 0.99 and ≥ 0.95", all.precision(), all.recall())
	}
	for _, l := range []string{testweb.LayoutList, testweb.LayoutTable, testweb.LayoutProse, testweb.LayoutJS, testweb.LayoutBlob, testweb.LayoutJSONLD} {
		s, ok := byLayout[l]
		if !ok {
			continue
		}
		t.Logf("  %-6s %3d filled, %3d right, %3d findable: precision %.3f, recall %.3f", l, s.filled, s.right, s.want, s.precision(), s.recall())
		if s.want > 0 && (s.precision() < 0.9 || s.recall() < 0.9) {
			t.Errorf("layout %s: precision %.3f, recall %.3f; want ≥ 0.9", l, s.precision(), s.recall())
		}
	}
}

// splitPeopleRecords writes the records of a people web in two files:
// every fifth record with the values a correct crawl finds (the
// teachers), and the others as they are (the targets), whose ids it
// returns.
func splitPeopleRecords(t *testing.T, web *testweb.Web, dir string) (teachersCSV, targetsCSV string, targetIDs map[string]bool) {
	t.Helper()
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
	targetIDs = map[string]bool{}
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
	teachersCSV, targetsCSV = filepath.Join(dir, "teachers.csv"), filepath.Join(dir, "targets.csv")
	if err := os.WriteFile(teachersCSV, teachers.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(targetsCSV, targets.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return teachersCSV, targetsCSV, targetIDs
}
