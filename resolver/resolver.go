package resolver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Defaults for the zero values of Config.
const (
	DefaultTimeout     = 2 * time.Second
	DefaultAttempts    = 3
	DefaultMaxInFlight = 64
	DefaultMaxAddrs    = 32
)

// maxCNAMEs bounds a CNAME chain; a longer one is a loop or an abuse.
const maxCNAMEs = 8

// Config says which servers a Resolver asks and how.
type Config struct {
	// Servers are the ip:port asked; a query goes to the next one after
	// a time-out. Empty reads the nameservers of /etc/resolv.conf.
	Servers []string
	// Timeout bounds one query; Attempts bounds the queries of one
	// question (the first and its retries after time-outs), except on a
	// path shown to lose queries at random, where a question may take as
	// many as make losing them all unlikely, up to 20 (loss.go).
	Timeout  time.Duration
	Attempts int
	// MaxInFlight bounds the queries in flight to each server.
	MaxInFlight int
	// NS also asks for the name servers of each name's zone (the survey
	// groups by them). BothFamilies asks AAAA even of a name with A
	// records; without it AAAA is asked only of a name without (a crawl
	// dials the first address that answers, IPv4 first).
	NS           bool
	BothFamilies bool
	// MaxAddrs bounds the addresses kept of one answer: a name with
	// hundreds of records is a broken or hostile zone, not a bigger host.
	MaxAddrs int
}

// Resolver sends DNS queries, bounded and adaptive per server, and keeps
// apart what the standard resolver merges: a name that does not exist, a
// server that failed, and no answer in time. It remembers nothing; a Cache
// does.
type Resolver struct {
	cfg     Config
	servers []*server
	udp     *dns.Client
	tcp     *dns.Client
	next    atomic.Uint64 // round-robin start

	queries, answers, timeouts, truncated atomic.Int64
	latency                               atomic.Int64 // nanoseconds, summed over answers
}

type server struct {
	addr string
	lim  *limiter
}

// New builds a Resolver. A server that is not ip:port is refused.
func New(cfg Config) (*Resolver, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxAddrs <= 0 {
		cfg.MaxAddrs = DefaultMaxAddrs
	}
	servers := slices.Clone(cfg.Servers)
	if len(servers) == 0 {
		cc, err := dns.ClientConfigFromFile("/etc/resolv.conf")
		if err != nil || len(cc.Servers) == 0 {
			return nil, fmt.Errorf("resolver: no DNS server: /etc/resolv.conf: %v (give --resolver IP:PORT)", err)
		}
		for _, s := range cc.Servers {
			servers = append(servers, net.JoinHostPort(s, cc.Port))
		}
	}
	r := &Resolver{
		cfg: cfg,
		udp: &dns.Client{Net: "udp", Timeout: cfg.Timeout, UDPSize: 1232},
		tcp: &dns.Client{Net: "tcp", Timeout: cfg.Timeout},
	}
	for _, s := range servers {
		if _, err := netip.ParseAddrPort(s); err != nil {
			return nil, fmt.Errorf("resolver: server %q: want IP:PORT", s)
		}
		r.servers = append(r.servers, &server{addr: s, lim: newLimiter(cfg.MaxInFlight)})
	}
	return r, nil
}

// Servers are the ip:port asked.
func (r *Resolver) Servers() []string {
	out := make([]string, len(r.servers))
	for i, s := range r.servers {
		out[i] = s.addr
	}
	return out
}

// Lookup resolves name: A (following CNAMEs), AAAA (see
// Config.BothFamilies) and, with Config.NS, the NS of its zone. A failure
// of the NS query alone leaves NS empty; the class comes from the
// addresses.
func (r *Resolver) Lookup(ctx context.Context, name string) Answer {
	fqdn := dns.Fqdn(strings.ToLower(name))
	var a Answer
	ttl := uint32(0)
	keep := func(t uint32) {
		if ttl == 0 || t < ttl {
			ttl = t
		}
	}
	var nodata uint32
	target, v4, fail := r.addresses(ctx, fqdn, dns.TypeA, &a, keep, &nodata)
	if fail != nil {
		return *fail
	}
	var v6 []netip.Addr
	if len(v4) == 0 || r.cfg.BothFamilies {
		_, v6, fail = r.addresses(ctx, target, dns.TypeAAAA, nil, keep, &nodata)
		if fail != nil && len(v4) == 0 {
			return *fail
		}
	}
	slices.SortFunc(v4, netip.Addr.Compare)
	slices.SortFunc(v6, netip.Addr.Compare)
	for _, ip := range append(v4, v6...) {
		if len(a.IPs) == r.cfg.MaxAddrs {
			break
		}
		a.IPs = append(a.IPs, ip.String())
	}
	if len(a.IPs) == 0 {
		a.Class, a.Rcode = ClassNoData, "NOERROR"
		ttl = nodata
	}
	if r.cfg.NS {
		a.NS = r.nameServers(ctx, fqdn, keep)
	}
	a.TTL = ttl
	return a
}

