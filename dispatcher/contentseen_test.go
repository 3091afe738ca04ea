package dispatcher

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"backfill/etl"
	"backfill/testweb"
)

// flipBits returns fp with n distinct random bits flipped.
func flipBits(r *rand.Rand, fp uint64, n int) uint64 {
	for _, i := range r.Perm(64)[:n] {
		fp ^= 1 << uint(i)
	}
	return fp
}

func randomIndex(r *rand.Rand, n int) (*simIndex, []uint64) {
	x := newSimIndex()
	fps := make([]uint64, n)
	for i := range fps {
		fps[i] = r.Uint64()
		x.add(fps[i], fmt.Sprint("p", i))
	}
	return x, fps
}

// TestSimIndexBitPatterns places the differing bits where a block-keyed
// index is most likely to go wrong: all in one block, one per block, at
// the ends of blocks, in the top and bottom bits.
func TestSimIndexBitPatterns(t *testing.T) {
	const base = 0x0123456789abcdef
	tests := []struct {
		name  string
		flip  []int // bit positions
		found bool
	}{
		{"identical", nil, true},
		{"bit 0", []int{0}, true},
		{"bit 63", []int{63}, true},
		{"three in block 0", []int{0, 7, 15}, true},
		{"three in block 3", []int{48, 50, 63}, true},
		{"one in each of three blocks", []int{1, 20, 40}, true},
		{"block boundaries", []int{15, 16, 31}, true},
		{"skipping block 0", []int{16, 32, 48}, true},
		{"skipping block 3", []int{0, 16, 32}, true},
		{"four, one per block", []int{0, 16, 32, 48}, false},
		{"four in one block", []int{0, 1, 2, 3}, false},
		{"all bits", seq(0, 64), false},
	}
	x := newSimIndex()
	x.add(base, "base")
	r := rand.New(rand.NewPCG(7, 7))
	for range 1000 { // decoys, none near base
		if fp := r.Uint64(); bits.OnesCount64(fp^base) > 8 {
			x.add(fp, "decoy")
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := uint64(base)
			for _, b := range tc.flip {
				q ^= 1 << uint(b)
			}
			id, d, ok := x.near(q)
			if ok != tc.found {
				t.Fatalf("near(%016x) found=%v (id %q, dist %d), want found=%v", q, ok, id, d, tc.found)
			}
			if ok && (id != "base" || d != len(tc.flip)) {
				t.Fatalf("near = %q at %d, want base at %d", id, d, len(tc.flip))
			}
		})
	}
}

func seq(from, to int) []int {
	s := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

func TestSimIndexAddKeepsFirst(t *testing.T) {
	x := newSimIndex()
	for i, step := range []struct {
		fp    uint64
		id    string
		added bool
	}{
		{1, "a", true},
		{1, "b", false}, // same fingerprint: the first id stays
		{1 ^ 1<<40, "c", true},
		{0, "d", true},
		{1<<64 - 1, "e", true},
		{1<<64 - 1, "f", false},
	} {
		if got := x.add(step.fp, step.id); got != step.added {
			t.Fatalf("step %d: add(%x, %s) = %v, want %v", i, step.fp, step.id, got, step.added)
		}
	}
	for _, q := range []struct {
		fp   uint64
		id   string
		dist int
	}{{1, "a", 0}, {1 ^ 1<<40, "c", 0}, {1 ^ 1<<41, "a", 1}, {0, "d", 0}, {1<<64 - 1, "e", 0}, {1<<64 - 1 ^ 0b111, "e", 3}} {
		if id, d, ok := x.near(q.fp); !ok || id != q.id || d != q.dist {
			t.Fatalf("near(%x) = %q, %d, %v; want %q, %d", q.fp, id, d, ok, q.id, q.dist)
		}
	}
	if x.len() != 4 {
		t.Fatalf("len = %d, want 4", x.len())
	}
}

// TestSimIndexProperty: any added fingerprint with 0..3 bits flipped is
// found, with exactly that distance and its own id; with 4 or more it is
// not (the other entries are random, so nothing else is that close). More
// than 2¹⁶ entries, so that entry numbers use both halves.
func TestSimIndexProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	x, fps := randomIndex(r, 70_000)
	for flips := 0; flips <= 8; flips++ {
		for range 2000 {
			i := r.IntN(len(fps))
			q := flipBits(r, fps[i], flips)
			id, d, ok := x.near(q)
			if flips <= simMaxDistance {
				if !ok || id != fmt.Sprint("p", i) || d != flips {
					t.Fatalf("%d flips of entry %d: near = %q, %d, %v; want p%d, %d, true", flips, i, id, d, ok, i, flips)
				}
			} else if ok {
				t.Fatalf("%d flips of entry %d: found %q at distance %d", flips, i, id, d)
			}
		}
	}
}

