package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"backfill/cluster"
	"backfill/wire"
)

// TestRoutingFollowsRing checks that the dispatcher sends every domain to
// one owner, no member more than its bounded share (balance.go), and that
// when a supervisor leaves only the domains it owned move.
func TestRoutingFollowsRing(t *testing.T) {
	const nDomains = 60
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Fields = []string{"phone"} // never found: records stay open, every task is answered
		c.Expect = 3                 // dispatch only once all three have joined
	})
	web := make(map[string]page)
	lines := []string{"id,links"}
	for i := range nDomains {
		u := fmt.Sprintf("https://d%d.example/x", i)
		web[u] = page{}
		lines = append(lines, fmt.Sprintf("r%d,%s", i, u))
	}
	e.load("r.csv", csvOf(lines...))
	digest := e.set.Digest()
	names := []string{"s1", "s2", "s3"}
	var sups []*testSup
	for _, n := range names {
		s := newSup(t, n, e.d.Endpoint(), nDomains, false, digest)
		// Queued before Run starts, so all three register at once.
		if err := s.Out.Send(wire.KindHello, s.Hello, time.Second); err != nil && !errors.Is(err, wire.ErrTimeout) {
			t.Fatal(err)
		}
		sups = append(sups, s)
	}
	e.run(context.Background())
	for _, s := range sups {
		if !s.join(5 * time.Second) {
			t.Fatalf("%s: no welcome", s.Hello.Supervisor)
		}
	}

	// Every task is held, unanswered, until all have arrived, so none
	// finishes before the membership changes.
	deadline := time.Now().Add(10 * time.Second)
	total := func() int { return len(sups[0].got) + len(sups[1].got) + len(sups[2].got) }
	for total() < nDomains && time.Now().Before(deadline) {
		for _, s := range sups {
			s.poll(10 * time.Millisecond)
		}
	}
	if total() != nDomains {
		t.Fatalf("%d tasks dispatched, want %d", total(), nDomains)
	}
	owner := make(map[string]string) // domain → supervisor that got it
	load := make(map[string]int)
	for _, s := range sups {
		for _, task := range s.got {
			_, dom := hostDomain(task.URL)
			if prev, ok := owner[dom]; ok {
				t.Errorf("domain %s sent to %s and %s", dom, prev, s.Hello.Supervisor)
			}
			owner[dom] = s.Hello.Supervisor
			load[s.Hello.Supervisor]++
		}
	}
	// Equal capacities: each at most its share and the slack.
	for _, n := range names {
		if most := int(math.Ceil((1 + cluster.LoadSlack) * nDomains / 3)); load[n] > most {
			t.Errorf("%s got %d domains, more than its bounded share %d (loads %v)", n, load[n], most, load)
		}
	}
	var lost []string // s3's domains
	for dom, s := range owner {
		if s == "s3" {
			lost = append(lost, dom)
		}
	}
	slices.Sort(lost)
	if len(lost) == 0 || len(lost) == nDomains {
		t.Fatalf("s3 owns %d of %d domains; the test needs a proper share", len(lost), nDomains)
	}

	// s3 goes silent holding its tasks and is dropped; s1 and s2 answer
	// everything they hold and whatever comes next.
	sups[2].Silent = true
	seen := map[string]int{"s1": len(sups[0].got), "s2": len(sups[1].got)}
	crawl(t, e, sups[:2], web, 20*time.Second)
	if e.err != nil {
		t.Fatalf("Run: %v", e.err)
	}
	moved := make(map[string]string)
	for _, s := range sups[:2] {
		for _, task := range s.got[seen[s.Hello.Supervisor]:] {
			_, dom := hostDomain(task.URL)
			if owner[dom] != "s3" {
				t.Errorf("domain %s of %s moved to %s", dom, owner[dom], s.Hello.Supervisor)
			}
			moved[dom] = s.Hello.Supervisor
		}
	}
	if got := slices.Sorted(maps.Keys(moved)); !slices.Equal(got, lost) {
		t.Errorf("moved domains %q, want s3's %q", got, lost)
	}
	if e.sum.Pages != nDomains {
		t.Errorf("pages %d, want %d", e.sum.Pages, nDomains)
	}
}
