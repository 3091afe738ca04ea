package survey

import (
	_ "embed"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"backfill/fetch"
)

// specialV4 are the IANA special-purpose IPv4 ranges that a random draw
// never yields, whatever blocklist is in effect: they are wired into the
// generator, not read from a file a user could leave out.
var specialV4 = []string{
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
	"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
	"255.255.255.255/32",
}

//go:embed blocklist.txt
var defaultBlocklist string

// span is an inclusive range of IPv4 addresses as integers.
type span struct{ lo, hi uint32 }

// v4Set is a set of IPv4 addresses as sorted, disjoint, non-adjacent
// spans.
type v4Set []span

func v4Of(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func addrOf(x uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)})
}

func spanOf(p netip.Prefix) span {
	p = p.Masked()
	lo := v4Of(p.Addr())
	return span{lo, lo | uint32(uint64(1)<<(32-p.Bits())-1)}
}

// makeV4Set merges spans into a set.
func makeV4Set(spans []span) v4Set {
	s := slices.Clone(spans)
	sort.Slice(s, func(i, j int) bool { return s[i].lo < s[j].lo })
	var out v4Set
	for _, sp := range s {
		if n := len(out); n > 0 && uint64(sp.lo) <= uint64(out[n-1].hi)+1 {
			out[n-1].hi = max(out[n-1].hi, sp.hi)
			continue
		}
		out = append(out, sp)
	}
	return out
}

func (s v4Set) contains(x uint32) bool {
	i := sort.Search(len(s), func(i int) bool { return s[i].hi >= x })
	return i < len(s) && s[i].lo <= x
}

// size is how many addresses the set holds.
func (s v4Set) size() uint64 {
	var n uint64
	for _, sp := range s {
		n += uint64(sp.hi-sp.lo) + 1
	}
	return n
}

func mustV4Set(cidrs []string) v4Set {
	var spans []span
	for _, c := range cidrs {
		spans = append(spans, spanOf(netip.MustParsePrefix(c)))
	}
	return makeV4Set(spans)
}

var specialSet = mustV4Set(specialV4)

// Blocklist is what a survey never connects to: IP ranges (IPv4 kept as a
// span set, so a long list costs a binary search per address) and host
// names with their subdomains.
type Blocklist struct {
	v4      v4Set
	v6      []netip.Prefix
	hosts   []string
	sources []string // where the entries came from, for messages
}

// DefaultBlocklist is the blocklist shipped in the binary (blocklist.txt:
// the IANA special-purpose registries).
func DefaultBlocklist() Blocklist {
	bl, err := fetch.ParseBlacklist(strings.NewReader(defaultBlocklist), "default blocklist")
	if err != nil {
		panic(err) // the embedded file is part of the build and tested
	}
	var b Blocklist
	b.Add(bl, "the default blocklist")
	return b
}

// Add adds bl's entries to b; source names it in messages.
func (b *Blocklist) Add(bl fetch.Blacklist, source string) {
	var spans []span
	for _, sp := range b.v4 {
		spans = append(spans, sp)
	}
	for _, p := range bl.Prefixes {
		if p.Addr().Is4() {
			spans = append(spans, spanOf(p))
		} else {
			b.v6 = append(b.v6, p.Masked())
		}
	}
	b.v4 = makeV4Set(spans)
	for _, h := range bl.Hosts {
		b.hosts = append(b.hosts, h.Host)
	}
	b.sources = append(b.sources, source)
}

// Empty reports a blocklist with no entries: a survey of many addresses
// refuses to start with one.
func (b Blocklist) Empty() bool { return len(b.v4) == 0 && len(b.v6) == 0 && len(b.hosts) == 0 }

// Sources names what the blocklist was made of.
func (b Blocklist) Sources() []string { return b.sources }

// Blocks reports whether ip is on the blocklist.
func (b Blocklist) Blocks(ip netip.Addr) bool {
	ip = ip.Unmap()
	if ip.Is4() {
		return b.v4.contains(v4Of(ip))
	}
	for _, p := range b.v6 {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// BlocksHost reports whether host or a domain above it is on the list.
func (b Blocklist) BlocksHost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	for _, x := range b.hosts {
		if h == x || strings.HasSuffix(h, "."+x) {
			return true
		}
	}
	return false
}

// without is b less the addresses of p: the loopback range under
// --allow-loopback, so tests can survey 127.0.0.0/8 through the default
// blocklist.
func (b Blocklist) without(p netip.Prefix) Blocklist {
	if !p.Addr().Is4() {
		return b
	}
	cut := spanOf(p)
	var out v4Set
	for _, sp := range b.v4 {
		if sp.hi < cut.lo || sp.lo > cut.hi {
			out = append(out, sp)
			continue
		}
		if sp.lo < cut.lo {
			out = append(out, span{sp.lo, cut.lo - 1})
		}
		if sp.hi > cut.hi {
			out = append(out, span{cut.hi + 1, sp.hi})
		}
	}
	b.v4 = out
	return b
}

// special reports whether ip is in an IANA special-purpose range, and
// which.
func special(ip netip.Addr) (string, bool) {
	ip = ip.Unmap()
	if !ip.Is4() {
		return "", false
	}
	for _, c := range specialV4 {
		if p := netip.MustParsePrefix(c); p.Contains(ip) {
			return c, true
		}
	}
	return "", false
}

// blockedWhy says why the blocklist b refuses ip, or "".
func blockedWhy(b Blocklist, ip netip.Addr) string {
	if !b.Blocks(ip) {
		return ""
	}
	if c, ok := special(ip); ok {
		return fmt.Sprintf("on the blocklist (special-purpose %s)", c)
	}
	return "on the blocklist"
}
