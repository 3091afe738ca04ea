package main

import (
	"bytes"
	"strings"
	"testing"

	bfcluster "backfill/cluster"
	"backfill/dispatcher"
)

func TestPrintSummaryDuplicates(t *testing.T) {
	tests := []struct {
		dups int64
		want bool
	}{{0, false}, {7, true}}
	for _, tc := range tests {
		var b bytes.Buffer
		printSummary(&b, &dispatcher.Summary{Duplicates: tc.dups})
		line := "links not followed): 7\n"
		if got := strings.Contains(b.String(), "duplicate pages"); got != tc.want || tc.want && !strings.Contains(b.String(), line) {
			t.Errorf("duplicates %d: summary\n%s", tc.dups, b.String())
		}
	}
}

// TestPrintSummaryLines: a line of the summary is printed when, and only
// when, its counter has something to say.
func TestPrintSummaryLines(t *testing.T) {
	tests := []struct {
		sum  dispatcher.Summary
		want string // "" for none of the lines below
	}{
		{dispatcher.Summary{}, ""},
		{dispatcher.Summary{Disagreeing: 4}, "pages about someone else (values refused, links followed): 4\n"},
		{dispatcher.Summary{Retried: map[string]int64{"connect": 6, "bad-status": 2}}, "failed pages of earlier runs fetched again: bad-status=2 connect=6\n"},
		{dispatcher.Summary{RetryKept: 3, RetryExhausted: 1}, "not fetched again: 3 permanent (404, 410, robots.txt rules…)  1 failed --retry-attempts times; --retry-failed"},
		{dispatcher.Summary{Rechecks: dispatcher.RecheckCounts{Fetched: 12, Agreed: 9, Disputed: 3, Contradicted: 2, Liars: 1, Purged: 40}},
			"re-checked answers: 12 pages fetched again by another member  9 agreed  3 disputed (0 unsettled)  0 failed  0 not made" +
				"  answers contradicted: 2  members quarantined for it: 1  their pages queued again: 40\n"},
		{dispatcher.Summary{Forged: 7, Quarantined: []bfcluster.Quarantined{{Key: "K", Member: "crawler-3", Address: "10.0.0.3",
			Why: "it answered a task leased to another member", Count: 7}}},
			"forged frames refused: 7  members quarantined: 1 (no tasks; frames refused until the dispatcher restarts with the key authorized)\n" +
				"  crawler-3  key K  from 10.0.0.3: it answered a task leased to another member (7 frames refused)\n"},
	}
	lines := []string{"pages about someone else", "fetched again:", "not fetched again:", "re-checked answers:", "members quarantined:"}
	for _, tc := range tests {
		var b bytes.Buffer
		printSummary(&b, &tc.sum)
		if tc.want != "" && !strings.Contains(b.String(), tc.want) {
			t.Errorf("%+v: summary lacks %q:\n%s", tc.sum, tc.want, b.String())
		}
		for _, l := range lines {
			if strings.Contains(b.String(), l) && (tc.want == "" || !strings.Contains(tc.want, l)) {
				t.Errorf("%+v: summary has %q:\n%s", tc.sum, l, b.String())
			}
		}
	}
}
