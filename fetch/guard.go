package fetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// The address guard runs inside the dialer, after every name has been
// resolved, so one check covers the first URL, every redirect target and
// every DNS answer: a public name whose A record says 10.0.0.1 is refused
// exactly like http://10.0.0.1/.

// addrKind names why an address is special; "" means public.
type addrKind string

const (
	kindPublic      addrKind = ""
	kindLoopback    addrKind = "loopback"
	kindPrivate     addrKind = "private"
	kindCGNAT       addrKind = "shared (CGNAT)"
	kindLinkLocal   addrKind = "link-local"
	kindMulticast   addrKind = "multicast"
	kindUnspecified addrKind = "unspecified"
	kindReserved    addrKind = "reserved"
)

type prefixKind struct {
	p    netip.Prefix
	kind addrKind
}

// specialPrefixes lists the non-public ranges (IANA special-purpose
// registries, abridged to what a crawler can reach by mistake).
var specialPrefixes = func() []prefixKind {
	list := []struct {
		s    string
		kind addrKind
	}{
		{"0.0.0.0/8", kindUnspecified},
		{"10.0.0.0/8", kindPrivate},
		{"100.64.0.0/10", kindCGNAT},
		{"127.0.0.0/8", kindLoopback},
		{"169.254.0.0/16", kindLinkLocal},
		{"172.16.0.0/12", kindPrivate},
		{"192.0.0.0/24", kindReserved},
		{"192.0.2.0/24", kindReserved},
		{"192.88.99.0/24", kindReserved},
		{"192.168.0.0/16", kindPrivate},
		{"198.18.0.0/15", kindReserved},
		{"198.51.100.0/24", kindReserved},
		{"203.0.113.0/24", kindReserved},
		{"224.0.0.0/4", kindMulticast},
		{"240.0.0.0/4", kindReserved}, // includes 255.255.255.255
		{"::/128", kindUnspecified},
		{"::1/128", kindLoopback},
		{"64:ff9b:1::/48", kindReserved},
		{"100::/64", kindReserved},
		{"2001::/23", kindReserved},
		{"2001:db8::/32", kindReserved},
		{"fc00::/7", kindPrivate},
		{"fe80::/10", kindLinkLocal},
		{"fec0::/10", kindReserved},
		{"ff00::/8", kindMulticast},
	}
	out := make([]prefixKind, len(list))
	for i, e := range list {
		out[i] = prefixKind{netip.MustParsePrefix(e.s), e.kind}
	}
	return out
}()

// classify reports which special range ip belongs to. IPv4-mapped and
// 6to4 addresses are judged by the IPv4 address they carry.
func classifyAddr(ip netip.Addr) addrKind {
	ip = ip.Unmap()
	if ip.Is6() {
		if b := ip.As16(); b[0] == 0x20 && b[1] == 0x02 { // 2002::/16 embeds an IPv4 address
			if k := classifyAddr(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})); k != kindPublic {
				return k
			}
		}
	}
	for _, pk := range specialPrefixes {
		if pk.p.Contains(ip) {
			return pk.kind
		}
	}
	return kindPublic
}

// allowed reports whether cfg permits dialing ip, and if not, why.
func (c *Config) allowed(ip netip.Addr) (bool, addrKind) {
	k := classifyAddr(ip)
	switch k {
	case kindPublic:
		return true, k
	case kindLoopback:
		return c.AllowLoopback, k
	case kindPrivate, kindCGNAT:
		return c.AllowPrivate, k
	}
	return false, k
}

// denied reports why an address the guard allows is refused by Deny or
// DenyAddr, or "" when it is not.
func (c *Config) denied(ap netip.AddrPort) string {
	ip := ap.Addr().Unmap()
	for _, p := range c.Deny {
		if p.Contains(ip) {
			return "on the deny list (" + p.String() + ")"
		}
	}
	if c.DenyAddr != nil {
		return c.DenyAddr(netip.AddrPortFrom(ip, ap.Port()))
	}
	return ""
}

// isLocalhostName reports names that mean "this machine" (RFC 6761 and the
// usual /etc/hosts spellings); they resolve to loopback without DNS.
func isLocalhostName(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	switch h {
	case "localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback":
		return true
	}
	return strings.HasSuffix(h, ".localhost")
}

