package survey

import (
	"math/rand/v2"
	"net/netip"
)

// Random draws IPv4 addresses uniformly from the routable space without
// repeating one: it walks a keyed permutation of the whole 32-bit space (a
// Feistel network, a bijection whatever its round function) and skips
// every address in the IANA special-purpose ranges or on the blocklist.
// The same seed and blocklist give the same sequence, so a sample can be
// drawn again; a run that resumes re-draws the same addresses instead of
// storing them. Each draw costs a few dozen nanoseconds, and the
// special-purpose ranges are about 14% of the space, so skipping costs
// little.
type Random struct {
	keys    [feistelRounds]uint64
	next    uint64 // index into the permutation of the next draw
	exclude v4Set
}

// feistelRounds: four rounds of a keyed bijection make a pseudorandom
// permutation (Luby–Rackoff); six leave a margin for a weak round function.
const feistelRounds = 6

// NewRandom returns the generator for seed, skipping the special-purpose
// ranges and every IPv4 range of bl.
func NewRandom(seed uint64, bl Blocklist) *Random {
	r := &Random{exclude: makeV4Set(append(append([]span(nil), specialSet...), bl.v4...))}
	for i := range r.keys {
		r.keys[i] = splitmix(seed + uint64(i)*0x9e3779b97f4a7c15)
	}
	return r
}

// Next returns the next address, false once the space is exhausted.
func (r *Random) Next() (netip.Addr, bool) {
	for r.next < 1<<32 {
		x := r.permute(uint32(r.next))
		r.next++
		if !r.exclude.contains(x) {
			return addrOf(x), true
		}
	}
	return netip.Addr{}, false
}

// Allowed is how many addresses the generator can yield in all.
func (r *Random) Allowed() uint64 { return 1<<32 - r.exclude.size() }

func (r *Random) permute(x uint32) uint32 {
	l, rr := x>>16, x&0xffff
	for _, k := range r.keys {
		l, rr = rr, l^uint32(splitmix(uint64(rr)^k)&0xffff)
	}
	return l<<16 | rr
}

// splitmix is SplitMix64's output function: a strong 64-bit mixer.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// randomSeed picks a seed when the user gave none, so the run can print it
// and be drawn again.
func randomSeed() uint64 { return rand.Uint64() }