// TestSimIndexBruteForce checks the index against a scan of every entry, on
// 10,000 fingerprints clustered so that queries have several neighbours at
// every distance around the limit.
func TestSimIndexBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x := newSimIndex()
	var fps []uint64
	centers := make([]uint64, 400)
	for i := range centers {
		centers[i] = r.Uint64()
	}
	for len(fps) < 10_000 {
		fp := flipBits(r, centers[r.IntN(len(centers))], r.IntN(7))
		if r.IntN(10) == 0 {
			fp = r.Uint64()
		}
		if x.add(fp, fmt.Sprint(len(fps))) { // a repeated fingerprint keeps its first id
			fps = append(fps, fp)
		}
	}
	var withMatch, multi int
	for range 3000 {
		q := flipBits(r, centers[r.IntN(len(centers))], r.IntN(7))
		if r.IntN(10) == 0 {
			q = flipBits(r, fps[r.IntN(len(fps))], r.IntN(6))
		}
		want := map[uint32]int{}
		best, bestD := -1, 99
		for i, fp := range fps {
			if d := bits.OnesCount64(fp ^ q); d <= simMaxDistance {
				want[uint32(i)] = d
				if d < bestD {
					best, bestD = i, d
				}
			}
		}
		got := map[uint32]int{}
		x.each(q, func(e uint32, d int) {
			if _, dup := got[e]; dup {
				t.Fatalf("query %016x: entry %d reported twice", q, e)
			}
			got[e] = d
		})
		if len(got) != len(want) {
			t.Fatalf("query %016x: index found %d entries, brute force %d", q, len(got), len(want))
		}
		for e, d := range want {
			if got[e] != d {
				t.Fatalf("query %016x: entry %d distance %d, brute force %d", q, e, got[e], d)
			}
		}
		id, d, ok := x.near(q)
		if ok != (best >= 0) || ok && (id != fmt.Sprint(best) || d != bestD) {
			t.Fatalf("query %016x: near = %q, %d, %v; brute force %d at %d", q, id, d, ok, best, bestD)
		}
		if len(want) > 0 {
			withMatch++
		}
		if len(want) > 1 {
			multi++
		}
	}
	// The cross-check means something only if many queries had matches.
	if withMatch < 1000 || multi < 300 {
		t.Fatalf("weak test data: %d of 3000 queries had matches, %d several", withMatch, multi)
	}
}

func fpOf(s string) [16]byte {
	var b [16]byte
	copy(b[:], s)
	return b
}

func TestContentSeen(t *testing.T) {
	const (
		a = uint64(0xfedcba9876543210)
		w = 100 // words: enough for the test to apply
	)
	aNear := a ^ 1<<5 ^ 1<<40   // distance 2 from a
	aNearer := aNear ^ 1<<63    // 3 from a
	chain := aNear ^ 0b111<<20  // 2+3 = 5 from a, 3 from aNear
	far := a ^ 0xff00ff00ff00ff // 32 from a
	steps := []struct {
		id    string
		words int
		exact string
		sim   uint64
		first string
		kind  seenKind
		dist  int
	}{
		{"A", w, "text-a", a, "", seenNew, 0},
		{"B", w, "text-a", a, "A", seenExact, 0},
		{"C", w, "text-c", aNear, "A", seenNear, 2},
		{"D", w, "text-c", aNear, "A", seenNear, 2},     // a copy of a near duplicate: near A, from the map
		{"E", w, "text-e", aNearer, "A", seenNear, 3},   // at the limit
		{"F", w, "text-f", chain, "", seenNew, 0},       // near C only, and C is not indexed: duplicates never chain
		{"G", w, "text-g", chain ^ 1, "F", seenNear, 1}, // near F, which is
		{"H", w, "text-h", far, "", seenNew, 0},
		{"A", w, "text-a", a, "", seenNew, 0},       // redelivered: not its own duplicate
		{"A", w, "text-a2", a ^ 1, "", seenNew, 0},  // refetched, slightly changed
		{"C", w, "text-c", aNear, "A", seenNear, 2}, // redelivered duplicate: same answer
		{"S1", 9, "short", 42, "", seenNew, 0},      // too few words
		{"S2", 9, "short", 42, "", seenNew, 0},      // still too few
		{"S3", 0, "", 0, "", seenNew, 0},            // empty page
		{"S4", 0, "", 0, "", seenNew, 0},            // another empty page
		{"T1", 10, "ten", 7, "", seenNew, 0},        // exactly the minimum
		{"T2", 10, "ten", 7, "T1", seenExact, 0},
	}
	c := newContentSeen()
	for i, s := range steps {
		first, kind, dist := c.check(s.id, s.words, fpOf(s.exact), s.sim)
		if first != s.first || kind != s.kind || dist != s.dist {
			t.Fatalf("step %d (%s): check = %q, %v, %d; want %q, %v, %d", i, s.id, first, kind, dist, s.first, s.kind, s.dist)
		}
	}
	if n := c.size(); n != 4 { // A, F, H, T1
		t.Fatalf("size = %d, want 4", n)
	}
}

