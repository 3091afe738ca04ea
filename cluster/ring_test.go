package cluster

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
)

// ringDomains returns n distinct synthetic registrable domains.
func ringDomains(n int) []string {
	ds := make([]string, n)
	for i := range ds {
		ds[i] = fmt.Sprintf("site%d.example", i)
	}
	return ds
}

// owners returns the owner of every domain.
func owners(r *ring, domains []string) []string {
	out := make([]string, len(domains))
	for i, d := range domains {
		out[i] = r.owner(d)
	}
	return out
}

// moduloOwner is the scheme the ring replaces: hash modulo the member count
// over the sorted members.
func moduloOwner(members []string, domain string) string {
	return members[ringHash(domain)%uint64(len(members))]
}

func TestRingEmpty(t *testing.T) {
	var nilRing *ring
	tests := []struct {
		name string
		r    *ring
	}{
		{"nil", nilRing},
		{"no members", newRing(0, nil)},
		{"only empty names", newRing(8, []string{"", ""})},
		{"last member left", newRing(0, []string{"sup1"}).without("sup1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, d := range []string{"a.example", "", "b.test"} {
				if got := tt.r.owner(d); got != "" {
					t.Errorf("owner(%q) = %q, want \"\"", d, got)
				}
			}
			if n := len(tt.r.names()); n != 0 {
				t.Errorf("names() has %d members, want 0", n)
			}
		})
	}
	if got := nilRing.with("sup1").owner("a.example"); got != "sup1" {
		t.Errorf("nil ring with sup1: owner = %q, want sup1", got)
	}
}

func TestRingOneMemberOwnsEverything(t *testing.T) {
	domains := ringDomains(10000)
	tests := []struct {
		vnodes, points int
	}{
		{1, 1},
		{16, 16},
		{0, defaultVnodes},
		{-5, defaultVnodes},
		{1 << 40, maxVnodes},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("vnodes=", tt.vnodes), func(t *testing.T) {
			r := newRing(tt.vnodes, []string{"sup1"})
			if len(r.points) != tt.points {
				t.Errorf("%d points, want %d", len(r.points), tt.points)
			}
			for _, d := range domains {
				if got := r.owner(d); got != "sup1" {
					t.Fatalf("owner(%q) = %q, want sup1", d, got)
				}
			}
		})
	}
}

func TestRingDeterministic(t *testing.T) {
	domains := ringDomains(20000)
	want := owners(newRing(0, []string{"sup1", "sup2", "sup3", "sup4"}), domains)
	tests := []struct {
		name string
		r    *ring
	}{
		{"rebuilt", newRing(0, []string{"sup1", "sup2", "sup3", "sup4"})},
		{"reversed order", newRing(0, []string{"sup4", "sup3", "sup2", "sup1"})},
		{"shuffled with duplicates and empty", newRing(0, []string{"sup3", "", "sup1", "sup4", "sup3", "sup2"})},
		{"explicit default vnodes", newRing(defaultVnodes, []string{"sup2", "sup1", "sup4", "sup3"})},
		{"grown by with", newRing(0, []string{"sup2"}).with("sup4").with("sup1").with("sup3")},
		{"shrunk by without", newRing(0, []string{"sup1", "sup2", "sup3", "sup4", "sup5"}).without("sup5")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.names(); !slices.Equal(got, []string{"sup1", "sup2", "sup3", "sup4"}) {
				t.Fatalf("names() = %v", got)
			}
			got := owners(tt.r, domains)
			for i := range domains {
				if got[i] != want[i] {
					t.Fatalf("owner(%q) = %q, want %q", domains[i], got[i], want[i])
				}
			}
		})
	}
}

