package dispatcher

import (
	"backfill/wire"
	"context"
	"fmt"
	"math"
	"math/bits"
	"sync"
)

// Content-seen test: a fetched page whose text was already seen at another
// URL adds nothing new, so its links are not expanded again and it is
// recorded as a duplicate of the first page that showed that text. Exact
// duplicates are found by a hash of the page's normalized text, near
// duplicates by a 64-bit simhash at Hamming distance at most simMaxDistance
// (both computed by etl.TextFingerprint on the supervisor).
//
// Near-duplicate lookup uses permuted tables ("Detecting Near-Duplicates for
// Web Crawling", WWW 2007): with f = 64 bits and k = 3, split the
// fingerprint into k+1 = 4 blocks of 16 bits. Two fingerprints at distance
// ≤ 3 differ in at most 3 bits, which lie in at most 3 blocks, so by the
// pigeonhole principle at least one of the 4 blocks is identical in both.
// Table t holds a copy of every fingerprint filed under its block t; a
// query looks in each table under its own block t and checks the
// candidates there with one XOR and popcount each. That finds every
// fingerprint within distance 3 without scanning the others. (The paper
// keeps each table as a copy of all fingerprints permuted so block t comes
// first, sorted, and searches the run sharing the top 16 bits; a bucket per
// 16-bit key holds the same run and takes inserts in O(1), which a crawl
// that adds one page at a time needs. Each bucket is one contiguous slice,
// so a table costs about two cache misses per query whatever the bucket's
// length.)
//
// Why 4 tables of 16-bit keys rather than the paper's larger setups (e.g.
// 5 blocks, 10 tables keyed by 2 blocks ≈ 26 bits): on random fingerprints
// a table returns n/2¹⁶ candidates per query. At n = 10⁶ ≈ 2²⁰ that is 16
// per table, 64 per query, about a microsecond per lookup, most of it the
// cache misses of reaching 4 buckets; at n = 2²⁴ (16.7 million pages)
// 1,024 candidates. More tables cut candidates (10 tables of 26-bit keys:
// n/2²⁶ each) but every table is another 8-byte copy of every fingerprint,
// so they pay only past about 2²⁶ fingerprints, beyond what one dispatcher
// crawls.
//
// Memory: 4 copies of the fingerprint (32 bytes) and its id (a 16-byte
// string header; the id's bytes are shared with the caller), plus bucket
// growth slack and 4 × 2¹⁶ slice headers (6 MiB) for the whole index.
// Within table t every fingerprint in a bucket has the same block t, so
// those 16 bits of each copy are free; they hold half of the entry number
// (tables 0 and 2 the low half, 1 and 3 the high half), which is how a
// match finds its id without a separate array of entries.
// BenchmarkSimIndexBuild measures the total: about 61 bytes per fingerprint
// at 10⁶ fingerprints; contentSeen's exact-hash map adds about 45 more
// (BenchmarkContentSeen).
const (
	simMaxDistance = 3
	simTables      = simMaxDistance + 1 // pigeonhole: k+1 blocks, one must match
	simBlockBits   = 64 / simTables     // 16
	simBlockMask   = 1<<simBlockBits - 1
)

// simIndex finds 64-bit simhashes within Hamming distance simMaxDistance of
// a query. It is not safe for concurrent use; contentSeen guards it.
type simIndex struct {
	// tables[t][k] holds the fingerprints whose block t is k, in the order
	// added, with block t replaced by a half of the entry number.
	tables [simTables][1 << simBlockBits][]uint64
	ids    []string // by entry number
}

func newSimIndex() *simIndex { return &simIndex{} }

// len reports how many fingerprints the index holds.
func (x *simIndex) len() int { return len(x.ids) }

// simBlock returns block t of fp.
func simBlock(fp uint64, t int) uint64 { return fp >> (t * simBlockBits) & simBlockMask }

// simOthers masks away block t of fp.
func simOthers(fp uint64, t int) uint64 { return fp &^ (simBlockMask << (t * simBlockBits)) }

