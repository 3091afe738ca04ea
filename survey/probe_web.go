package survey

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"backfill/wire"
)

// Web probe classes: why a domain whose address was found gave no HTTP
// answer. Append only: they are written in survey rows.
const (
	WebRefused        = "refused"         // the port answered with a reset
	WebConnectTimeout = "connect-timeout" // no answer to the connection (filtered, or the host is down)
	WebUnreachable    = "unreachable"     // an ICMP error
	WebTLS            = "tls"             // the TLS handshake failed
	WebTimeout        = "timeout"         // connected, but no complete response header in time
	WebProtocol       = "protocol"        // the server closed or garbled its answer
	WebExcluded       = "excluded"        // the address guard or the blocklist refused the address
)

// rangedGetBytes is how much of a body the GET fallback asks for and
// reads.
const rangedGetBytes = 1024

// headFallback are the statuses on which a HEAD is not believed and a
// small ranged GET asked instead: servers that refuse HEAD (405, 501) or
// answer it otherwise than GET (400, 403 from filters that only know GET).
var headFallback = map[int]bool{400: true, 403: true, 405: true, 501: true}

func (p *Prober) probeWeb(ctx context.Context, c *connector, hosts []string) []wire.WebProbe {
	if len(hosts) > 0 && !c.spec.EveryHost {
		hosts = hosts[:1]
	}
	schemes := c.spec.Schemes
	if len(schemes) == 0 {
		schemes = []string{"http"}
	}
	var out []wire.WebProbe
	for _, h := range hosts {
		for _, scheme := range schemes {
			wp, ok := p.webProbe(ctx, c, h, scheme)
			if !ok {
				return out // abandoned: the result is not sent
			}
			out = append(out, wp)
		}
	}
	return out
}

// webProbe asks scheme://host/ at the task's address: HEAD, or a ranged
// GET when HEAD is refused, following redirects that stay on the host (any
// other is recorded, not followed: the survey connects to no address but
// the task's). It reports false when the task was abandoned.
func (p *Prober) webProbe(ctx context.Context, c *connector, host, scheme string) (wire.WebProbe, bool) {
	wp := wire.WebProbe{Host: host, Scheme: scheme}
	cur := &url.URL{Scheme: scheme, Host: host, Path: "/"}
	if port := schemePort(c.spec, scheme); port != 0 {
		cur.Host = net.JoinHostPort(host, strconv.Itoa(port))
	}
	start := time.Now()
	method := http.MethodHead
	for hops := 0; ; {
		var resp *http.Response
		var class, errText string
		if err := c.do(ctx, func() { resp, class, errText = p.request(ctx, c, cur, method) }); err != nil {
			return wp, false
		}
		wp.Method = method
		if resp == nil {
			if method == http.MethodHead && class == WebProtocol {
				method = http.MethodGet // a server that chokes on HEAD
				continue
			}
			wp.Class, wp.Error = class, errText
			break
		}
		if method == http.MethodHead && headFallback[resp.StatusCode] {
			method = http.MethodGet
			continue
		}
		p.record(&wp, resp, host, c)
		wp.Remote = net.JoinHostPort(c.ip.String(), portOf(cur))
		loc := resp.Header.Get("Location")
		if resp.StatusCode < 300 || resp.StatusCode > 399 || loc == "" {
			wp.FinalURL = cur.String()
			break
		}
		next, err := cur.Parse(loc)
		if err != nil {
			wp.Redirects = append(wp.Redirects, loc)
			wp.FinalURL = cur.String()
			break
		}
		wp.Redirects = append(wp.Redirects, next.String())
		if hops++; !strings.EqualFold(next.Hostname(), host) || (next.Scheme != "http" && next.Scheme != "https") || hops > c.spec.MaxRedirects {
			wp.FinalURL = next.String()
			break
		}
		cur, method = next, http.MethodHead
	}
	wp.Elapsed = time.Since(start)
	return wp, true
}