func TestRingBalance(t *testing.T) {
	domains := ringDomains(100000)
	tests := []struct {
		name    string
		members []string
		vnodes  int
		spread  float64 // allowed relative deviation from the fair share
	}{
		{"4 members", []string{"sup1", "sup2", "sup3", "sup4"}, 0, 0.15},
		{"5 members", []string{"sup1", "sup2", "sup3", "sup4", "sup5"}, 0, 0.15},
		{"4 named by endpoint", []string{"tcp://sup1.test:7001", "tcp://sup2.test:7001", "tcp://sup3.test:7001", "tcp://sup4.test:7001"}, 0, 0.15},
		{"16 members", ringMembers("sup", 16), 0, 0.20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(tt.vnodes, tt.members)
			count := map[string]int{}
			for _, d := range domains {
				count[r.owner(d)]++
			}
			fair := 1 / float64(len(tt.members))
			for _, m := range tt.members {
				share := float64(count[m]) / float64(len(domains))
				t.Logf("%s owns %.4f (fair %.4f, %+.1f%%)", m, share, fair, 100*(share-fair)/fair)
				if share < fair*(1-tt.spread) || share > fair*(1+tt.spread) {
					t.Errorf("%s owns %.4f of the domains, want %.4f ± %.0f%%", m, share, fair, 100*tt.spread)
				}
			}
			if len(count) != len(tt.members) {
				t.Errorf("owners %v, want exactly the members %v", count, tt.members)
			}
		})
	}
}

// ringMembers returns n member names prefix0 … prefix<n-1>.
func ringMembers(prefix string, n int) []string {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return ms
}

// arcShares returns each member's exact share of the ring: the arcs that
// end at its points.
func arcShares(r *ring) []float64 {
	shares := make([]float64, len(r.members))
	prev := r.points[len(r.points)-1]
	for i, p := range r.points {
		shares[r.owners[i]] += float64(p-prev) / (1 << 64) // wraps mod 2^64
		prev = p
	}
	return shares
}

// TestRingSpread checks that the hash places vnodes as well as uniformly
// random points would: over many 4-member rings, members' shares deviate
// from the fair share with the relative standard deviation of random
// placement, sqrt((n-1)/(n*vnodes+1)). A weak hash spreads them far wider
// (FNV-1a without its finalizer: about six times).
func TestRingSpread(t *testing.T) {
	const n, sets = 4, 150
	for _, vnodes := range []int{128, defaultVnodes} {
		t.Run(fmt.Sprint("vnodes=", vnodes), func(t *testing.T) {
			var sumsq, worst float64
			outside := 0 // rings with a member more than 15% off its share
			for k := 0; k < sets; k++ {
				r := newRing(vnodes, ringMembers(fmt.Sprintf("set%d-sup", k), n))
				off := false
				for _, s := range arcShares(r) {
					d := s*n - 1
					sumsq += d * d
					worst = max(worst, math.Abs(d))
					off = off || math.Abs(d) > 0.15
				}
				if off {
					outside++
				}
			}
			got := math.Sqrt(sumsq / (n * sets))
			want := math.Sqrt(float64(n-1) / float64(n*vnodes+1))
			t.Logf("relative deviation of shares: rms %.4f (random placement %.4f), worst %.4f; %d of %d rings have a member beyond ±15%%",
				got, want, worst, outside, sets)
			if got < want*0.8 || got > want*1.2 {
				t.Errorf("shares deviate by %.4f rms, want %.4f ± 20%% as with random placement", got, want)
			}
		})
	}
}

