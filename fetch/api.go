package fetch

// The exported API other packages build against: classes, errors, the
// configuration and the Fetcher. The mechanics live beside it: guard.go
// (address policy and dialing), get.go (requests, redirects,
// classification), body.go (bounded reading and decompression), text.go
// (sniffing and charset decoding), refresh.go (meta refresh) and binary.go
// (binary file links).

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"backfill/hostname"
)

// Class classifies a failed fetch. Append only: values cross the wire and
// appear in run summaries.
type Class string

const (
	ClassDNS      Class = "dns"
	ClassConnect  Class = "connect"
	ClassTLS      Class = "tls"
	ClassTimeout  Class = "timeout"
	ClassTooLarge Class = "too-large"
	ClassStatus   Class = "bad-status" // non-2xx final status
	ClassRedirect Class = "redirect"   // loop, too many, 3xx without Location
	ClassBlocked  Class = "blocked-address"
	ClassProtocol Class = "protocol" // garbled response, closed mid-message
	ClassEncoding Class = "bad-encoding"
	ClassNotHTML  Class = "not-html"
	ClassURL      Class = "bad-url"
	ClassRobots   Class = "robots" // disallowed by robots.txt (set by the supervisor)
	ClassCanceled Class = "canceled"
	ClassOther    Class = "other"
	// ClassRobotsUnavailable: the host's robots.txt could not be had (5xx,
	// 429, a reset or garbled answer), so RFC 9309 disallows everything
	// until a retry succeeds (set by the supervisor).
	ClassRobotsUnavailable Class = "robots-unavailable"
	// ClassDNSTimeout: no DNS server answered in time (after the
	// resolver's retries), which says nothing of the name, unlike
	// ClassDNS; a rerun asks again.
	ClassDNSTimeout Class = "dns-timeout"
	// ClassBlacklisted: the host (Config.DenyNames), or an address
	// (blacklisted during a crawl), is never to be asked anything; no
	// request was made, and a listed name is not even looked up.
	ClassBlacklisted Class = "blacklisted"
)

// ErrUnanswered marks a request that a kept-alive connection lost: the
// connection broke (the server closed it as the request went out) before
// any answer came, where net/http would have sent the request again on a
// new connection. Nothing below the Fetcher retries (exchange.go); a
// caller that keeps hosts' rules may make the request again as one of its
// own, after the host's delay, and count it. Its class is ClassProtocol.
var ErrUnanswered = errors.New("lost on a kept-alive connection before any answer")

// Error is a classified fetch failure.
type Error struct {
	Class Class
	URL   string
	Err   error
	// RemoteAddr is the "ip:port" of the last hop's connection, or of the
	// address that was dialled or refused, "" when none was reached (a
	// DNS failure, a bad URL). Callers keep per-address health by it.
	RemoteAddr string
}

func (e *Error) Error() string {
	return "fetch " + e.URL + ": " + string(e.Class) + ": " + e.Err.Error()
}
func (e *Error) Unwrap() error { return e.Err }

// ClassOf returns the class of err, ClassOther for an unclassified error and
// "" for nil.
func ClassOf(err error) Class {
	if err == nil {
		return ""
	}
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Class
	}
	return ClassOther
}

// Defaults for the zero values of Config. Every limit exists because some
// server on the web will otherwise hold a worker or its memory forever.
const (
	DefaultTimeout        = 30 * time.Second
	DefaultDNSTimeout     = 5 * time.Second
	DefaultConnectTimeout = 10 * time.Second
	DefaultTLSTimeout     = 10 * time.Second
	DefaultHeaderTimeout  = 15 * time.Second
	DefaultIdleTimeout    = 15 * time.Second
	DefaultMaxBody        = 5 << 20
	DefaultMaxRedirects   = 10
	DefaultMaxHeaderBytes = 128 << 10
	DefaultMaxHeaders     = 256
	DefaultMaxRatio       = 100
	DefaultMaxRefreshWait = 30 * time.Second
)

