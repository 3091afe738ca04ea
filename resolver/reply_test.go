package resolver

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// FuzzReadReply: whatever a server answers (fed as wire bytes), reading it
// keeps at most the addresses and CNAME hops it was allowed, and only
// addresses the answer gives for the name the chain ends at.
func FuzzReadReply(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		msg := new(dns.Msg)
		if msg.Unpack(data) != nil || len(msg.Question) == 0 {
			return
		}
		const maxAddrs, hops = 4, 3
		r, ok := readReply(msg, msg.Question[0].Name, maxAddrs, hops)
		if len(r.ips) > maxAddrs || len(r.cnames) > hops || (!ok && len(r.cnames) != hops) {
			t.Fatalf("reply %+v (ok %v) past its bounds", r, ok)
		}
		var owned []netip.Addr
		for _, rr := range msg.Answer {
			if !strings.EqualFold(rr.Header().Name, r.name) {
				continue
			}
			switch v := rr.(type) {
			case *dns.A:
				if ip, ok := netip.AddrFromSlice(v.A.To4()); ok {
					owned = append(owned, ip)
				}
			case *dns.AAAA:
				if ip, ok := netip.AddrFromSlice(v.AAAA.To16()); ok {
					owned = append(owned, ip)
				}
			}
		}
		for _, ip := range r.ips {
			if !slices.Contains(owned, ip) {
				t.Fatalf("address %s is not %s's in the answer", ip, r.name)
			}
		}
	})
}
