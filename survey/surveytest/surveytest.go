// Package surveytest runs a small synthetic Internet on loopback for the
// survey's tests and benchmarks: a DNS server (miekg/dns) answering a zone
// of domains that map to a few hundred 127.x addresses, and on each
// address an HTTP and an HTTPS server whose behaviour depends on the
// address: various Server headers, servers that refuse HEAD, redirect,
// hang, ports that refuse connections and ports that never accept them
// (filtered). Every domain's expected outcome is known (NameClass, Kind),
// and every request and connection is counted per address (Conns), so
// tests can check what a survey found and how politely it asked.
//
// What must time out does so by construction, not by being slower than
// a timeout: a hanging server never answers, a filtered port never
// accepts, a slow name is never answered (unless Options.SlowDNS says
// when). So a test can give its probes a timeout far longer than a
// loaded machine ever stalls, and still see every class.
//
// Only tests and benchmarks import it.
package surveytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Options size the zone.
type Options struct {
	Domains   int // default 2000
	Addresses int // default 200; at most MaxAddresses
	// SlowDNS is how long the slow names take to answer; 0 (the
	// default): they are never answered, as by a name server that is
	// down.
	SlowDNS time.Duration
	// Plain makes every address a normal server and every name resolve
	// (benchmarks of throughput, where timeouts would only measure the
	// timeout).
	Plain bool
	// Prompt leaves out what makes a survey wait out a timeout: hanging
	// and filtered addresses are normal servers, slow names answer at
	// once. Other failures stay (closed addresses, NXDOMAIN, SERVFAIL).
	// For tests whose point is not the timeouts, which then cost them
	// nothing.
	Prompt bool
}

// The zone's addresses are 127.1.B.1 to 127.1.B.20: BlockSize addresses
// in each /24, as a hosting company's customers share its range (and its
// name servers: NS). So a survey's per-/24 cap holds in several blocks
// at once, and every block has addresses of most kinds.
const (
	BlockSize    = 20
	MaxAddresses = 256 * BlockSize
)

// Kinds of address: what its servers do.
const (
	KindNormal    = "normal"      // answers HEAD
	KindNoHead    = "no-head"     // 405 to HEAD, answers GET
	KindToHTTPS   = "to-https"    // http redirects to https on the same host
	KindElsewhere = "elsewhere"   // redirects to another domain
	KindHang      = "hang"        // accepts, never answers
	KindClosed    = "closed"      // nothing listens: connection refused
	KindFiltered  = "filtered"    // a listener that never accepts: connect times out
	KindSelfSign  = "self-signed" // like normal, with a certificate no CA signed
)

// Domain classes of the zone.
const (
	NameNormal   = "normal"
	NameNX       = "nxdomain"
	NameServFail = "servfail"
	NameSlow     = "slow"
	NameCNAME    = "cname"
)

// servers are the Server headers addresses cycle through.
var servers = []string{"nginx/1.24.0", "Apache/2.4.58 (Debian)", "Microsoft-IIS/10.0", "nginx/1.18.0 (Ubuntu)", "LiteSpeed", "cloudflare"}

// Web is the running zone and servers.
type Web struct {
	DNS       string // ip:port of the DNS server (UDP and TCP)
	HTTPPort  int    // every address's HTTP port
	HTTPSPort int
	CA        *x509.CertPool // signs the HTTPS servers' certificates

	opt   Options
	addrs []netip.Addr
	kinds []string

	index map[netip.Addr]int // address → its j

	conns Conns
	done  chan struct{} // closed when the zone stops: what hangs lets go

	mu       sync.Mutex
	override map[string]netip.Addr // domain → address, set by SetA
	hits     map[netip.Addr]int    // requests per address
	queries  int
	asked    map[string]int // questions per name

	closers []func()
}

// Start runs the zone until the test ends.
func Start(tb testing.TB, opt Options) *Web {
	tb.Helper()
	if opt.Domains <= 0 {
		opt.Domains = 2000
	}
	if opt.Addresses <= 0 {
		opt.Addresses = 200
	}
	if opt.Addresses > MaxAddresses {
		tb.Fatalf("surveytest: at most %d addresses", MaxAddresses)
	}
	w := &Web{opt: opt, override: map[string]netip.Addr{}, hits: map[netip.Addr]int{}, asked: map[string]int{},
		index: map[netip.Addr]int{}, done: make(chan struct{})}
	tb.Cleanup(w.close)
	for j := range opt.Addresses {
		a := netip.AddrFrom4([4]byte{127, 1, byte(j / BlockSize), byte(j%BlockSize + 1)})
		w.addrs = append(w.addrs, a)
		w.index[a] = j
		k := kindOf(j)
		if opt.Plain || opt.Prompt && (k == KindHang || k == KindFiltered) {
			k = KindNormal
		}
		w.kinds = append(w.kinds, k)
	}
	tlsCfg, selfSigned, pool, err := certificates()
	if err != nil {
		tb.Fatal(err)
	}
	w.CA = pool
	if err := w.listenAll(tlsCfg, selfSigned); err != nil {
		tb.Fatal(err)
	}
	if err := w.startDNS(); err != nil {
		tb.Fatal(err)
	}
	return w
}