// Config sets the fetcher's limits. Zero values take the defaults above.
type Config struct {
	UserAgent     string            // required: identifies backfill with a contact URL
	Timeout       time.Duration     // whole request including redirects, default 30s
	MaxBody       int64             // bytes kept, default 5 MiB; more is truncated (Response.Truncated)
	MaxRedirects  int               // default 10; meta refresh hops count too
	Resolve       map[string]string // "host:port" → "ip:port": connect there instead of resolving (the host in either spelling: see package hostname)
	AllowLoopback bool              // permit 127.0.0.0/8 and ::1 (tests, demo)
	AllowPrivate  bool              // permit 10/8, 172.16/12, 192.168/16, fc00::/7, 100.64/10 and dotless names

	DNSTimeout     time.Duration // name lookup, default 5s
	ConnectTimeout time.Duration // TCP connect, default 10s
	TLSTimeout     time.Duration // TLS handshake, default 10s
	HeaderTimeout  time.Duration // request written → response header complete, default 15s
	IdleTimeout    time.Duration // longest silence between two reads of a request's exchange (write to body's end), default 15s

	MaxHeaderBytes int64 // response header bytes, default 128 KiB (ClassTooLarge)
	MaxHeaders     int   // response header lines, default 256 (ClassTooLarge)
	// MaxRatio bounds decompressed/compressed bytes for a body that also
	// exceeds MaxBody: beyond it the body is a decompression bomb
	// (ClassTooLarge) rather than a large page (truncated). Default 100.
	MaxRatio int

	// IgnoreMetaRefresh turns off following <meta http-equiv=refresh> and
	// the Refresh header; by default they are followed like redirects when
	// their delay is at most MaxRefreshWait (default 30s), within
	// MaxRedirects.
	IgnoreMetaRefresh bool
	MaxRefreshWait    time.Duration

	// InsecureTLS records certificate problems in Response.TLSError instead
	// of failing with ClassTLS. Verification is on by default.
	InsecureTLS bool
	RootCAs     *x509.CertPool // nil: the system roots

	// Resolver looks names up; nil means net.DefaultResolver. Tests point
	// it at a DNS server on loopback. Names, when set, is asked instead.
	Resolver *net.Resolver
	// Names gives a host's addresses (the crawl's resolver cache, see
	// package resolver); an error with Timeout() true is
	// ClassDNSTimeout, any other ClassDNS. DNSTimeout does not apply:
	// Names bounds its own look-ups.
	Names Names

	// MaxTransportHosts is how many distinct hosts one http.Transport
	// serves before the Fetcher replaces it with a fresh one, since a
	// Transport keeps state for every host it was asked for (see
	// transport.go). Default DefaultMaxTransportHosts.
	MaxTransportHosts int

	// KeptHosts is how many hosts keep their connection open between
	// their requests; a request to any other host closes its connection
	// after the answer (see keepalive.go). Default DefaultKeptHosts.
	KeptHosts int

	// KeptSessions is how many hosts keep a TLS session to resume on
	// their next connection (see sessions.go). Default
	// DefaultKeptSessions.
	KeptSessions int

	// Deny lists ranges never dialed, on top of the built-in guard (a
	// user's blacklist of IPs and CIDRs). DenyAddr, when set, is asked
	// about every address the guard and Deny let through; a non-empty
	// answer refuses it and says why (the supervisor blacklists addresses
	// that keep failing this way). Both are checked at dial time, so they
	// cover DNS answers and redirects; a refusal is ClassBlocked.
	Deny     []netip.Prefix
	DenyAddr func(netip.AddrPort) string
	// DenyNames lists host names never asked anything (a user's
	// blacklist: a name covers its subdomains). They are refused before
	// anything else, pins included, so such a name is never looked up:
	// ClassBlacklisted. This covers every request the Fetcher makes, a
	// redirect's target included.
	DenyNames NameSet
}

// Names looks up a host's addresses.
type Names interface {
	Addrs(ctx context.Context, host string) ([]netip.Addr, error)
}

