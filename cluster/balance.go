package cluster

import (
	"maps"
	"math"
	"slices"
)

// Balancer assigns keys (the crawl's registrable domains, the survey's
// address blocks) to members: consistent hashing with
// bounded loads (Mirrokni, Thorup and Zadimoghaddam, "Consistent Hashing
// with Bounded Loads", 2018) on top of the ring.
//
// The ring alone splits domains as evenly as chance allows, which with a
// few hundred domains is not very: 400 domains over 4 supervisors went
// 106/110/92/92, so the busiest had 10 % more than its share and a crawl
// of equal domains ran 10 % longer than it needed. Here a domain goes to
// the first member clockwise from its hash, on the ring, that is under its
// cap: (1+LoadSlack) times its share of the domains assigned, shares in
// proportion to the members' capacities. No member then holds more than
// about 2 % above its share, whatever the number of domains.
//
// Assignments stick: a domain keeps its owner while the owner lives, so
// politeness (one owner per domain) and each supervisor's host caches are
// kept. When a member joins, a domain moves only if the new member comes
// before its owner on the domain's walk and is under its cap: about 1/n of
// the domains, all to the newcomer, as on a plain ring. When a member
// leaves, only its domains move, each to the first member under its cap on
// its walk.
//
// Only the domains with work in hand need an owner: the Balancer keeps the
// assignments of at most AssignedCap domains, and past that forgets those
// the caller reports idle (prune), so its memory is bounded by the
// frontier's window, not by the crawl.
type Balancer struct {
	ring     *ring
	capacity map[string]int // member → advertised capacity
	owner    map[string]string
	load     map[string]int
}

const (
	// LoadSlack is how far above its share a member may be assigned.
	LoadSlack = 0.02
	// AssignedCap bounds the assignments kept; see prune.
	AssignedCap = 1 << 16
)

func NewBalancer() *Balancer {
	return &Balancer{ring: newRing(0, nil), capacity: map[string]int{}, owner: map[string]string{}, load: map[string]int{}}
}

// cap is the most domains m may hold when total are assigned.
func (b *Balancer) cap(m string, total int) int {
	sum := 0
	for _, c := range b.capacity {
		sum += c
	}
	if sum == 0 {
		return 0
	}
	return int(math.Ceil((1 + LoadSlack) * float64(total) * float64(b.capacity[m]) / float64(sum)))
}

// walk calls fn with the members in the order domain's walk meets them,
// each once, until fn returns true.
func (b *Balancer) walk(domain string, fn func(m string) bool) {
	r := b.ring
	if r == nil || len(r.points) == 0 {
		return
	}
	lo := r.first(domain)
	met := make([]bool, len(r.members))
	left := len(r.members)
	for i := 0; i < len(r.points) && left > 0; i++ {
		o := r.owners[(lo+i)%len(r.points)]
		if met[o] {
			continue
		}
		met[o] = true
		left--
		if fn(r.members[o]) {
			return
		}
	}
}

// Route returns domain's owner, assigning it if it has none; "" when
// there are no members.
func (b *Balancer) Route(domain string) string {
	if m, ok := b.owner[domain]; ok {
		return m
	}
	total := len(b.owner) + 1
	owner := ""
	b.walk(domain, func(m string) bool {
		if owner == "" {
			owner = m // the ring's owner, should every member be full
		}
		if b.load[m] < b.cap(m, total) {
			owner = m
			return true
		}
		return false
	})
	if owner != "" {
		b.owner[domain] = owner
		b.load[owner]++
	}
	return owner
}

// Other is the first member on domain's walk of the ring that is none of
// not: the one that would own domain were they gone (caps aside); ""
// when there is none.
func (b *Balancer) Other(domain string, not ...string) string {
	other := ""
	b.walk(domain, func(m string) bool {
		if slices.Contains(not, m) {
			return false
		}
		other = m
		return true
	})
	return other
}

// Join adds member m (or updates its capacity) and moves to it the
// domains whose walk meets it before their owner, while it is under its
// cap. It reports how many moved.
func (b *Balancer) Join(m string, capacity int) int {
	_, had := b.capacity[m]
	b.capacity[m] = max(capacity, 1)
	if had {
		return 0
	}
	b.ring = b.ring.with(m)
	total := len(b.owner)
	moved := 0
	for _, d := range slices.Sorted(maps.Keys(b.owner)) {
		if b.load[m] >= b.cap(m, total) {
			break
		}
		cur := b.owner[d]
		b.walk(d, func(x string) bool {
			if x == m {
				b.load[cur]--
				b.load[m]++
				b.owner[d] = m
				moved++
				return true
			}
			return x == cur
		})
	}
	return moved
}

// Leave removes member m and reassigns its domains.
func (b *Balancer) Leave(m string) {
	if _, ok := b.capacity[m]; !ok {
		return
	}
	delete(b.capacity, m)
	delete(b.load, m)
	b.ring = b.ring.without(m)
	var orphans []string
	for d, o := range b.owner {
		if o == m {
			orphans = append(orphans, d)
			delete(b.owner, d)
		}
	}
	slices.Sort(orphans)
	for _, d := range orphans {
		b.Route(d)
	}
}

// Assigned is how many keys have an owner now.
func (b *Balancer) Assigned() int { return len(b.owner) }

// Prune forgets the assignments of domains that busy does not report,
// once more than AssignedCap are kept.
func (b *Balancer) Prune(busy func(domain string) bool) {
	if len(b.owner) <= AssignedCap {
		return
	}
	for d, m := range b.owner {
		if !busy(d) {
			delete(b.owner, d)
			b.load[m]--
		}
	}
}