// addresses asks for qtype records of name, following a CNAME chain
// through the answers and, where a server gives a CNAME without its
// target's records, through further queries. It returns the name that
// holds the records and the addresses, or the failed Answer. chain, when
// not nil, gets the CNAMEs met; nodata the negative TTL of an answer
// without records.
func (r *Resolver) addresses(ctx context.Context, name string, qtype uint16, chain *Answer, keep func(uint32), nodata *uint32) (string, []netip.Addr, *Answer) {
	hops := 0
	for {
		msg, fail := r.ask(ctx, name, qtype)
		if fail != nil {
			return name, nil, fail
		}
		rep, ok := readReply(msg, name, r.cfg.MaxAddrs, maxCNAMEs-hops)
		for _, c := range rep.cnames {
			keep(c.ttl)
			if chain != nil {
				chain.CNAMEs = append(chain.CNAMEs, strings.TrimSuffix(c.target, "."))
			}
		}
		if !ok {
			return name, nil, &Answer{Class: ClassError, Error: fmt.Sprintf("CNAME chain longer than %d", maxCNAMEs)}
		}
		hops += len(rep.cnames)
		name = rep.name
		if len(rep.ips) > 0 {
			keep(rep.ttl)
			return name, rep.ips, nil
		}
		if len(rep.cnames) == 0 {
			*nodata = negativeTTL(msg) // no records of this type: how long that holds
			return name, nil, nil
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
			if v, ok := rr.(*dns.NS); ok && len(ns) < r.cfg.MaxAddrs {
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

// ask sends one question, to the servers in turn, at most Attempts times
// while it times out; over TCP when the UDP answer was truncated. A
// failure comes back as an Answer with its class.
func (r *Resolver) ask(ctx context.Context, name string, qtype uint16) (*dns.Msg, *Answer) {
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	q.RecursionDesired = true
	q.SetEdns0(1232, false)
	start := r.next.Add(1)
	var last error
	var lastServer string
	attempts, made := r.cfg.Attempts, 0
	for attempt := 0; attempt < attempts; attempt++ {
		s := r.servers[(start+uint64(attempt))%uint64(len(r.servers))]
		// A server on a path that loses queries at random is given
		// more of them (loss.go).
		attempts = max(attempts, s.lim.attempts(r.cfg.Attempts))
		made++
		msg, err := r.exchange(ctx, s, q, attempt, attempts)
		if err == nil {
			return msg, rcodeFail(msg)
		}
		last, lastServer = err, s.addr
		if ctx.Err() != nil || !isTimeoutErr(err) {
			break
		}
		// The path may have shown itself lossy while this query waited.
		attempts = max(attempts, s.lim.attempts(r.cfg.Attempts))
	}
	switch {
	case ctx.Err() != nil:
		a := cutShort(ctx)
		return nil, &a
	case isTimeoutErr(last):
		return nil, &Answer{Class: ClassTimeout, Error: fmt.Sprintf("no answer from %s after %d queries, the last waiting %v", lastServer, made, r.cfg.Timeout)}
	}
	return nil, &Answer{Class: ClassError, Error: last.Error()}
}

// exchange sends q to s once, within s's limiter, as attempt (0 the
// first) of attempts of the question, waiting for the answer as long as
// the limiter says.
func (r *Resolver) exchange(ctx context.Context, s *server, q *dns.Msg, attempt, attempts int) (*dns.Msg, error) {
	sent, err := s.lim.acquire(ctx)
	if err != nil {
		return nil, err
	}
	wait := s.lim.timeout(attempt, attempts, r.cfg.Timeout)
	r.queries.Add(1)
	qctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	msg, _, err := r.udp.ExchangeContext(qctx, q, s.addr)
	if err == nil && msg.Truncated {
		r.truncated.Add(1)
		msg, _, err = r.tcp.ExchangeContext(qctx, q, s.addr)
	}
	if err != nil && ctx.Err() == nil && qctx.Err() != nil && !isTimeoutErr(err) {
		err = &timeoutError{wait}
	}
	timedOut := err != nil && isTimeoutErr(err) && ctx.Err() == nil
	s.lim.release(sent, timedOut)
	switch {
	case timedOut:
		r.timeouts.Add(1)
	case err == nil:
		r.answers.Add(1)
		r.latency.Add(int64(time.Since(sent)))
	}
	return msg, err
}

// cutShortText starts the Error of a look-up its caller gave up on.
const cutShortText = "look-up cut short: "

// cutShort is the answer of a look-up whose ctx ended: it says nothing
// about the name and is never cached.
func cutShort(ctx context.Context) Answer {
	return Answer{Class: ClassError, Error: cutShortText + context.Cause(ctx).Error()}
}

func isCutShort(a Answer) bool {
	return a.Class == ClassError && strings.HasPrefix(a.Error, cutShortText)
}

// rcodeFail is the failed Answer an answer's rcode means, nil for NOERROR.
func rcodeFail(m *dns.Msg) *Answer {
	rc := dns.RcodeToString[m.Rcode]
	switch m.Rcode {
	case dns.RcodeSuccess:
		return nil
	case dns.RcodeNameError:
		return &Answer{Class: ClassNXDomain, Rcode: rc, TTL: negativeTTL(m)}
	case dns.RcodeServerFailure:
		return &Answer{Class: ClassServFail, Rcode: rc}
	case dns.RcodeRefused:
		return &Answer{Class: ClassRefused, Rcode: rc}
	}
	if rc == "" {
		rc = fmt.Sprint(m.Rcode)
	}
	return &Answer{Class: ClassError, Rcode: rc, Error: "rcode " + rc}
}

// negativeTTL is how long a negative answer may be cached (RFC 2308: the
// SOA's TTL or minimum, whichever is less); 0 when it carries no SOA.
func negativeTTL(m *dns.Msg) uint32 {
	for _, rr := range m.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			return min(soa.Hdr.Ttl, soa.Minttl)
		}
	}
	return 0
}

// timeoutError is a query whose wait ended without an answer.
type timeoutError struct{ wait time.Duration }

func (e *timeoutError) Error() string   { return fmt.Sprintf("no answer within %v", e.wait) }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