// add adds fp under id. It reports false, adding nothing, when fp is
// already in the index (its first id stays) or the index is full (2³²-1
// entries, far beyond memory on any machine this runs on).
func (x *simIndex) add(fp uint64, id string) bool {
	if len(x.ids) >= math.MaxUint32 {
		return false
	}
	for _, c := range x.tables[0][simBlock(fp, 0)] {
		if simOthers(c^fp, 0) == 0 {
			return false
		}
	}
	e := uint64(len(x.ids))
	for t := range simTables {
		half := e >> ((t & 1) * simBlockBits) & simBlockMask
		b := &x.tables[t][simBlock(fp, t)]
		if len(*b) == cap(*b) {
			// Grow by a quarter rather than append's doubling: buckets hold
			// a few dozen entries each and doubling would waste a third of
			// the index on average.
			n := make([]uint64, len(*b), len(*b)+len(*b)/4+2)
			copy(n, *b)
			*b = n
		}
		*b = append(*b, simOthers(fp, t)|half<<(t*simBlockBits))
	}
	x.ids = append(x.ids, id)
	return true
}

// each calls fn once for every entry within simMaxDistance of fp, with its
// distance.
func (x *simIndex) each(fp uint64, fn func(entry uint32, dist int)) {
	for t := range simTables {
		for _, c := range x.tables[t][simBlock(fp, t)] {
			diff := simOthers(c^fp, t) // block t is equal: it is the bucket's key
			if d := bits.OnesCount64(diff); d <= simMaxDistance && firstSharedBlock(diff) == t {
				// An entry sharing several blocks with fp sits in several
				// tables; report it from the first only.
				if e, ok := x.entryOf(simOthers(c, t)|fp&(simBlockMask<<(t*simBlockBits)), t, c); ok {
					fn(e, d)
				}
			}
		}
	}
}

// entryOf assembles the entry number of fingerprint fp, found as copy c in
// table t, from the half in c and the half in the copy in the partner table
// (0↔1, 2↔3), which holds the other half. add writes every table, so the
// partner copy is always there; ok is false only if that were broken.
func (x *simIndex) entryOf(fp uint64, t int, c uint64) (entry uint32, ok bool) {
	p := t ^ 1
	mine := simBlock(c, t)
	for _, o := range x.tables[p][simBlock(fp, p)] {
		if simOthers(o^fp, p) == 0 { // fingerprints are unique in the index
			other := simBlock(o, p)
			if t&1 == 0 {
				return uint32(other<<simBlockBits | mine), true
			}
			return uint32(mine<<simBlockBits | other), true
		}
	}
	return 0, false
}

// firstSharedBlock returns the lowest block t where diff (two fingerprints
// XORed) is zero, or simTables when there is none.
func firstSharedBlock(diff uint64) int {
	for t := range simTables {
		if simBlock(diff, t) == 0 {
			return t
		}
	}
	return simTables
}

// closest returns the entry closest to fp within simMaxDistance (the
// earliest added among equally close ones) and its distance.
func (x *simIndex) closest(fp uint64) (entry uint32, dist int, ok bool) {
	best, bestD := uint32(0), simMaxDistance+1
	x.each(fp, func(e uint32, d int) {
		if d < bestD || d == bestD && e < best {
			best, bestD = e, d
		}
	})
	return best, bestD, bestD <= simMaxDistance
}

// near returns the id of the closest fingerprint within simMaxDistance of
// fp (the earliest added among equally close ones) and its distance.
func (x *simIndex) near(fp uint64) (id string, dist int, ok bool) {
	e, d, ok := x.closest(fp)
	if !ok {
		return "", 0, false
	}
	return x.ids[e], d, true
}

// seenKind says what the content-seen test found.
type seenKind uint8

const (
	seenNew   seenKind = iota // content not seen before (or too short to judge)
	seenExact                 // the same normalized text was seen at another page
	seenNear                  // a simhash within simMaxDistance was seen at another page
)

func (k seenKind) String() string {
	switch k {
	case seenExact:
		return "exact duplicate"
	case seenNear:
		return "near duplicate"
	}
	return "new"
}

// contentSeenMinWords is the fewest words a page needs for the test to
// apply. Empty shells, "Loading…" stubs and bare error pages share the same
// few words across unrelated URLs; calling them duplicates would drop real
// pages' links, while crawling a few short pages twice costs little.
const contentSeenMinWords = 10

// contentSeen is the content-seen test: which page first showed each text
// (exact hash) and each simhash. Safe for concurrent use.
//
// Only pages with new content enter the simhash index, so every duplicate
// is reported against a first page, never against another duplicate. A
// near duplicate's exact hash is remembered too (pointing at its first page,
// with the distance), so a later copy of it is answered by the map without
// a simhash lookup, with the same answer. The test lives in memory; a
// dispatcher that resumes replays check for the pages it had checked, in
// their original order, which rebuilds the same answers.
type contentSeen struct {
	mu sync.Mutex
	// exact maps a text hash to the simIndex entry of the first page whose
	// content it matched, packed with the simhash distance to it:
	// entry<<2 | dist. 2 bits hold dist ≤ simMaxDistance = 3.
	exact map[[16]byte]uint32
	sim   *simIndex
}