// TestContentSeenConcurrent: the same text checked at once from many pages
// has exactly one first page; every other is its exact duplicate.
func TestContentSeenConcurrent(t *testing.T) {
	c := newContentSeen()
	const n = 32
	var wg sync.WaitGroup
	type res struct {
		id, first string
		kind      seenKind
	}
	out := make(chan res, n)
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprint("page", i)
			first, kind, _ := c.check(id, 50, fpOf("same"), 0xabc)
			out <- res{id, first, kind}
		})
	}
	wg.Wait()
	close(out)
	var firsts []string
	byKind := map[seenKind]int{}
	for r := range out {
		byKind[r.kind]++
		if r.kind == seenNew {
			firsts = append(firsts, r.id)
		}
		if r.kind == seenExact && r.first == r.id {
			t.Fatalf("%s is its own duplicate", r.id)
		}
	}
	if len(firsts) != 1 || byKind[seenExact] != n-1 {
		t.Fatalf("kinds %v, first pages %v; want one new and %d exact", byKind, firsts, n-1)
	}
}

// textPages generates pages of prose-like text (testweb.Prose) and
// keeps the random source for the tests' other draws.
type textPages struct {
	r *rand.Rand
	*testweb.Prose
}

func newTextPages(seed uint64) *textPages {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	return &textPages{r: r, Prose: testweb.NewProse(r)}
}

// TestContentSeenPages runs the whole test on real fingerprints of
// generated pages: copies are exact duplicates, one-word edits of a
// 500-word page near duplicates whenever their simhashes are within the
// limit (most of them), and unrelated pages never duplicates.
func TestContentSeenPages(t *testing.T) {
	gen := newTextPages(11)
	c := newContentSeen()
	check := func(id, text string) (string, seenKind, int, etl.Fingerprint) {
		fp := etl.TextFingerprint(text)
		first, kind, dist := c.check(id, fp.Words, fp.Exact, fp.Sim)
		return first, kind, dist, fp
	}
	const edits = 200
	var near int
	for i := range edits {
		w := gen.Words(500)
		orig := strings.Join(w, " ")
		id := fmt.Sprint("orig", i)
		if first, kind, _, _ := check(id, orig); kind != seenNew {
			t.Fatalf("page %d: %v of %s, want new", i, kind, first)
		}
		// The same text with different spacing and case is an exact copy.
		if first, kind, _, _ := check(fmt.Sprint("copy", i), "  "+strings.ToUpper(strings.Join(w, "\n\t"))+" "); kind != seenExact || first != id {
			t.Fatalf("copy of page %d: %v of %q, want exact of %s", i, kind, first, id)
		}
		w[gen.r.IntN(len(w))] = "qqedited"
		first, kind, dist, fp := check(fmt.Sprint("edit", i), strings.Join(w, " "))
		want := etl.SimDistance(fp.Sim, etl.TextFingerprint(orig).Sim)
		switch {
		case want <= simMaxDistance && (kind != seenNear || first != id || dist != want):
			t.Fatalf("edit of page %d at distance %d: %v of %q at %d, want near of %s", i, want, kind, first, dist, id)
		case want > simMaxDistance && kind != seenNew:
			t.Fatalf("edit of page %d at distance %d: %v of %q, want new", i, want, kind, first)
		}
		if kind == seenNear {
			near++
		}
	}
	// Simhash at distance 3 catches most, not all, one-word edits of a
	// 500-word page (TestFingerprintOneWordEdit in etl measures the distribution).
	if near < edits*3/4 {
		t.Fatalf("only %d of %d one-word edits found as near duplicates", near, edits)
	}
	t.Logf("one-word edits of 500-word pages found as near duplicates: %d of %d", near, edits)
	// 1,000 unrelated pages of 100 to 500 words: none is a duplicate.
	for i := range 1000 {
		text := strings.Join(gen.Words(100+gen.r.IntN(400)), " ")
		if first, kind, dist, _ := check(fmt.Sprint("other", i), text); kind != seenNew {
			t.Fatalf("unrelated page %d: %v of %s at distance %d", i, kind, first, dist)
		}
	}
}

