package main

import (
	"bytes"
	"strings"
	"testing"

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