// record takes what a response says: status, Server and the listed
// headers, the TLS version and certificate.
func (p *Prober) record(wp *wire.WebProbe, resp *http.Response, host string, c *connector) {
	wp.Status = resp.StatusCode
	wp.Server = resp.Header.Get("Server")
	for _, h := range c.spec.Headers {
		if v := resp.Header.Get(h); v != "" {
			if wp.Headers == nil {
				wp.Headers = make(map[string]string)
			}
			wp.Headers[h] = v
		}
	}
	if resp.TLS == nil {
		return
	}
	wp.TLSVersion = tls.VersionName(resp.TLS.Version)
	certs := resp.TLS.PeerCertificates
	if len(certs) == 0 {
		return
	}
	leaf := certs[0]
	wp.CertSubject, wp.CertIssuer, wp.CertExpiry = leaf.Subject.String(), leaf.Issuer.String(), leaf.NotAfter.UTC()
	inter := x509.NewCertPool()
	for _, ic := range certs[1:] {
		inter.AddCert(ic)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: p.cfg.Fetch.RootCAs, Intermediates: inter}); err != nil {
		wp.CertError = err.Error()
	}
}

// request makes one request on a connection of its own to the task's
// address, and closes it. It returns the response (its body drained and
// closed), or the class of the failure.
func (p *Prober) request(ctx context.Context, c *connector, u *url.URL, method string) (*http.Response, string, string) {
	addr := net.JoinHostPort(c.ip.String(), portOf(u))
	var dialErr, tlsErr error
	var (
		connMu sync.Mutex
		conn   net.Conn
	)
	dialCtx := ctx
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			dctx, cancel := context.WithTimeout(ctx, c.spec.Timeout)
			defer cancel()
			c, err := p.fetcher.DialContext(dctx, network, addr)
			connMu.Lock()
			defer connMu.Unlock()
			if err != nil {
				dialErr, dialCtx = err, dctx
			}
			conn = c
			return c, err
		},
		// Certificates are recorded, not enforced: verification runs in
		// record and its failure is a finding, not a reason to stop.
		TLSClientConfig:        &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS10},
		TLSHandshakeTimeout:    c.spec.Timeout,
		ResponseHeaderTimeout:  c.spec.Timeout,
		MaxResponseHeaderBytes: 64 << 10,
		DisableKeepAlives:      true,
		DisableCompression:     true,
	}
	defer func() {
		// The connection is closed when request returns, not later in the
		// transport's own time: the next one to the address waits for it.
		tr.CloseIdleConnections()
		connMu.Lock()
		if conn != nil {
			conn.Close()
		}
		connMu.Unlock()
	}()
	// Connecting, the TLS handshake and the response header each have
	// Timeout; the request as a whole has all three.
	rctx, cancel := context.WithTimeout(ctx, 3*c.spec.Timeout)
	defer cancel()
	// The transport dials and shakes hands on a goroutine of its own,
	// which may still be at it when a timed-out request returns.
	connected := false
	rctx = httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			connMu.Lock()
			tlsErr = err
			connMu.Unlock()
		},
		GotConn: func(httptrace.GotConnInfo) {
			connMu.Lock()
			connected = true
			connMu.Unlock()
		},
	})
	req, err := http.NewRequestWithContext(rctx, method, u.String(), nil)
	if err != nil {
		return nil, WebProtocol, err.Error()
	}
	ua := c.spec.UserAgent
	if ua == "" {
		ua = p.ua
	}
	req.Header.Set("User-Agent", ua)
	if method == http.MethodGet {
		req.Header.Set("Range", "bytes=0-"+strconv.Itoa(rangedGetBytes-1))
	}
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	connMu.Lock()
	defer connMu.Unlock()
	if err != nil {
		switch {
		case dialErr != nil:
			return nil, webDialClass(dialState(dialErr, dialCtx, ctx)), dialErr.Error()
		case tlsErr != nil:
			return nil, WebTLS, tlsErr.Error()
		case !connected && ctx.Err() == nil && u.Scheme == "http":
			return nil, WebConnectTimeout, err.Error()
		case ctx.Err() == nil && (rctx.Err() != nil || isTimeoutErr(err)):
			return nil, WebTimeout, err.Error()
		}
		return nil, WebProtocol, err.Error()
	}
	io.CopyN(io.Discard, resp.Body, rangedGetBytes)
	resp.Body.Close()
	return resp, "", ""
}

// schemePort is the port the spec asks for scheme, 0 for its default.
func schemePort(spec wire.SurveySpec, scheme string) int {
	if scheme == "https" {
		return spec.HTTPSPort
	}
	return spec.HTTPPort
}

// portOf is the port a URL connects to.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// webDialClass maps a dial's port state to a web probe class.
func webDialClass(state string) string {
	switch state {
	case PortClosed:
		return WebRefused
	case PortFiltered:
		return WebConnectTimeout
	case PortUnreachable:
		return WebUnreachable
	case PortExcluded:
		return WebExcluded
	}
	return WebProtocol
}