// Response is a fetched page.
type Response struct {
	URL         string      // final URL after redirects
	Status      int         // final status
	Header      http.Header // final response's header, values made valid UTF-8
	ContentType string      // media type, lower case, no parameters (sniffed when undeclared)
	Body        []byte      // decoded to UTF-8 when text
	Truncated   bool        // Body holds the first MaxBody bytes of a longer body
	Redirects   int         // HTTP redirects and meta refreshes followed
	Elapsed     time.Duration

	Charset  string // charset the text body was decoded from ("" for binary bodies)
	TLSError string // certificate problem accepted under InsecureTLS

	RemoteAddr string // "ip:port" the final response came from

	// NotModified is set on the 304 answer to a conditional request
	// (GetConditional): Status is 304, Body is empty, and the page is
	// what it was when the validators were taken.
	NotModified bool

	// Next is where the response sends the client, set by Do (an HTTP
	// redirect's Location or a meta refresh's target, absolute); Hop says
	// which. Get and GetConditional have followed it already, so their
	// responses never carry one.
	Next string
	Hop  Hop
}

// Fetcher fetches pages. Safe for concurrent use; Close releases its idle
// connections.
type Fetcher struct {
	cfg      Config
	ts       *transports
	keep     *keepAlive
	sessions *keptSessions

	repeated atomic.Int64 // requests the transport sent more than once (Stats)
	// resend, in tests only, sends requests the transport may resend, to
	// show that Stats sees it.
	resend bool
}

// New builds a Fetcher. A missing User-Agent is reported by Get, so a
// Fetcher can be built before its configuration is complete.
func New(cfg Config) *Fetcher {
	cfg = cfg.withDefaults()
	f := &Fetcher{cfg: cfg, keep: newKeepAlive(cfg.KeptHosts), sessions: newKeptSessions(cfg.KeptSessions)}
	f.ts = newTransports(cfg.MaxTransportHosts, f.newTransport)
	return f
}

// Get fetches rawURL. A non-2xx final status is returned as a Response AND
// an *Error of ClassStatus, so callers can still see the status and body.
// A body that is not text (an image or PDF, whatever its declared type) is
// returned undecoded with an *Error of ClassNotHTML.
func (f *Fetcher) Get(ctx context.Context, rawURL string) (*Response, error) {
	return f.get(ctx, rawURL, nil)
}

// Close releases idle connections.
func (f *Fetcher) Close() {
	if f != nil && f.ts != nil {
		f.ts.closeIdle()
	}
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.MaxRedirects <= 0 {
		c.MaxRedirects = DefaultMaxRedirects
	}
	if c.DNSTimeout <= 0 {
		c.DNSTimeout = DefaultDNSTimeout
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.TLSTimeout <= 0 {
		c.TLSTimeout = DefaultTLSTimeout
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = DefaultHeaderTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.MaxHeaders <= 0 {
		c.MaxHeaders = DefaultMaxHeaders
	}
	if c.MaxRatio <= 0 {
		c.MaxRatio = DefaultMaxRatio
	}
	if c.MaxRefreshWait <= 0 {
		c.MaxRefreshWait = DefaultMaxRefreshWait
	}
	if c.MaxTransportHosts <= 0 {
		c.MaxTransportHosts = DefaultMaxTransportHosts
	}
	if c.KeptHosts <= 0 {
		c.KeptHosts = DefaultKeptHosts
	}
	if c.KeptSessions <= 0 {
		c.KeptSessions = DefaultKeptSessions
	}
	if c.Resolver == nil {
		c.Resolver = net.DefaultResolver
	}
	c.Resolve = asciiResolve(c.Resolve)
	return c
}

// asciiResolve copies a Resolve map with its hosts in their ASCII form,
// the form requests' hosts take (parseTarget): a host pinned in Unicode
// is found under its punycode. A key whose host has none is kept as it is.
func asciiResolve(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, to := range m {
		if host, port, err := net.SplitHostPort(k); err == nil {
			if a, err := hostname.ASCII(strings.TrimSuffix(host, ".")); err == nil {
				k = net.JoinHostPort(a, port)
			}
		}
		out[k] = to
	}
	return out
}