func benchFingerprints(n int) ([]uint64, []string) {
	r := rand.New(rand.NewPCG(5, 6))
	fps := make([]uint64, n)
	ids := make([]string, n)
	for i := range fps {
		fps[i] = r.Uint64()
		ids[i] = fmt.Sprintf("https://site%d.example/page/%d", i%1000, i)
	}
	return fps, ids
}

// heapAfterGC is the live heap, after a collection.
func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

const benchN = 1_000_000

// BenchmarkSimIndexBuild builds an index of 1,000,000 fingerprints per
// iteration and reports its memory per fingerprint (the index itself: the
// ids' bytes belong to the caller and are not counted).
func BenchmarkSimIndexBuild(b *testing.B) {
	fps, ids := benchFingerprints(benchN)
	var perFP float64
	for b.Loop() {
		b.StopTimer()
		before := heapAfterGC()
		b.StartTimer()
		x := newSimIndex()
		for i, fp := range fps {
			x.add(fp, ids[i])
		}
		b.StopTimer()
		perFP = float64(heapAfterGC()-before) / benchN
		runtime.KeepAlive(x)
		b.StartTimer()
	}
	b.ReportMetric(perFP, "bytes/fp")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/build")
}

// BenchmarkSimIndexLookup looks up, in an index of 1,000,000 random
// fingerprints, half queries within distance 3 of an entry and half random
// ones (which find nothing), 100,000 per iteration.
func BenchmarkSimIndexLookup(b *testing.B) {
	fps, ids := benchFingerprints(benchN)
	x := newSimIndex()
	for i, fp := range fps {
		x.add(fp, ids[i])
	}
	r := rand.New(rand.NewPCG(8, 9))
	const batch = 100_000
	queries := make([]uint64, batch)
	for i := range queries {
		if i%2 == 0 {
			queries[i] = flipBits(r, fps[r.IntN(len(fps))], r.IntN(simMaxDistance+1))
		} else {
			queries[i] = r.Uint64()
		}
	}
	var found int
	b.ResetTimer()
	for b.Loop() {
		found = 0
		for _, q := range queries {
			if _, _, ok := x.near(q); ok {
				found++
			}
		}
	}
	b.StopTimer()
	if found != batch/2 { // a random query near one of 10⁶ entries: p ≈ 2·10⁻⁹
		b.Fatalf("found %d of %d, want the %d near queries", found, batch, batch/2)
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "lookups/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/lookup")
}

// BenchmarkContentSeen runs the whole test (exact map and simhash index)
// on 1,000,000 pages with new content per iteration and reports checks per
// second and memory per page.
func BenchmarkContentSeen(b *testing.B) {
	fps, ids := benchFingerprints(benchN)
	exact := make([][16]byte, benchN)
	for i := range exact {
		// Distinct text hashes; their value does not matter to the map.
		copy(exact[i][:], fmt.Sprintf("%016x", fps[i]))
	}
	var perPage float64
	for b.Loop() {
		b.StopTimer()
		before := heapAfterGC()
		b.StartTimer()
		c := newContentSeen()
		for i := range fps {
			if _, kind, _ := c.check(ids[i], 100, exact[i], fps[i]); kind != seenNew {
				b.Fatalf("page %d: %v", i, kind)
			}
		}
		b.StopTimer()
		perPage = float64(heapAfterGC()-before) / benchN
		runtime.KeepAlive(c)
		b.StartTimer()
	}
	b.ReportMetric(perPage, "bytes/page")
	b.ReportMetric(float64(b.N*benchN)/b.Elapsed().Seconds(), "checks/s")
}
