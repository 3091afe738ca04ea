package resolver

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// reply is what one DNS answer says about the name asked: the CNAMEs it
// leads through, and the addresses of the name at the end, if the answer
// holds them.
type reply struct {
	name   string       // the owner of ips, or the last CNAME target (which the answer does not resolve)
	ips    []netip.Addr // of name, at most the max given
	ttl    uint32       // of ips
	cnames []cnameHop   // followed from the name asked, in order
}

type cnameHop struct {
	target string // fully qualified, lower case
	ttl    uint32
}

// readReply follows name through msg's answer section: its CNAMEs (at most
// hops of them; ok is false past that: a loop or an abuse), then the A and
// AAAA records of the name they lead to, keeping at most max. Records of
// other owners are ignored, so an answer cannot give addresses for a
// name that was not asked.
func readReply(msg *dns.Msg, name string, max, hops int) (r reply, ok bool) {
	cnames := map[string]cnameHop{}
	addrs := map[string][]netip.Addr{}
	ttls := map[string]uint32{}
	for _, rr := range msg.Answer {
		h := rr.Header()
		owner := strings.ToLower(h.Name)
		var ip netip.Addr
		switch v := rr.(type) {
		case *dns.CNAME:
			cnames[owner] = cnameHop{dns.Fqdn(strings.ToLower(v.Target)), h.Ttl}
			continue
		case *dns.A:
			ip, ok = netip.AddrFromSlice(v.A.To4())
		case *dns.AAAA:
			ip, ok = netip.AddrFromSlice(v.AAAA.To16())
		default:
			continue
		}
		if ok && len(addrs[owner]) < max {
			addrs[owner] = append(addrs[owner], ip)
			ttls[owner] = h.Ttl
		}
	}
	r.name = strings.ToLower(name)
	for {
		if ips := addrs[r.name]; len(ips) > 0 {
			r.ips, r.ttl = ips, ttls[r.name]
			return r, true
		}
		c, found := cnames[r.name]
		if !found {
			return r, true
		}
		if len(r.cnames) == hops {
			return r, false
		}
		r.cnames = append(r.cnames, c)
		r.name = c.target
	}
}
