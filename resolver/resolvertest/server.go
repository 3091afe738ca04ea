// Package resolvertest runs a small authoritative DNS server on loopback
// (UDP and TCP on one port) for tests and benchmarks: a zone of names and
// addresses, and the faults a real resolver shows (silence, SERVFAIL,
// dropped queries, random loss, a rate it cannot exceed, truncation, huge
// answers). It counts the queries of every question it was asked.
package resolvertest

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Server is a DNS server on 127.0.0.1. Set its zone and faults before the
// first query that should see them; they are read under its lock.
type Server struct {
	Addr string // ip:port, UDP and TCP

	udp, tcp *dns.Server

	mu       sync.Mutex
	zone     map[string][]netip.Addr // fqdn, lower case → addresses
	cnames   map[string]string
	servfail map[string]bool
	silent   map[string]bool
	ttl      uint32
	negTTL   uint32
	truncate bool       // answer UDP with TC set and no records
	dropOdd  bool       // drop every other query
	lose     float64    // share of queries dropped at random
	rng      *rand.Rand // decides which
	rate     float64
	tokens   float64
	last     time.Time
	seen     int64
	asked    map[string]int // "name/TYPE" → queries
	queries  atomic.Int64
	dropped  atomic.Int64
}

// Start runs a server until Close.
func Start() (*Server, error) {
	pc, ln, err := listen()
	if err != nil {
		return nil, err
	}
	s := &Server{
		Addr: pc.LocalAddr().String(), zone: map[string][]netip.Addr{}, cnames: map[string]string{},
		servfail: map[string]bool{}, silent: map[string]bool{}, asked: map[string]int{}, ttl: 300, negTTL: 60,
	}
	h := dns.HandlerFunc(s.serve)
	var up sync.WaitGroup
	up.Add(2)
	s.udp = &dns.Server{PacketConn: pc, Handler: h, NotifyStartedFunc: up.Done}
	s.tcp = &dns.Server{Listener: ln, Handler: h, NotifyStartedFunc: up.Done}
	go s.udp.ActivateAndServe()
	go s.tcp.ActivateAndServe()
	up.Wait()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() {
	s.udp.Shutdown()
	s.tcp.Shutdown()
}

// listen takes a UDP port and the same TCP port, trying other ports
// while the TCP one is taken.
func listen() (net.PacketConn, net.Listener, error) {
	var last error
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		last = err
	}
	return nil, nil, last
}

func fqdn(name string) string { return dns.Fqdn(strings.ToLower(name)) }

// Add gives name the addresses.
func (s *Server) Add(name string, addrs ...netip.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.zone[fqdn(name)] = append(s.zone[fqdn(name)], addrs...)
}

// CNAME makes name an alias of target.
func (s *Server) CNAME(name, target string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cnames[fqdn(name)] = fqdn(target)
}

// ServFail answers SERVFAIL for name.
func (s *Server) ServFail(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servfail[fqdn(name)] = true
}

// Silent never answers name.
func (s *Server) Silent(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.silent[fqdn(name)] = true
}

// SetTTL sets the TTL of answers and the negative TTL of the SOA.
func (s *Server) SetTTL(ttl, negTTL uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ttl, s.negTTL = ttl, negTTL
}

// Truncate answers every UDP query truncated, as a server does whose
// answer does not fit: the client must ask again over TCP.
func (s *Server) Truncate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.truncate = true
}

// DropEveryOther drops every second query, UDP and TCP alike.
func (s *Server) DropEveryOther() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropOdd = true
}

// Lose drops each query with probability share, at random (from seed),
// whatever the rate: the loss of a bad path, not of a busy server.
func (s *Server) Lose(share float64, seed uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose, s.rng = share, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// Limit answers at most perSecond queries a second (a bucket of a tenth
// of a second's worth) and drops the rest, as a busy resolver does.
func (s *Server) Limit(perSecond float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rate, s.tokens, s.last = perSecond, perSecond/10, time.Now()
}

// Queries is the number of queries received, dropped ones included.
func (s *Server) Queries() int64 { return s.queries.Load() }

// Dropped is the number of queries not answered on purpose.
func (s *Server) Dropped() int64 { return s.dropped.Load() }

// Asked returns the queries received per question ("name./A").
func (s *Server) Asked() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.asked))
	for k, v := range s.asked {
		out[k] = v
	}
	return out
}

// drop decides whether to answer this query. Callers hold mu.
func (s *Server) drop() bool {
	s.seen++
	if s.dropOdd && s.seen%2 == 0 {
		return true
	}
	if s.lose > 0 && s.rng.Float64() < s.lose {
		return true
	}
	if s.rate > 0 {
		now := time.Now()
		s.tokens = min(s.rate/10, s.tokens+now.Sub(s.last).Seconds()*s.rate)
		s.last = now
		if s.tokens < 1 {
			return true
		}
		s.tokens--
	}
	return false
}

func (s *Server) serve(w dns.ResponseWriter, q *dns.Msg) {
	s.queries.Add(1)
	if len(q.Question) != 1 {
		m := new(dns.Msg)
		m.SetRcode(q, dns.RcodeFormatError)
		w.WriteMsg(m)
		return
	}
	question := q.Question[0]
	name := strings.ToLower(question.Name)
	_, isTCP := w.RemoteAddr().(*net.TCPAddr)
	s.mu.Lock()
	s.asked[name+"/"+dns.TypeToString[question.Qtype]]++
	if s.silent[name] || s.drop() {
		s.mu.Unlock()
		s.dropped.Add(1)
		return
	}
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: "test.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: s.negTTL},
		Ns: "ns.test.", Mbox: "hostmaster.test.", Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: s.negTTL}
	switch {
	case s.truncate && !isTCP:
		m.Truncated = true
	case s.servfail[name]:
		m.Rcode = dns.RcodeServerFailure
	default:
		owner := name
		for hops := 0; hops < 10; hops++ {
			t, ok := s.cnames[owner]
			if !ok {
				break
			}
			m.Answer = append(m.Answer, &dns.CNAME{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: s.ttl}, Target: t})
			owner = t
		}
		addrs, known := s.zone[owner]
		for _, a := range addrs {
			hdr := dns.RR_Header{Name: owner, Class: dns.ClassINET, Ttl: s.ttl}
			switch {
			case a.Is4() && question.Qtype == dns.TypeA:
				hdr.Rrtype = dns.TypeA
				m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
			case a.Is6() && question.Qtype == dns.TypeAAAA:
				hdr.Rrtype = dns.TypeAAAA
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
			}
		}
		switch {
		case !known && len(m.Answer) == 0:
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{soa}
		case len(m.Answer) == 0 || (len(m.Answer) > 0 && m.Answer[len(m.Answer)-1].Header().Rrtype == dns.TypeCNAME && !known):
			m.Ns = []dns.RR{soa}
		}
	}
	s.mu.Unlock()
	if !isTCP {
		size := dns.MinMsgSize
		if o := q.IsEdns0(); o != nil {
			size = int(o.UDPSize())
		}
		m.Truncate(size)
	}
	w.WriteMsg(m)
}