func kindOf(j int) string {
	switch {
	case j%50 == 9:
		return KindFiltered
	case j%10 == 9, j%10 == 8:
		return KindClosed
	case j%10 == 7:
		return KindHang
	case j%10 == 1:
		return KindNoHead
	case j%10 == 2:
		return KindToHTTPS
	case j%10 == 3:
		return KindElsewhere
	case j%10 == 4:
		return KindSelfSign
	}
	return KindNormal
}

func (w *Web) close() {
	close(w.done)
	w.stopAll()
}

// stopAll runs the closers, last first.
func (w *Web) stopAll() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
	w.closers = nil
}

// Domain is the name of domain i of the zone.
func Domain(i int) string { return fmt.Sprintf("d%05d.test", i) }

// NameClass is what the zone's DNS does with domain i.
func NameClass(i int) string {
	switch {
	case i%97 == 5:
		return NameNX
	case i%89 == 6:
		return NameServFail
	case i%83 == 7:
		return NameSlow
	case i%13 == 3:
		return NameCNAME
	}
	return NameNormal
}

// Class is what this zone's DNS does with domain i: NameClass, as the
// zone's options change it.
func (w *Web) Class(i int) string {
	c := NameClass(i)
	if w.opt.Plain || w.opt.Prompt && c == NameSlow {
		return NameNormal
	}
	return c
}

// Addr is the address domain i resolves to (before SetA).
func (w *Web) Addr(i int) netip.Addr {
	w.mu.Lock()
	defer w.mu.Unlock()
	if a, ok := w.override[Domain(i)]; ok {
		return a
	}
	return w.addrs[w.addrIndex(i)]
}

func (w *Web) addrIndex(i int) int { return (i * 7919) % len(w.addrs) }

// Kind is what the servers of a are.
func (w *Web) Kind(a netip.Addr) string {
	if j, ok := w.index[a]; ok {
		return w.kinds[j]
	}
	return ""
}

// Server is the Server header a's servers send.
func (w *Web) Server(a netip.Addr) string {
	return servers[w.index[a]%len(servers)]
}

// NS is the name servers of domain i: one group per /24 of addresses.
func (w *Web) NS(i int) []string {
	g := w.addrIndex(i) / BlockSize
	return []string{fmt.Sprintf("ns1.isp%02d.test", g), fmt.Sprintf("ns2.isp%02d.test", g)}
}

// Addresses lists the zone's addresses.
func (w *Web) Addresses() []netip.Addr { return append([]netip.Addr(nil), w.addrs...) }

// SetA makes domain resolve to a from now on.
func (w *Web) SetA(domain string, a netip.Addr) {
	w.mu.Lock()
	w.override[domain] = a
	w.mu.Unlock()
}

// Hits is the requests a's servers received.
func (w *Web) Hits(a netip.Addr) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hits[a]
}

// TotalHits is every request received.
func (w *Web) TotalHits() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, h := range w.hits {
		n += h
	}
	return n
}

// MaxConns is the most connections a's servers had open at once.
func (w *Web) MaxConns(a netip.Addr) int { return w.conns.Max(a) }

// MaxBlockConns is the most connections the servers of a's /24 had open
// at once.
func (w *Web) MaxBlockConns(a netip.Addr) int { return w.conns.MaxBlock(a) }

// Queries is how many DNS questions the server answered.
func (w *Web) Queries() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queries
}

// Asked is how many DNS questions named name.
func (w *Web) Asked(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.asked[name]
}