// dialError marks a failure before any byte was exchanged, so
// classification knows the stage without guessing from strings.
type dialError struct {
	class Class
	err   error
}

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// resolve turns the host:port of a URL into candidate addresses, honouring
// Config.Resolve first, then IP literals, then localhost names, then DNS.
func (f *Fetcher) resolve(ctx context.Context, addr string) ([]netip.AddrPort, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, &dialError{ClassURL, fmt.Errorf("bad address %q: %w", addr, err)}
	}
	port, err := netip.ParseAddrPort("0.0.0.0:" + portStr)
	if err != nil {
		return nil, &dialError{ClassURL, fmt.Errorf("bad port in %q", addr)}
	}
	if where, ok := f.cfg.DenyNames.Match(host); ok {
		return nil, &dialError{ClassBlacklisted, fmt.Errorf("host %s is on the blacklist (%s)", host, where)}
	}
	if to, ok := f.lookupResolve(host, portStr); ok {
		ap, err := netip.ParseAddrPort(to)
		if err != nil {
			return nil, &dialError{ClassDNS, fmt.Errorf("resolve override %s → %q is not ip:port", addr, to)}
		}
		return []netip.AddrPort{ap}, nil
	}
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.AddrPort{netip.AddrPortFrom(ip.WithZone(""), port.Port())}, nil
	}
	if isLocalhostName(host) {
		return []netip.AddrPort{
			netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port.Port()),
			netip.AddrPortFrom(netip.IPv6Loopback(), port.Port()),
		}, nil
	}
	if !strings.Contains(strings.TrimSuffix(host, "."), ".") && !f.cfg.AllowPrivate {
		// A dotless name is completed by the resolver's search list into
		// some internal host: never a page on the public web.
		return nil, &dialError{ClassBlocked, fmt.Errorf("unqualified host name %q refused", host)}
	}
	if f.cfg.Names != nil {
		return f.resolveNames(ctx, host, port.Port())
	}
	lctx, cancel := context.WithTimeout(ctx, f.cfg.DNSTimeout)
	defer cancel()
	// A resolver that does not answer is a DNS failure, like one that
	// answers "no such host": the name cannot be used. The note lets the
	// fetch class it so even when the fetch's own deadline ends first.
	noteResolving(ctx, host)
	ips, err := f.cfg.Resolver.LookupNetIP(lctx, "ip", host)
	noteResolving(ctx, "")
	if err != nil {
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("dns lookup of %s: no answer before the deadline: %w", host, err)
		case lctx.Err() != nil:
			err = fmt.Errorf("dns lookup of %s: no answer within %v", host, f.cfg.DNSTimeout)
		default:
			err = fmt.Errorf("dns lookup of %s: %w", host, err)
		}
		return nil, &dialError{ClassDNS, err}
	}
	if len(ips) == 0 {
		return nil, &dialError{ClassDNS, fmt.Errorf("dns lookup of %s: no addresses", host)}
	}
	out := make([]netip.AddrPort, 0, len(ips))
	for _, ip := range ips {
		out = append(out, netip.AddrPortFrom(ip.WithZone(""), port.Port()))
	}
	return out, nil
}

// resolveNames asks Config.Names for host's addresses. Its answer is
// usually at hand: the supervisor resolved the host before handing its
// task to a worker.
func (f *Fetcher) resolveNames(ctx context.Context, host string, port uint16) ([]netip.AddrPort, error) {
	noteResolving(ctx, host)
	ips, err := f.cfg.Names.Addrs(ctx, host)
	noteResolving(ctx, "")
	if err != nil {
		class := ClassDNS
		var te interface{ Timeout() bool }
		if errors.As(err, &te) && te.Timeout() {
			class = ClassDNSTimeout
		}
		return nil, &dialError{class, err}
	}
	if len(ips) == 0 {
		return nil, &dialError{ClassDNS, fmt.Errorf("dns lookup of %s: no addresses", host)}
	}
	out := make([]netip.AddrPort, 0, len(ips))
	for _, ip := range ips {
		out = append(out, netip.AddrPortFrom(ip.WithZone(""), port))
	}
	return out, nil
}

// NeedsLookup reports whether a request to hostport ("host:port") asks
// DNS: not for a host pinned by Config.Resolve, an IP literal, a
// localhost name or a dotless name (refused unless AllowPrivate).
func (f *Fetcher) NeedsLookup(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if _, ok := f.cfg.DenyNames.Match(host); ok {
		return false // refused before any look-up
	}
	if _, ok := f.lookupResolve(host, port); ok {
		return false
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return false
	}
	if isLocalhostName(host) {
		return false
	}
	return strings.Contains(strings.TrimSuffix(host, "."), ".") || f.cfg.AllowPrivate
}

// lookupResolve finds host:port in Config.Resolve, case-insensitively.
func (f *Fetcher) lookupResolve(host, port string) (string, bool) {
	if len(f.cfg.Resolve) == 0 {
		return "", false
	}
	key := net.JoinHostPort(strings.ToLower(strings.TrimSuffix(host, ".")), port)
	if to, ok := f.cfg.Resolve[key]; ok {
		return to, true
	}
	for k, to := range f.cfg.Resolve {
		if strings.EqualFold(k, key) {
			return to, true
		}
	}
	return "", false
}

