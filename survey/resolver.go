package survey

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// DNS outcome classes of a domain that did not resolve. Append only:
// they are written in survey rows.
const (
	DNSNXDomain = "nxdomain" // the name does not exist
	DNSServFail = "servfail" // the server failed to answer (a broken delegation, DNSSEC failure, …)
	DNSTimeout  = "dns-timeout"
	DNSRefused  = "refused"
	DNSNoData   = "nodata" // the name exists but has no A or AAAA record
	DNSError    = "dns-error"
)

// maxCNAMEs bounds a CNAME chain; a longer one is a loop or an abuse.
const maxCNAMEs = 8

// Answer is what DNS said about one domain. Class is "" when the domain
// has at least one address.
type Answer struct {
	Class  string   `json:"class,omitempty"`
	Rcode  string   `json:"rcode,omitempty"`
	Error  string   `json:"error,omitempty"`
	CNAMEs []string `json:"cname,omitempty"` // the chain, in order, from the domain to the name holding the addresses
	IPs    []string `json:"ips,omitempty"`   // A then AAAA, each sorted
	NS     []string `json:"ns,omitempty"`    // the name servers of the domain's zone, sorted
	TTL    uint32   `json:"ttl"`             // the smallest TTL of the records the answer is made of
}

// Addrs returns the answer's addresses.
func (a Answer) Addrs() []netip.Addr {
	var out []netip.Addr
	for _, s := range a.IPs {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

// Resolver asks one DNS server, over UDP with TCP on truncation, and keeps
// apart what the standard resolver merges: a name that does not exist, a
// server that failed, and no answer in time.
type Resolver struct {
	server  string
	timeout time.Duration
	udp     *dns.Client
	tcp     *dns.Client
}

// DefaultDNSTimeout bounds one query; a lookup makes a few.
const DefaultDNSTimeout = 3 * time.Second

// NewResolver asks server (ip:port); "" reads the first nameserver of
// /etc/resolv.conf.
func NewResolver(server string, timeout time.Duration) (*Resolver, error) {
	if timeout <= 0 {
		timeout = DefaultDNSTimeout
	}
	if server == "" {
		cc, err := dns.ClientConfigFromFile("/etc/resolv.conf")
		if err != nil || len(cc.Servers) == 0 {
			return nil, fmt.Errorf("survey: no DNS server: /etc/resolv.conf: %v (give --resolver IP:PORT)", err)
		}
		server = net.JoinHostPort(cc.Servers[0], cc.Port)
	}
	if _, err := netip.ParseAddrPort(server); err != nil {
		return nil, fmt.Errorf("survey: resolver %q: want IP:PORT", server)
	}
	return &Resolver{
		server:  server,
		timeout: timeout,
		udp:     &dns.Client{Net: "udp", Timeout: timeout},
		tcp:     &dns.Client{Net: "tcp", Timeout: timeout},
	}, nil
}

// Server is the ip:port asked.
func (r *Resolver) Server() string { return r.server }

// Lookup resolves domain: A (following CNAMEs), AAAA, and the NS of its
// zone. A failure of the NS query alone leaves NS empty; the domain's
// class comes from its addresses.
func (r *Resolver) Lookup(ctx context.Context, domain string) Answer {
	name := dns.Fqdn(strings.ToLower(domain))
	var a Answer
	ttl := uint32(0)
	keep := func(t uint32) {
		if ttl == 0 || t < ttl {
			ttl = t
		}
	}

	target, v4, fail := r.addresses(ctx, name, dns.TypeA, &a, keep)
	if fail != nil {
		return *fail
	}
	_, v6, fail := r.addresses(ctx, target, dns.TypeAAAA, nil, keep)
	if fail != nil && len(v4) == 0 {
		return *fail
	}
	slices.SortFunc(v4, netip.Addr.Compare)
	slices.SortFunc(v6, netip.Addr.Compare)
	for _, ip := range append(v4, v6...) {
		a.IPs = append(a.IPs, ip.String())
	}
	if len(a.IPs) == 0 {
		a.Class, a.Rcode = DNSNoData, "NOERROR"
	}
	a.NS = r.nameServers(ctx, name, keep)
	a.TTL = ttl
	return a
}

// addresses asks for qtype records of name, following a CNAME chain
// through the answers and, where a server gives a CNAME without its
// target's records, through further queries. It returns the name that
// holds the records and the addresses, or the failed Answer. chain, when
// not nil, gets the CNAMEs met.
func (r *Resolver) addresses(ctx context.Context, name string, qtype uint16, chain *Answer, keep func(uint32)) (string, []netip.Addr, *Answer) {
	hops := 0
	for {
		msg, fail := r.ask(ctx, name, qtype)
		if fail != nil {
			return name, nil, fail
		}
		type cname struct {
			target string
			ttl    uint32
		}
		cnames := map[string]cname{}
		addrs := map[string][]netip.Addr{}
		ttls := map[string]uint32{}
		for _, rr := range msg.Answer {
			h := rr.Header()
			owner := strings.ToLower(h.Name)
			switch v := rr.(type) {
			case *dns.CNAME:
				cnames[owner] = cname{dns.Fqdn(strings.ToLower(v.Target)), h.Ttl}
			case *dns.A:
				if ip, ok := netip.AddrFromSlice(v.A.To4()); ok {
					addrs[owner] = append(addrs[owner], ip)
					ttls[owner] = h.Ttl
				}
			case *dns.AAAA:
				if ip, ok := netip.AddrFromSlice(v.AAAA.To16()); ok {
					addrs[owner] = append(addrs[owner], ip)
					ttls[owner] = h.Ttl
				}
			}
		}
		followed := false
		for {
			if ips := addrs[name]; len(ips) > 0 {
				keep(ttls[name])
				return name, ips, nil
			}
			c, ok := cnames[name]
			if !ok {
				break
			}
			if hops++; hops > maxCNAMEs {
				return name, nil, &Answer{Class: DNSError, Error: fmt.Sprintf("CNAME chain longer than %d", maxCNAMEs)}
			}
			keep(c.ttl)
			if chain != nil {
				chain.CNAMEs = append(chain.CNAMEs, strings.TrimSuffix(c.target, "."))
			}
			name, followed = c.target, true
		}
		if !followed {
			return name, nil, nil // no records of this type
		}
		// The server gave the CNAME but not what it points to: ask for
		// the target.
	}
}

// nameServers returns the NS of name's zone: the NS at name, else at the
// zone apex the SOA of a negative answer names.
func (r *Resolver) nameServers(ctx context.Context, name string, keep func(uint32)) []string {
	for range 2 {
		msg, fail := r.ask(ctx, name, dns.TypeNS)
		if fail != nil {
			return nil
		}
		var ns []string
		apex := ""
		for _, rr := range msg.Answer {
			if v, ok := rr.(*dns.NS); ok {
				ns = append(ns, strings.ToLower(strings.TrimSuffix(v.Ns, ".")))
			}
		}
		for _, rr := range msg.Ns {
			if v, ok := rr.(*dns.SOA); ok {
				apex = v.Hdr.Name
			}
		}
		if len(ns) > 0 {
			slices.Sort(ns)
			return slices.Compact(ns)
		}
		if apex == "" || strings.EqualFold(apex, name) {
			return nil
		}
		name = apex
	}
	return nil
}

// ask sends one query, retrying once on a timeout and over TCP when the
// UDP answer was truncated. A failure comes back as an Answer with its
// class.
func (r *Resolver) ask(ctx context.Context, name string, qtype uint16) (*dns.Msg, *Answer) {
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	q.RecursionDesired = true
	q.SetEdns0(1232, false)
	var last error
	for attempt := 0; attempt < 2; attempt++ {
		msg, _, err := r.udp.ExchangeContext(ctx, q, r.server)
		if err == nil && msg.Truncated {
			msg, _, err = r.tcp.ExchangeContext(ctx, q, r.server)
		}
		if err == nil {
			return msg, rcodeFail(msg)
		}
		last = err
		if ctx.Err() != nil || !isTimeoutErr(err) {
			break
		}
	}
	if isTimeoutErr(last) || errors.Is(last, context.DeadlineExceeded) {
		return nil, &Answer{Class: DNSTimeout, Error: fmt.Sprintf("no answer from %s within %v", r.server, r.timeout)}
	}
	return nil, &Answer{Class: DNSError, Error: last.Error()}
}

// rcodeFail is the failed Answer an answer's rcode means, nil for NOERROR.
func rcodeFail(m *dns.Msg) *Answer {
	rc := dns.RcodeToString[m.Rcode]
	switch m.Rcode {
	case dns.RcodeSuccess:
		return nil
	case dns.RcodeNameError:
		return &Answer{Class: DNSNXDomain, Rcode: rc, TTL: negativeTTL(m)}
	case dns.RcodeServerFailure:
		return &Answer{Class: DNSServFail, Rcode: rc}
	case dns.RcodeRefused:
		return &Answer{Class: DNSRefused, Rcode: rc}
	}
	if rc == "" {
		rc = fmt.Sprint(m.Rcode)
	}
	return &Answer{Class: DNSError, Rcode: rc, Error: "rcode " + rc}
}

// negativeTTL is how long a negative answer may be cached (RFC 2308: the
// SOA's TTL or minimum, whichever is less).
func negativeTTL(m *dns.Msg) uint32 {
	for _, rr := range m.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			return min(soa.Hdr.Ttl, soa.Minttl)
		}
	}
	return 0
}

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