// TestRingMembershipChange measures the fraction of domains that change
// owner when a member joins or leaves, on the ring and, for comparison,
// with hash modulo the member count.
func TestRingMembershipChange(t *testing.T) {
	domains := ringDomains(100000)
	four := []string{"sup1", "sup2", "sup3", "sup4"}
	five := []string{"sup1", "sup2", "sup3", "sup4", "sup5"}
	tests := []struct {
		name        string
		before      *ring
		after       *ring
		joined      string // the member that joined, or ""
		left        string // the member that left, or ""
		min, max    float64
		moduloAfter []string
	}{
		{"5th joins", newRing(0, four), newRing(0, four).with("sup5"), "sup5", "", 0.15, 0.25, five},
		{"1st of 5 leaves", newRing(0, five), newRing(0, five).without("sup1"), "", "sup1", 0.15, 0.25, five[1:]},
		{"3rd of 5 leaves", newRing(0, five), newRing(0, five).without("sup3"), "", "sup3", 0.15, 0.25, []string{"sup1", "sup2", "sup4", "sup5"}},
		{"2nd joins", newRing(0, []string{"sup1"}), newRing(0, []string{"sup1", "sup2"}), "sup2", "", 0.40, 0.60, []string{"sup1", "sup2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			beforeNames := tt.before.names()
			moved, movedModulo := 0, 0
			for _, d := range domains {
				was, is := tt.before.owner(d), tt.after.owner(d)
				if moduloOwner(beforeNames, d) != moduloOwner(tt.moduloAfter, d) {
					movedModulo++
				}
				if !tt.after.has(is) {
					t.Fatalf("owner(%q) = %q, not a member of %v", d, is, tt.after.names())
				}
				if tt.left != "" {
					// Exactly the leaver's domains move; all others stay.
					if (was == tt.left) != (was != is) {
						t.Fatalf("%q: owner %q -> %q when %s left", d, was, is, tt.left)
					}
				}
				if was == is {
					continue
				}
				moved++
				if tt.joined != "" && is != tt.joined {
					t.Fatalf("%q moved %q -> %q, not to the joining %s", d, was, is, tt.joined)
				}
			}
			frac := float64(moved) / float64(len(domains))
			fracModulo := float64(movedModulo) / float64(len(domains))
			t.Logf("moved: ring %.4f, modulo %.4f", frac, fracModulo)
			if frac < tt.min || frac > tt.max {
				t.Errorf("ring moved %.4f of the domains, want between %.2f and %.2f", frac, tt.min, tt.max)
			}
			if len(beforeNames) > 2 && fracModulo <= 0.5 {
				t.Errorf("modulo moved only %.4f of the domains, want > 0.5", fracModulo)
			}
		})
	}
}

func TestRingWithWithout(t *testing.T) {
	base := newRing(16, []string{"sup1", "sup2"})
	tests := []struct {
		name string
		r    *ring
		want []string
		same bool // r is base itself
	}{
		{"with existing", base.with("sup1"), []string{"sup1", "sup2"}, true},
		{"with empty name", base.with(""), []string{"sup1", "sup2"}, true},
		{"without absent", base.without("sup9"), []string{"sup1", "sup2"}, true},
		{"with new", base.with("sup3"), []string{"sup1", "sup2", "sup3"}, false},
		{"without present", base.without("sup2"), []string{"sup1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.names(); !slices.Equal(got, tt.want) {
				t.Errorf("names() = %v, want %v", got, tt.want)
			}
			if (tt.r == base) != tt.same {
				t.Errorf("returned base itself = %v, want %v", tt.r == base, tt.same)
			}
			if tt.r.vnodes != 16 {
				t.Errorf("vnodes = %d, want 16 kept from base", tt.r.vnodes)
			}
			if got, want := len(tt.r.points), 16*len(tt.want); got != want {
				t.Errorf("%d points, want %d", got, want)
			}
		})
	}
	if got := base.names(); !slices.Equal(got, []string{"sup1", "sup2"}) {
		t.Errorf("base changed to %v", got)
	}
}

// TestRingConcurrentReads reads one ring from many goroutines while others
// derive new rings from it; the race detector checks that with and without
// never write into the shared ring, and the answers must not change.
func TestRingConcurrentReads(t *testing.T) {
	domains := ringDomains(2000)
	base := newRing(0, []string{"sup1", "sup2", "sup3"})
	want := owners(base, domains)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 4; g++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i, d := range domains {
				if got := base.owner(d); got != want[i] {
					errs <- fmt.Sprintf("owner(%q) = %q, want %q", d, got, want[i])
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				base.with(fmt.Sprintf("new%d", g)).without("sup1")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func BenchmarkRingOwner(b *testing.B) {
	domains := ringDomains(4096)
	for _, n := range []int{4, 16, 64} {
		r := newRing(0, ringMembers("sup", n))
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if r.owner(domains[i&4095]) == "" {
					b.Fatal("empty owner")
				}
				i++
			}
		})
	}
}

func BenchmarkRingBuild(b *testing.B) {
	r := newRing(0, ringMembers("sup", 16))
	b.ReportAllocs()
	for b.Loop() {
		r.with("sup-new")
	}
}
