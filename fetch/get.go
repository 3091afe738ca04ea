package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"backfill/hostname"
)

// errTotalTimeout is the cause attached to the Config.Timeout deadline, so
// it can be told apart from the caller's own cancellation.
var errTotalTimeout = errors.New("total time limit reached")

// get follows one URL through its redirects and meta refreshes. Every hop
// goes through once, which dials through the guard, reads a bounded body
// and decodes it.
func (f *Fetcher) get(parent context.Context, rawURL string, cond *Validators) (*Response, error) {
	return f.follow(parent, rawURL, Request{Validators: cond})
}

// follow makes r's request for rawURL and then one for every hop it is
// sent on, within MaxRedirects and without visiting a URL twice.
func (f *Fetcher) follow(parent context.Context, rawURL string, r Request) (*Response, error) {
	start := time.Now()
	fail := func(c Class, err error) (*Response, error) {
		return nil, &Error{Class: c, URL: rawURL, Err: err}
	}
	if f == nil || f.ts == nil {
		return fail(ClassOther, errors.New("fetcher not built with New"))
	}
	if strings.TrimSpace(f.cfg.UserAgent) == "" {
		return fail(ClassOther, errors.New("no user agent configured (Config.UserAgent is required)"))
	}
	u, err := parseTarget(rawURL)
	if err != nil {
		return fail(ClassURL, err)
	}
	ctx, cancel := context.WithTimeoutCause(parent, f.cfg.Timeout, errTotalTimeout)
	defer cancel()

	chain := NewChain(u.String(), f.cfg.MaxRedirects)
	for {
		resp, err := f.onceNoted(ctx, parent, u, r)
		if resp != nil {
			resp.Redirects = chain.Hops()
			resp.Elapsed = time.Since(start)
		}
		if err != nil {
			if chain.Hops() > 0 {
				err.Err = fmt.Errorf("after %d redirect(s), at %s: %w", chain.Hops(), u, err.Err)
			}
			err.URL = rawURL
			return resp, err
		}
		if resp.Next == "" {
			return resp, nil
		}
		if err := chain.Add(resp.Next); err != nil {
			err.URL = rawURL
			return nil, err
		}
		next, perr := url.Parse(resp.Next) // parseTarget made it
		if perr != nil {
			return fail(ClassRedirect, perr)
		}
		u = next
	}
}