// contentSeenMaxPages bounds the pages with new content the test records
// (entry numbers share a uint32 with a 2-bit distance); past it pages are
// reported as new. A billion pages is beyond one dispatcher's memory anyway.
const contentSeenMaxPages = 1<<30 - 1

func newContentSeen() *contentSeen {
	return &contentSeen{exact: map[[16]byte]uint32{}, sim: newSimIndex()}
}

// check runs the test on page id with the given fingerprint (words is the
// normalized text's word count) and records it. When the content was seen
// before it returns the first page that showed it, how it matched and the
// simhash distance (0 for exact duplicates). Checking a page again (a
// redelivered result) finds the page itself, which is reported as new, so a
// page is never its own duplicate.
func (c *contentSeen) check(id string, words int, exact [16]byte, sim uint64) (first string, kind seenKind, dist int) {
	if words < contentSeenMinWords {
		return "", seenNew, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.exact[exact]; ok {
		f, d := c.sim.ids[v>>2], int(v&3)
		switch {
		case f == id:
			return "", seenNew, 0
		case d == 0:
			return f, seenExact, 0
		default:
			return f, seenNear, d
		}
	}
	best, bestD, ok := c.sim.closest(sim)
	switch {
	case !ok:
		// New content.
	case c.sim.ids[best] == id:
		return "", seenNew, 0 // the page itself, its text changed slightly since
	default:
		c.exact[exact] = best<<2 | uint32(bestD)
		return c.sim.ids[best], seenNear, bestD
	}
	if c.sim.len() >= contentSeenMaxPages || !c.sim.add(sim, id) {
		return "", seenNew, 0
	}
	c.exact[exact] = uint32(c.sim.len()-1) << 2
	return "", seenNew, 0
}

// size reports how many pages with new content the test holds.
func (c *contentSeen) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sim.len()
}

// contentSeen runs the content-seen test on a fetched page and records
// its fingerprint in the state, so a dispatcher that resumes knows it (see
// loadFingerprints). It reports whether the page is an exact or near
// duplicate of an earlier page at another URL. A page without a usable
// fingerprint (too few words, or a supervisor that sent none) is not
// tested and not recorded.
func (d *Dispatcher) contentSeen(ctx context.Context, t *task, r *wire.Result) (bool, error) {
	if len(r.TextHash) != 16 || r.Words < contentSeenMinWords {
		return false, nil
	}
	exact := [16]byte(r.TextHash)
	first, kind, dist := d.seen.check(t.url, r.Words, exact, r.Simhash)
	if kind != seenNew {
		// Only a copy on the same host is a duplicate whose links need not
		// be followed (URL variants, session ids, mirrors within a site).
		// Pages of one template on different sites read alike but link to
		// different places: their links must be followed.
		if host, _ := hostDomain(first); host != t.host {
			kind, first = seenNew, ""
		}
	}
	if _, err := exec(ctx, d.st.q.fpIns, t.url, exact[:], int64(r.Simhash), r.Words, first); err != nil {
		return false, err
	}
	if kind == seenNew {
		return false, nil
	}
	d.run.duplicates++
	d.log.Debug("duplicate of "+first, "url", t.url, "host", t.host, "first", first, "match", kind.String(), "distance", dist)
	return true, nil
}

// loadFingerprints sets up the content-seen test and replays the
// fingerprints the state holds, in the order they were first checked,
// which rebuilds the index a previous process had (see contentSeen).
func (d *Dispatcher) loadFingerprints(ctx context.Context) error {
	d.seen = newContentSeen()
	rows, err := query(ctx, d.st.q.fpAll)
	if err != nil {
		return fmt.Errorf("dispatcher: state fingerprints: %w", err)
	}
	defer rows.Close()
	bad := 0
	for rows.Next() {
		var u string
		var exact []byte
		var sim int64
		var words int
		if err := rows.Scan(&u, &exact, &sim, &words); err != nil {
			return fmt.Errorf("dispatcher: state fingerprints: %w", err)
		}
		if len(exact) != 16 {
			bad++
			continue
		}
		d.seen.check(u, words, [16]byte(exact), uint64(sim))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: state fingerprints: %w", err)
	}
	if bad > 0 {
		d.log.Warn("malformed fingerprints in the state skipped", "count", bad)
	}
	return nil
}