// WriteDomains writes the zone's domain list to path, one a line, with
// extra lines (comments, bad lines) after the first line.
func (w *Web) WriteDomains(path string, extra ...string) error {
	var b strings.Builder
	b.WriteString("# the test zone\n")
	for _, e := range extra {
		b.WriteString(e + "\n")
	}
	for i := range w.opt.Domains {
		b.WriteString(Domain(i) + "\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// listenAll binds every address's HTTP and HTTPS port, both the same
// number on every address (a survey asks port 80 and 443 of every host;
// here one free pair stands for them).
func (w *Web) listenAll(tlsCfg, selfSigned *tls.Config) error {
	for try := 0; try < 20; try++ {
		base := 20000 + int(time.Now().UnixNano()%20000)
		var lns []net.Listener
		ok := true
		for j, a := range w.addrs {
			for _, port := range []int{base, base + 1} {
				var ln net.Listener
				var err error
				switch w.kinds[j] {
				case KindClosed:
					continue
				case KindFiltered:
					ln, err = ListenFull(a, port)
				default:
					ln, err = net.Listen("tcp", netip.AddrPortFrom(a, uint16(port)).String())
				}
				if err != nil {
					ok = false
					break
				}
				lns = append(lns, ln)
				if w.kinds[j] == KindFiltered {
					w.closers = append(w.closers, func() { ln.Close() }) // and keeps it from the collector
					continue
				}
				if port == base+1 {
					cfg := tlsCfg
					if w.kinds[j] == KindSelfSign {
						cfg = selfSigned
					}
					ln = tls.NewListener(ln, cfg)
				}
				w.serve(ln, a, port == base+1)
			}
			if !ok {
				break
			}
		}
		if ok {
			w.HTTPPort, w.HTTPSPort = base, base+1
			return nil
		}
		for _, ln := range lns {
			ln.Close()
		}
		w.stopAll()
	}
	return errors.New("surveytest: no free port pair on every address")
}

func (w *Web) serve(ln net.Listener, a netip.Addr, https bool) {
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { w.handle(rw, r, a, https) }),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // probes that give up mid-handshake are expected
		ConnState: func(c net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				w.conns.Opened(a, c)
			case http.StateClosed, http.StateHijacked:
				w.conns.Closed(a, c)
			}
		},
	}
	go srv.Serve(ln)
	w.closers = append(w.closers, func() { srv.Close() }) // at once: hanging handlers are not waited for
}

func (w *Web) handle(rw http.ResponseWriter, r *http.Request, a netip.Addr, https bool) {
	w.mu.Lock()
	w.hits[a]++
	w.mu.Unlock()
	kind := w.Kind(a)
	rw.Header().Set("Server", w.Server(a))
	rw.Header().Set("X-Powered-By", "test/"+kind)
	host, _, _ := strings.Cut(r.Host, ":")
	switch {
	case kind == KindHang: // until the client gives up
		select {
		case <-r.Context().Done():
		case <-w.done:
		}
		return
	case kind == KindNoHead && r.Method == http.MethodHead:
		rw.WriteHeader(http.StatusMethodNotAllowed)
		return
	case kind == KindToHTTPS && !https:
		rw.Header().Set("Location", fmt.Sprintf("https://%s:%d/", host, w.HTTPSPort))
		rw.WriteHeader(http.StatusMovedPermanently)
		return
	case kind == KindElsewhere:
		rw.Header().Set("Location", "https://www.elsewhere.example/landing")
		rw.WriteHeader(http.StatusFound)
		return
	}
	rw.Header().Set("Content-Type", "text/html")
	if r.Method == http.MethodGet {
		rw.Header().Set("Content-Range", "bytes 0-5/6")
		rw.WriteHeader(http.StatusPartialContent)
		rw.Write([]byte("hello\n"))
		return
	}
	rw.WriteHeader(http.StatusOK)
}

// ListenFull opens a listener at a:port whose accept queue is full, so a
// new connection is never answered: the kernel drops its SYN, and a
// connect times out as on a filtered port.
func ListenFull(a netip.Addr, port int) (net.Listener, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: a.As4()}); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	if err := syscall.Listen(fd, 0); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "full-listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, err
	}
	// Fill the queue: connections that complete are held, until one does
	// not complete in time. The kernel queues a connection when its
	// handshake completes, whether or not the dial here hears of it in
	// time, so the queue is full however slowly this process runs: at
	// worst a dial that completed reports a timeout, and its connection
	// stays queued. A SYN to a full queue is dropped, every time.
	addr := netip.AddrPortFrom(a, uint16(port)).String()
	var held []net.Conn
	for range 16 {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			break
		}
		held = append(held, c)
	}
	return &fullListener{Listener: ln, held: held}, nil
}