// parseTarget accepts absolute http(s) URLs with a host, puts the host in
// its ASCII form (package hostname) and drops the fragment, which is never
// sent.
func parseTarget(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("parse url: %w", err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return nil, fmt.Errorf("unsupported scheme %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, errors.New("url has no host")
	}
	// The host in its ASCII form, as it keys the host's politeness
	// (HostKey) and goes to DNS and the Host header.
	host, err := hostname.ASCII(u.Hostname())
	if err != nil {
		return nil, err
	}
	if p := u.Port(); p != "" {
		u.Host = net.JoinHostPort(host, p)
	} else if strings.Contains(host, ":") {
		u.Host = "[" + host + "]"
	} else {
		u.Host = host
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// redirectStatus reports the statuses whose Location is followed.
func redirectStatus(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// once performs one request. It returns the page (with Next set when it
// sends the client elsewhere: an HTTP redirect or a meta refresh), or a
// classified error; with a bad status it returns both the page and the
// error. A conditional request (r.Validators not nil) sends the
// validators, and takes a 304 as the page's answer (see GetConditional).
func (f *Fetcher) once(ctx, parent context.Context, u *url.URL, r Request) (*Response, *Error) {
	fail := func(c Class, err error) (*Response, *Error) {
		return nil, &Error{Class: c, URL: u.String(), Err: err}
	}
	cond := r.Validators
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fail(ClassURL, err)
	}
	if !f.resend {
		req.Body = unreplayable{} // never sent twice (exchange.go)
	}
	req.Header.Set("User-Agent", f.cfg.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,text/*;q=0.8,*/*;q=0.5")
	req.Header.Set("Accept-Encoding", "gzip, deflate, br")
	cond.set(req.Header)
	addr := dialAddr(u)
	keep := f.keep.admit(addr)
	req.Close = !keep
	defer f.keep.settle(addr)

	hr, err := f.ts.clientFor(u, keep).Do(req)
	if err != nil {
		c, cerr := classify(ctx, parent, err)
		return fail(c, cerr)
	}
	defer hr.Body.Close()

	if n := headerLines(hr.Header); n > f.cfg.MaxHeaders {
		return fail(ClassTooLarge, fmt.Errorf("response has %d header lines, limit %d", n, f.cfg.MaxHeaders))
	}
	header := cleanHeader(hr.Header)

	if redirectStatus(hr.StatusCode) || (hr.StatusCode == http.StatusMultipleChoices && header.Get("Location") != "") {
		loc := strings.TrimSpace(header.Get("Location"))
		if loc == "" {
			return fail(ClassRedirect, fmt.Errorf("status %d without a Location header", hr.StatusCode))
		}
		next, err := u.Parse(loc)
		if err != nil {
			return fail(ClassRedirect, fmt.Errorf("status %d with unusable Location %q: %v", hr.StatusCode, loc, err))
		}
		if next, err = parseTarget(next.String()); err != nil {
			return fail(ClassRedirect, fmt.Errorf("status %d to %q: %v", hr.StatusCode, loc, err))
		}
		// A short drain lets the connection be reused for the next hop;
		// a redirect with a long body is simply closed.
		_, _ = io.CopyN(io.Discard, hr.Body, 4<<10)
		return &Response{URL: u.String(), Status: hr.StatusCode, Header: header, Next: next.String(), Hop: HopRedirect}, nil
	}

	resp := &Response{
		URL:    u.String(),
		Status: hr.StatusCode,
		Header: header,
	}
	if hr.StatusCode == http.StatusNotModified && cond.conditional() {
		// No body belongs to a 304; a short drain keeps the connection
		// for the host's next request, and anything longer is cut off.
		_, _ = io.CopyN(io.Discard, hr.Body, 4<<10)
		resp.NotModified = true
		return resp, nil
	}
	if f.cfg.InsecureTLS && hr.TLS != nil {
		resp.TLSError = verifyState(hr.TLS, u.Hostname(), f.cfg.RootCAs)
	}
	raw, truncated, rerr := f.readBody(ctx, parent, hr, r.maxBody(f.cfg.MaxBody))
	if rerr != nil {
		return nil, &Error{Class: rerr.class, URL: u.String(), Err: rerr.err}
	}
	resp.Truncated = truncated
	if nhe := f.finishBody(resp, header.Get("Content-Type"), raw); nhe != nil {
		return resp, &Error{Class: ClassNotHTML, URL: u.String(), Err: nhe}
	}
	if hr.StatusCode < 200 || hr.StatusCode > 299 {
		return resp, &Error{Class: ClassStatus, URL: u.String(), Err: fmt.Errorf("status %d", hr.StatusCode)}
	}
	if !f.cfg.IgnoreMetaRefresh && !r.IgnoreMetaRefresh {
		if next := f.refreshTarget(resp, u); next != nil {
			resp.Next, resp.Hop = next.String(), HopRefresh
		}
	}
	return resp, nil
}

// headerLines counts header lines as the server sent them.
func headerLines(h http.Header) int {
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	return n
}

// cleanHeader copies h with every value made valid UTF-8: servers send
// high-bit bytes in headers, and the values travel on in JSON and SQLite.
func cleanHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		cp := make([]string, len(vs))
		for i, v := range vs {
			if !utf8.ValidString(v) {
				v = strings.ToValidUTF8(v, "\uFFFD")
			}
			cp[i] = v
		}
		out[k] = cp
	}
	return out
}

// verifyState checks the peer chain of a connection made with verification
// off, and describes what is wrong, or "" when the chain is good.
func verifyState(st *tls.ConnectionState, host string, roots *x509.CertPool) string {
	if len(st.PeerCertificates) == 0 {
		return "no peer certificate"
	}
	inter := x509.NewCertPool()
	for _, c := range st.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := st.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: host, Roots: roots, Intermediates: inter})
	if err != nil {
		return err.Error()
	}
	return ""
}

