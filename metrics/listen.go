package metrics

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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ErrPlaintext refuses plaintext HTTP on a wildcard or public address
// when Options.Insecure is not set and there is no certificate.
var ErrPlaintext = errors.New("plaintext on a wildcard or public address")

// Options say where a Server listens and how.
type Options struct {
	// Addr is "host:port", ":port" or "port". Without a host the server
	// listens on loopback (127.0.0.1): the address must be named to be
	// reachable from elsewhere.
	Addr string
	// Insecure allows plaintext HTTP on a wildcard or public address.
	Insecure bool
	// CertFile and KeyFile, both or neither, make it serve HTTPS.
	CertFile, KeyFile string
}

// Timeouts of the HTTP server. A scrape or a status request is small;
// only event streams (which send on their own schedule) outlive them,
// and shutdown waits at most shutdownWait for them.
const (
	readHeaderTimeout = 5 * time.Second
	idleTimeout       = 60 * time.Second
	shutdownWait      = 2 * time.Second
)

// Server is one HTTP listener of a process: /metrics and what the
// process mounts with Handle.
type Server struct {
	ln  net.Listener
	mux *http.ServeMux
	tls bool
}

// Listen checks opts.Addr against the rules of the package doc and binds
// it. The caller mounts handlers with Handle, then calls Serve.
func Listen(opts Options) (*Server, error) {
	addr, err := hostPort(opts.Addr)
	if err != nil {
		return nil, err
	}
	useTLS := opts.CertFile != "" || opts.KeyFile != ""
	if useTLS && (opts.CertFile == "" || opts.KeyFile == "") {
		return nil, fmt.Errorf("metrics: listen %s: a certificate needs its key and a key its certificate", addr)
	}
	if !useTLS && !opts.Insecure {
		if why := exposed(addr); why != "" {
			return nil, fmt.Errorf("metrics: listen %s: %w: %s", addr, ErrPlaintext, why)
		}
	}
	var cfg *tls.Config
	if useTLS {
		cert, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("metrics: listen %s: certificate: %w", addr, err)
		}
		cfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	return &Server{ln: ln, mux: http.NewServeMux(), tls: useTLS}, nil
}

// hostPort completes addr: a bare port, or one without a host, listens
// on loopback.
func hostPort(addr string) (string, error) {
	if addr == "" {
		return "", errors.New("metrics: no address")
	}
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("metrics: address %q: %v", addr, err)
	}
	if port == "" {
		return "", fmt.Errorf("metrics: address %q: no port", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// exposed says why plaintext on addr would be served beyond loopback and
// private networks, or "" when it would not: a wildcard address serves
// every interface, public ones included; a name is judged by every
// address it resolves to.
func exposed(addr string) string {
	host, _, _ := net.SplitHostPort(addr)
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return fmt.Sprintf("%s does not resolve (%v), so it may be public", host, err)
		}
		ips = addrs
	}
	for _, ip := range ips {
		ip = ip.Unmap()
		switch {
		case ip.IsUnspecified():
			return fmt.Sprintf("%s is a wildcard address: it serves every interface, public ones included", ip)
		case ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast():
		default:
			return fmt.Sprintf("%s is a public address", ip)
		}
	}
	return ""
}

// Addr is the address bound, with the port resolved.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the server's base URL, ending in "/".
func (s *Server) URL() string {
	scheme := "http"
	if s.tls {
		scheme = "https"
	}
	return scheme + "://" + s.Addr() + "/"
}

// Handle mounts h at pattern (http.ServeMux patterns). Call it before
// Serve.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// HandleMetrics mounts reg at /metrics.
func (s *Server) HandleMetrics(reg *prometheus.Registry) {
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		Registry:          reg, // counts its own scrapes and errors
		EnableOpenMetrics: true,
	}))
}

// Serve serves until ctx is done, then shuts down: requests in progress
// get shutdownWait to finish, and their contexts are cancelled, so event
// streams end. It returns nil after a shutdown and the error that stopped
// it otherwise. The listener is closed when Serve returns.
func (s *Server) Serve(ctx context.Context) error {
	srv := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics: serve %s: %w", s.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	<-errc // http.ErrServerClosed
	return err
}

// Close releases the listener of a Server that will not Serve.
func (s *Server) Close() error { return s.ln.Close() }
