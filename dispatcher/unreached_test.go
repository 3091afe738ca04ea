package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestStoppedRunLeavesUnreachedRecordsWithoutOutcome stops a run whose
// window took in only part of its records (nothing is fetched: no
// supervisor joins). Every incomplete record is counted by reason, the
// reached ones in the store with their outcome, and the records the crawl
// never reached get none: writing one for each made an interrupt after a
// large intake take minutes.
func TestStoppedRunLeavesUnreachedRecordsWithoutOutcome(t *testing.T) {
	const linked = windowCap + 2*seedChunk // more than one window seeds
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Progress = func(p Progress) {
			if p.Queued > 0 {
				cancel()
			}
		}
	})
	lines := []string{"id,name,email,link", "a1,Ann Lee,,", "a2,Bo Kim,,"} // no links, reached first
	for i := range linked {
		lines = append(lines, fmt.Sprintf("r%d,Person %d,,http://h%d.example/p", i, i, i))
	}
	lines = append(lines, "z1,Zed One,,", "z2,Zed Two,,") // no links, after the window
	e.load("r.csv", csvOf(lines...))
	e.run(ctx)
	<-e.done
	if e.err != nil && !errors.Is(e.err, context.Canceled) {
		t.Fatalf("Run: %v", e.err)
	}
	if e.sum == nil {
		t.Fatal("a stopped Run gave no summary")
	}
	e.d.mu.Lock()
	seeded, total := e.d.seeded, e.d.recSeq
	e.d.mu.Unlock()
	if seeded == 0 || seeded >= total {
		t.Fatalf("seeded %d of %d records: the test needs a run stopped part way through its records", seeded, total)
	}

	firstLinked := make([]string, ReasonIDs)
	for i := range firstLinked {
		firstLinked[i] = fmt.Sprintf("r%d", i)
	}
	for _, tc := range []struct {
		reason  string
		records int
		ids     []string
	}{
		{ReasonNotFetched, linked, firstLinked},
		{ReasonNoLinks, 4, []string{"a1", "a2", "z1", "z2"}},
	} {
		got := e.sum.Reasons[tc.reason]
		if got.Records != tc.records || !slices.Equal(got.IDs, tc.ids) {
			t.Errorf("summary %s: %d records %v, want %d %v", tc.reason, got.Records, got.IDs, tc.records, tc.ids)
		}
	}

	recs := e.records()
	if len(recs) != int(total) {
		t.Fatalf("store holds %d records, want %d", len(recs), total)
	}
	withOutcome := 0
	for id, r := range recs {
		reached := r.Seq <= seeded
		switch {
		case reached && r.Outcome == nil:
			t.Errorf("%s (seq %d, reached): no outcome", id, r.Seq)
		case !reached && r.Outcome != nil:
			t.Errorf("%s (seq %d, not reached): outcome %+v", id, r.Seq, *r.Outcome)
		case reached:
			withOutcome++
			want := ReasonNotFetched
			if strings.HasPrefix(id, "a") {
				want = ReasonNoLinks
			}
			if r.Outcome.Reason != want {
				t.Errorf("%s: outcome %q, want %q", id, r.Outcome.Reason, want)
			}
		}
	}
	if withOutcome != int(seeded) {
		t.Errorf("%d records with an outcome, want the %d reached", withOutcome, seeded)
	}
}