// classify turns a transport error into a class, judging the context first
// (the caller's cancellation, then the total deadline), then the stage
// recorded by the dialer, then what net/http and crypto/tls report. A
// deadline that passed while the resolver kept silent is ClassDNS: the
// name could not be used, which is what a DNS failure says.
func classify(ctx, parent context.Context, err error) (Class, error) {
	var de *dialError
	dial := errors.As(err, &de)
	if c, ok := contextClass(ctx, parent); ok {
		switch host := resolvingOf(ctx); {
		case c != ClassTimeout:
		case dial && (de.class == ClassDNS || de.class == ClassDNSTimeout):
			return de.class, de.err
		case host != "":
			return ClassDNS, fmt.Errorf("dns lookup of %s: no answer before the deadline: %w", host, contextErr(ctx, parent))
		}
		return c, contextErr(ctx, parent)
	}
	if dial {
		return de.class, de.err
	}
	var ite *idleTimeoutError
	if errors.As(err, &ite) {
		return ClassTimeout, err
	}
	if isTLSError(err) {
		return ClassTLS, err
	}
	if isTimeout(err) {
		return ClassTimeout, err
	}
	msg := err.Error()
	if strings.Contains(msg, "server response headers exceeded") || // HTTP/1.1
		strings.Contains(msg, "response header list larger than") { // HTTP/2
		return ClassTooLarge, err
	}
	if cause, ok := unresent(msg); ok {
		return ClassProtocol, fmt.Errorf("the server ended the request without an answer (%s); not sent again: %w", cause, ErrUnanswered)
	}
	// Anything else happened after the connection was made: a garbled
	// status line, a connection closed mid-headers, a reset.
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// The request went out and is not sent again (exchange.go).
		if reusedConn(ctx) {
			return ClassProtocol, fmt.Errorf("kept-alive connection closed before the response: %w (%w)", err, ErrUnanswered)
		}
		return ClassProtocol, fmt.Errorf("connection closed before the response: %w", err)
	}
	return ClassProtocol, err
}

// unresent finds the cause in the HTTP/2 client's message for a request
// it would have resent had its body been replayable (exchange.go): a
// stream reset or a GOAWAY, which its wording ("cannot retry ... after
// Request.Body was written") would misrepresent.
func unresent(msg string) (string, bool) {
	const head, tail = "cannot retry err [", "] after Request.Body was written"
	i := strings.Index(msg, head)
	if i < 0 {
		return "", false
	}
	rest := msg[i+len(head):]
	j := strings.Index(rest, tail)
	if j < 0 {
		return "", false
	}
	return rest[:j], true
}

// contextClass reports whether ctx has ended and how: the caller's cancel
// is ClassCanceled, any deadline (the caller's or Config.Timeout) is
// ClassTimeout.
func contextClass(ctx, parent context.Context) (Class, bool) {
	if ctx.Err() == nil {
		return "", false
	}
	if errors.Is(parent.Err(), context.Canceled) {
		return ClassCanceled, true
	}
	return ClassTimeout, true
}

func contextErr(ctx, parent context.Context) error {
	if errors.Is(context.Cause(ctx), errTotalTimeout) {
		return errTotalTimeout
	}
	if parent.Err() != nil {
		return context.Cause(parent)
	}
	return ctx.Err()
}

func isTLSError(err error) bool {
	var (
		ua  x509.UnknownAuthorityError
		he  x509.HostnameError
		ci  x509.CertificateInvalidError
		cve *tls.CertificateVerificationError
		rhe tls.RecordHeaderError
		ae  tls.AlertError
	)
	switch {
	case errors.As(err, &ua), errors.As(err, &he), errors.As(err, &ci),
		errors.As(err, &cve), errors.As(err, &rhe), errors.As(err, &ae):
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "tls: ") || strings.Contains(msg, "x509: ") ||
		strings.Contains(msg, "server gave HTTP response to HTTPS client")
}
