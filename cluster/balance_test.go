package cluster

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
)

func domainsN(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("site-%05d.example", i)
	}
	return out
}

func newBalanced(members map[string]int, domains []string) *Balancer {
	b := NewBalancer()
	for _, m := range sortedKeys(members) {
		b.Join(m, members[m])
	}
	for _, d := range domains {
		b.Route(d)
	}
	return b
}

func sortedKeys(m map[string]int) []string {
	return slices.Sorted(maps.Keys(m))
}

// TestBalanceBoundsLoads: every member holds at most (1+LoadSlack) times
// its capacity's share of the domains, where the plain ring is off by 10 %
// and more (the split that capped the scale-out benchmark).
func TestBalanceBoundsLoads(t *testing.T) {
	tests := []struct {
		name    string
		members map[string]int
		domains int
	}{
		{"400 domains, 4 equal", map[string]int{"sup-0": 8, "sup-1": 8, "sup-2": 8, "sup-3": 8}, 400},
		{"60 domains, 3 equal", map[string]int{"s1": 60, "s2": 60, "s3": 60}, 60},
		{"10,000 domains, 7 equal", map[string]int{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1, "g": 1}, 10000},
		{"by capacity 1:3", map[string]int{"small": 16, "big": 48}, 4000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBalanced(tt.members, domainsN(tt.domains))
			sum := 0
			for _, c := range tt.members {
				sum += c
			}
			total := 0
			for m, c := range tt.members {
				share := float64(tt.domains) * float64(c) / float64(sum)
				if most := int(math.Ceil((1 + LoadSlack) * share)); b.load[m] > most {
					t.Errorf("%s holds %d domains, cap %d (share %.1f)", m, b.load[m], most, share)
				}
				total += b.load[m]
			}
			if total != tt.domains || len(b.owner) != tt.domains {
				t.Errorf("%d domains assigned (%d owners), want %d", total, len(b.owner), tt.domains)
			}
		})
	}
	// What the ring alone gives on the first case, for the record.
	r := newRing(0, []string{"sup-0", "sup-1", "sup-2", "sup-3"})
	most := 0
	count := map[string]int{}
	for _, d := range domainsN(400) {
		count[r.owner(d)]++
		most = max(most, count[r.owner(d)])
	}
	t.Logf("plain ring: 400 domains over 4 → %v (most %d); bounded: at most %d", count, most, int(math.Ceil(1.02*100)))
}

// TestBalanceJoinMovesAShare: a joining member takes about 1/n of the
// domains, all from the others, and nothing else moves.
func TestBalanceJoinMovesAShare(t *testing.T) {
	tests := []struct {
		members, domains int
	}{{4, 400}, {4, 10000}, {9, 20000}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d members, %d domains", tt.members, tt.domains), func(t *testing.T) {
			ms := map[string]int{}
			for i := range tt.members {
				ms[fmt.Sprintf("m%d", i)] = 8
			}
			ds := domainsN(tt.domains)
			b := newBalanced(ms, ds)
			before := make(map[string]string, len(b.owner))
			for d, m := range b.owner {
				before[d] = m
			}
			moved := b.Join("newcomer", 8)
			n := tt.members + 1
			share := float64(tt.domains) / float64(n)
			if float64(moved) > (1+LoadSlack)*share+1 {
				t.Errorf("%d domains moved, more than the newcomer's bounded share %.0f", moved, share)
			}
			if float64(moved) < 0.5*share {
				t.Errorf("only %d domains moved to the newcomer, share %.0f", moved, share)
			}
			changed := 0
			for d, m := range b.owner {
				if m != before[d] {
					changed++
					if m != "newcomer" {
						t.Errorf("domain %s moved from %s to %s, not to the newcomer", d, before[d], m)
					}
				}
			}
			if changed != moved {
				t.Errorf("join reported %d moves, %d owners changed", moved, changed)
			}
			// New domains still find room and stay bounded.
			for _, d := range domainsN(tt.domains + 500)[tt.domains:] {
				b.Route(d)
			}
			for m, l := range b.load {
				if most := int(math.Ceil((1 + LoadSlack) * float64(len(b.owner)) / float64(n))); l > most+int(share*LoadSlack)+2 {
					t.Errorf("%s holds %d, far above its share after the join", m, l)
				}
			}
		})
	}
}

// TestBalanceLeaveMovesOnlyItsDomains: when a member leaves, its domains
// go to the others within their caps and no other domain moves.
func TestBalanceLeaveMovesOnlyItsDomains(t *testing.T) {
	ms := map[string]int{"a": 8, "b": 8, "c": 8, "d": 8}
	b := newBalanced(ms, domainsN(2000))
	before := make(map[string]string)
	for d, m := range b.owner {
		before[d] = m
	}
	b.Leave("c")
	for d, m := range b.owner {
		if m == "c" {
			t.Fatalf("domain %s still owned by the member that left", d)
		}
		if before[d] != "c" && m != before[d] {
			t.Errorf("domain %s of %s moved to %s", d, before[d], m)
		}
	}
	if len(b.owner) != 2000 {
		t.Errorf("%d domains owned after the leave, want 2000", len(b.owner))
	}
	for m, l := range b.load {
		if l > int(math.Ceil((1+LoadSlack)*2000/3))+1 {
			t.Errorf("%s holds %d after the leave", m, l)
		}
	}
}

// TestBalanceDeterministic: the same members and domains in the same
// order give the same owners, and prune forgets only idle domains once
// past AssignedCap.
func TestBalanceDeterministic(t *testing.T) {
	ms := map[string]int{"a": 1, "b": 2, "c": 3}
	x, y := newBalanced(ms, domainsN(3000)), newBalanced(ms, domainsN(3000))
	for d, m := range x.owner {
		if y.owner[d] != m {
			t.Fatalf("domain %s: %s and %s", d, m, y.owner[d])
		}
	}
	x.Prune(func(string) bool { return false })
	if len(x.owner) != 3000 {
		t.Errorf("pruned below AssignedCap: %d owners left", len(x.owner))
	}
	big := newBalanced(ms, domainsN(AssignedCap+10))
	big.Prune(func(d string) bool { return d == "site-00001.example" })
	if len(big.owner) != 1 || big.load["a"]+big.load["b"]+big.load["c"] != 1 {
		t.Errorf("after prune: %d owners, loads %v; want the one busy domain", len(big.owner), big.load)
	}
}

// TestBalanceOther: Other is the first member of a domain's walk past
// those left out (caps aside): the ring's owner when none is, another
// member when the domain's owner is (the member a re-check goes to), ""
// when none is left.
func TestBalanceOther(t *testing.T) {
	b := newBalanced(map[string]int{"a": 1, "b": 1, "c": 1}, nil)
	for _, d := range domainsN(200) {
		owner := b.Route(d)
		if got, first := b.Other(d), b.ring.owner(d); got != first {
			t.Fatalf("Other(%s) with none left out = %q, want the ring's first, %q", d, got, first)
		}
		next := b.Other(d, owner)
		third := b.Other(d, owner, next)
		if next == "" || third == "" || next == owner || third == owner || third == next {
			t.Fatalf("%s: owner %q, next %q, third %q: want three members", d, owner, next, third)
		}
		if got := b.Other(d, "a", "b", "c"); got != "" {
			t.Fatalf("Other with every member left out = %q", got)
		}
	}
}