// dial resolves addr, drops every address the guard refuses, and connects
// to the first remaining one that answers. The returned connection
// enforces the idle timeout on its reads while a request uses it (see
// conn.go) and on every write.
func (f *Fetcher) dial(ctx context.Context, network, addr string) (*idleConn, error) {
	cands, err := f.resolve(ctx, addr)
	if err != nil {
		return nil, err
	}
	var ok []netip.AddrPort
	var refused []string
	for _, ap := range cands {
		yes, kind := f.cfg.allowed(ap.Addr())
		why := string(kind)
		if yes {
			why = f.cfg.denied(ap)
		}
		if why == "" {
			ok = append(ok, ap)
		} else {
			if len(refused) == 0 {
				noteRemote(ctx, ap.String())
			}
			refused = append(refused, fmt.Sprintf("%s (%s)", ap.Addr(), why))
		}
	}
	if len(ok) == 0 {
		return nil, &dialError{ClassBlocked, fmt.Errorf("address of %s refused: %s", addr, strings.Join(refused, ", "))}
	}
	d := net.Dialer{Timeout: f.cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	var lastErr error
	for _, ap := range ok {
		noteRemote(ctx, ap.String())
		c, err := d.DialContext(ctx, network, ap.String())
		if err == nil {
			return newIdleConn(c, f.cfg.IdleTimeout), nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	var ne net.Error
	if errors.As(lastErr, &ne) && ne.Timeout() && ctx.Err() == nil {
		return nil, &dialError{ClassTimeout, fmt.Errorf("connect to %s: %w", addr, lastErr)}
	}
	return nil, &dialError{ClassConnect, fmt.Errorf("connect to %s: %w", addr, lastErr)}
}

// dialConn is dial as the transport calls it.
func (f *Fetcher) dialConn(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := f.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.closed = f.keep.opened(addr)
	return c, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// newTransport builds the one Transport of a Fetcher: keep-alive on (the
// supervisor sends one request per host at a time, so reuse is polite and
// cheap: one TCP and TLS handshake per host), compression handled by
// body.go so its size can be capped.
func (f *Fetcher) newTransport() *http.Transport {
	// Every Transport resumes from the one cache (sessions.go), the
	// closing one's connections above all.
	tc := &tls.Config{RootCAs: f.cfg.RootCAs, MinVersion: tls.VersionTLS12, ClientSessionCache: f.sessions}
	if f.cfg.InsecureTLS {
		// Verification still happens, after the handshake, in get.go, so
		// the problem is recorded on the Response rather than fatal.
		tc.InsecureSkipVerify = true
	}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            f.dialConn,
		TLSClientConfig:        tc,
		TLSHandshakeTimeout:    f.cfg.TLSTimeout,
		ResponseHeaderTimeout:  f.cfg.HeaderTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: f.cfg.MaxHeaderBytes,
		DisableCompression:     true,
		DisableKeepAlives:      false,
		MaxIdleConns:           f.cfg.KeptHosts, // only they leave one idle (keepalive.go)
		MaxIdleConnsPerHost:    1,
		MaxConnsPerHost:        1, // one request at a time per host: never a second connection beside it
		IdleConnTimeout:        90 * time.Second,
		// HTTP/2 when the server offers it in the TLS handshake (ALPN),
		// HTTP/1.1 otherwise: either way one connection per host. The
		// dialer, MaxResponseHeaderBytes (HTTP/2's header list limit),
		// DisableCompression and the per-request deadlines apply to both,
		// and so does the rule that nothing is sent twice (exchange.go).
		ForceAttemptHTTP2: true,
	}
}

// Refusals the address guard lifts when told to, as RefusalOf names them.
const (
	RefusedLoopback = "loopback" // Config.AllowLoopback lifts it
	RefusedPrivate  = "private"  // Config.AllowPrivate lifts it (private and shared ranges)
	RefusedOther    = "other"    // nothing lifts it: link-local, multicast, reserved, a deny list, an unqualified name
)

// RefusalOf says which kind of address a blocked-address error's text
// (as it crosses the wire in a result) refused: RefusedLoopback,
// RefusedPrivate or RefusedOther. A refusal naming several addresses is
// the first one's kind.
func RefusalOf(msg string) string {
	lo := strings.Index(msg, "("+string(kindLoopback)+")")
	pr := strings.Index(msg, "("+string(kindPrivate)+")")
	if cg := strings.Index(msg, "("+string(kindCGNAT)+")"); cg >= 0 && (pr < 0 || cg < pr) {
		pr = cg
	}
	switch {
	case lo >= 0 && (pr < 0 || lo < pr):
		return RefusedLoopback
	case pr >= 0:
		return RefusedPrivate
	}
	return RefusedOther
}