// OpenPort listens on a free port of ip and accepts and closes every
// connection, until the test ends: an open port.
func OpenPort(tb testing.TB, ip string) int {
	tb.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// FilteredPort is a port of ip whose listener never accepts (ListenFull),
// until the test ends.
func FilteredPort(tb testing.TB, ip string) int {
	tb.Helper()
	for try := 0; try < 20; try++ {
		p := 40000 + int(time.Now().UnixNano()%20000)
		ln, err := ListenFull(netip.MustParseAddr(ip), p)
		if err == nil {
			tb.Cleanup(func() { ln.Close() })
			return p
		}
	}
	tb.Fatal("surveytest: no port for a filtered listener")
	return 0
}

type fullListener struct {
	net.Listener
	held []net.Conn
}

func (l *fullListener) Close() error {
	for _, c := range l.held {
		c.Close()
	}
	return l.Listener.Close()
}

// certificates makes a CA and a certificate it signs for every name of
// the zone, and a self-signed one.
func certificates() (signed, selfSigned *tls.Config, pool *x509.CertPool, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "backfill test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "*.test"},
		DNSNames: []string{"*.test", "*.hosting.test"}, NotBefore: now.Add(-time.Hour), NotAfter: LeafExpiry(now),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	selfTmpl := *leafTmpl
	selfTmpl.Subject = pkix.Name{CommonName: "self-signed.test"}
	selfDER, err := x509.CreateCertificate(rand.Reader, &selfTmpl, &selfTmpl, &leafKey.PublicKey, leafKey)
	if err != nil {
		return nil, nil, nil, err
	}
	selfSigned = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{selfDER}, PrivateKey: leafKey}}}
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER, caDER}, PrivateKey: leafKey}}}, selfSigned, pool, nil
}

// LeafExpiry is when the zone's certificates expire, for tests that check
// the recorded expiry: the next whole hour a week on.
func LeafExpiry(now time.Time) time.Time { return now.Add(7 * 24 * time.Hour).Truncate(time.Hour) }

// startDNS serves the zone on a free loopback UDP port and the same TCP
// port.
func (w *Web) startDNS() error {
	var pc net.PacketConn
	var ln net.Listener
	var addr string
	for try := 0; ; try++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			return err
		}
		addr = pc.LocalAddr().String()
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		pc.Close()
		if try == 20 {
			return err
		}
	}
	h := dns.HandlerFunc(w.answer)
	udp := &dns.Server{PacketConn: pc, Handler: h}
	tcp := &dns.Server{Listener: ln, Handler: h}
	go udp.ActivateAndServe()
	go tcp.ActivateAndServe()
	w.DNS = addr
	w.closers = append(w.closers, func() { udp.Shutdown(); tcp.Shutdown() })
	return nil
}

// zoneTTL is the TTL of every record: long, so the survey's cache floor
// and ceiling decide.
const zoneTTL = 3600

func (w *Web) answer(rw dns.ResponseWriter, q *dns.Msg) {
	w.mu.Lock()
	w.queries++
	if len(q.Question) > 0 {
		w.asked[strings.TrimSuffix(strings.ToLower(q.Question[0].Name), ".")]++
	}
	w.mu.Unlock()
	m := new(dns.Msg)
	m.SetReply(q)
	m.RecursionAvailable = true
	if len(q.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		rw.WriteMsg(m)
		return
	}
	qn := strings.ToLower(q.Question[0].Name)
	qt := q.Question[0].Qtype
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: "test.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: zoneTTL},
		Ns: "ns1.test.", Mbox: "hostmaster.test.", Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: 300}
	name := strings.TrimSuffix(qn, ".")
	var i int
	var addr netip.Addr
	switch {
	case strings.HasSuffix(name, ".hosting.test"): // CNAME targets: h<i>.hosting.test
		if _, err := fmt.Sscanf(name, "h%05d.hosting.test", &i); err != nil {
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{soa}
			rw.WriteMsg(m)
			return
		}
		addr = w.Addr(i)
	default:
		class := NameNormal
		_, err := fmt.Sscanf(name, "d%05d.test", &i)
		if err == nil {
			class = w.Class(i)
		}
		if err != nil || i >= w.opt.Domains || class == NameNX {
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{soa}
			rw.WriteMsg(m)
			return
		}
		switch class {
		case NameServFail:
			m.Rcode = dns.RcodeServerFailure
			rw.WriteMsg(m)
			return
		case NameSlow:
			if w.opt.SlowDNS <= 0 {
				<-w.done
				return // never answered
			}
			select {
			case <-time.After(w.opt.SlowDNS):
			case <-w.done:
				return
			}
		case NameCNAME:
			if qt == dns.TypeA || qt == dns.TypeAAAA {
				target := fmt.Sprintf("h%05d.hosting.test.", i)
				m.Answer = append(m.Answer, &dns.CNAME{Hdr: dns.RR_Header{Name: qn, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: zoneTTL}, Target: target})
				qn = target
			}
		}
		addr = w.Addr(i)
	}
	switch qt {
	case dns.TypeA:
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: qn, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: zoneTTL}, A: addr.AsSlice()})
	case dns.TypeNS:
		if strings.HasPrefix(name, "d") {
			for _, ns := range w.NS(i) {
				m.Answer = append(m.Answer, &dns.NS{Hdr: dns.RR_Header{Name: qn, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: zoneTTL}, Ns: ns + "."})
			}
		} else {
			m.Ns = []dns.RR{soa}
		}
	default:
		m.Ns = []dns.RR{soa} // no data
	}
	rw.WriteMsg(m)
}
