package testweb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// DefaultCrawlDelay is the Crawl-delay, in seconds, that the tests and the
// demo ask for: long enough that a crawler ignoring it is caught by the
// request log, short enough that the small crawl takes about ten seconds.
const DefaultCrawlDelay = 1

// Options configures the small fixture web started by Start.
type Options struct {
	// CrawlDelay is the Crawl-delay, in whole seconds, written into every
	// host's robots.txt. 0 writes no Crawl-delay line (the crawler then
	// falls back to its own default delay); negative is refused. Callers
	// normally pass DefaultCrawlDelay.
	CrawlDelay int
	// Latency is added before every response (robots.txt and 404s
	// included), to imitate a distant server.
	Latency time.Duration
	// Logger receives the HTTP server's own errors (at Warn). Nil discards.
	Logger *slog.Logger
	// Addr is the host:port to listen on; empty: a free port on
	// 127.0.0.1. A network namespace of a test's own may serve the web
	// at another address.
	Addr string
}

// Request is one request the fixture web received.
type Request struct {
	Host      string    // from the Host header: lower case, without port
	Path      string    // path with query, as requested
	Time      time.Time // arrival
	UserAgent string
	Status    int // status sent; 0 while the response is still being written
	// Done is when the response, its latency waited out, was handed to
	// the connection (zero until then): a host's delay runs from there to
	// the next request's arrival. It is taken just before the bytes are
	// written, so no client can have read the response sooner; a time
	// taken after the write would be late by however long the server was
	// descheduled, and make a polite client look early. The fixture
	// web's responses are written in one go, so this is their end.
	Done time.Time
}

// Web is a running fixture web: one loopback listener answering for every
// host by the Host header. Its methods are safe for concurrent use.
type Web struct {
	srv     *http.Server
	addr    string
	site    site
	latency time.Duration
	large   *LargeOptions // set by StartLarge; LargeRecords reads it
	people  *peopleSite   // set by StartPeople; PeopleRecords and PeopleTruth read it

	done   chan struct{} // closed by Close: cuts latency waits short
	served chan struct{} // closed when Serve has returned

	mu      sync.Mutex
	log     []Request
	down    map[string]bool // hosts SetDown took down
	refuser *refuser        // where Resolve sends them; made by the first SetDown

	closeOnce sync.Once
	closeErr  error
}

// site is the content behind a Web: the small hand-written web or the
// generated large one.
type site interface {
	hosts() []string
	// serve answers a GET for path (no query) on host. found is false for
	// an unknown host.
	serve(host, path string) (r response, found bool)
}

type response struct {
	status   int
	ctype    string
	location string // Location header of a redirect
	body     []byte
}

const (
	htmlType = "text/html; charset=utf-8"
	textType = "text/plain; charset=utf-8"
	jsonType = "application/json"
)

// Start starts the small fixture web (the hosts of Sample) on 127.0.0.1 at
// a free port, or at Options.Addr. Close it when done.
func Start(opts Options) (*Web, error) {
	if opts.CrawlDelay < 0 {
		return nil, fmt.Errorf("testweb: negative Crawl-delay %d", opts.CrawlDelay)
	}
	if opts.Latency < 0 {
		return nil, fmt.Errorf("testweb: negative latency %s", opts.Latency)
	}
	return start(newSmallSite(opts.CrawlDelay), opts.Addr, opts.Latency, opts.Logger)
}

func start(s site, addr string, latency time.Duration, logger *slog.Logger) (*Web, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("testweb: listen on %s: %w", addr, err)
	}
	errLog := log.New(io.Discard, "", 0)
	if logger != nil {
		errLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	}
	w := &Web{
		addr:    ln.Addr().String(),
		site:    s,
		latency: latency,
		done:    make(chan struct{}),
		served:  make(chan struct{}),
	}
	w.srv = &http.Server{
		Handler:           w,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          errLog,
	}
	go func() {
		defer close(w.served)
		// Serve returns ErrServerClosed after Close; any other error means
		// the listener broke, and every later request fails visibly.
		if err := w.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errLog.Printf("testweb: serve %s: %v", w.addr, err)
		}
	}()
	return w, nil
}

// Addr is the listener's address, "127.0.0.1:PORT" unless Options.Addr
// named another.
func (w *Web) Addr() string { return w.addr }

// Hosts lists the host names the web answers for, sorted.
func (w *Web) Hosts() []string {
	h := append([]string(nil), w.site.hosts()...)
	sort.Strings(h)
	return h
}

// Resolve maps "host:80" to Addr for every host, the form
// fetch.Config.Resolve takes, so page URLs keep their real-looking names.
// A host taken down by SetDown maps to a loopback port that refuses every
// connection instead.
func (w *Web) Resolve() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := make(map[string]string, len(w.site.hosts()))
	for _, h := range w.site.hosts() {
		m[h+":80"] = w.addr
		if w.down[h] {
			m[h+":80"] = w.refuser.addr
		}
	}
	return m
}

// SetDown takes host down (down true) or brings it back up in what
// Resolve returns from now on: a crawler given Resolve while the host is
// down has its connections to it refused, as a server that is not running
// does. The web itself goes on answering for the host by its Host header.
// A host the web does not serve is an error.
func (w *Web) SetDown(host string, down bool) error {
	host = canonicalHost(host)
	known := false
	for _, h := range w.site.hosts() {
		known = known || h == host
	}
	if !known {
		return fmt.Errorf("testweb: no host %q", host)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.refuser == nil {
		r, err := newRefuser()
		if err != nil {
			return err
		}
		w.refuser = r
	}
	if w.down == nil {
		w.down = make(map[string]bool)
	}
	if down {
		w.down[host] = true
	} else {
		delete(w.down, host)
	}
	return nil
}

// Log returns a copy of every request received so far, in arrival order.
func (w *Web) Log() []Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Request(nil), w.log...)
}

// Close stops the listener, cuts latency waits short, waits for requests in
// flight to finish and for the server goroutine to return. Calling it again
// returns the first result.
func (w *Web) Close() error {
	w.closeOnce.Do(func() {
		close(w.done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := w.srv.Shutdown(ctx); err != nil {
			// Shutdown timed out waiting for a stuck connection: cut it.
			w.closeErr = fmt.Errorf("testweb: shutdown %s: %w", w.addr, err)
			w.srv.Close()
		}
		<-w.served
		w.mu.Lock()
		if w.refuser != nil {
			if err := w.refuser.close(); err != nil && w.closeErr == nil {
				w.closeErr = fmt.Errorf("testweb: close refusing socket: %w", err)
			}
			w.refuser = nil
		}
		w.mu.Unlock()
	})
	return w.closeErr
}

// ServeHTTP answers by the Host header and logs the request.
func (w *Web) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	host := canonicalHost(r.Host)
	w.mu.Lock()
	i := len(w.log)
	w.log = append(w.log, Request{Host: host, Path: r.URL.RequestURI(), Time: time.Now(), UserAgent: r.UserAgent()})
	w.mu.Unlock()

	resp, found := w.site.serve(host, r.URL.Path)
	switch {
	case !found:
		resp = notFound("unknown host " + host)
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		resp = response{status: http.StatusMethodNotAllowed, ctype: textType, body: []byte("method not allowed\n")}
		rw.Header().Set("Allow", "GET, HEAD")
	}
	if w.latency > 0 {
		t := time.NewTimer(w.latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
		case <-w.done:
		}
		t.Stop()
	}

	w.mu.Lock()
	w.log[i].Status = resp.status
	w.log[i].Done = time.Now()
	w.mu.Unlock()

	if resp.location != "" {
		rw.Header().Set("Location", resp.location)
	}
	rw.Header().Set("Content-Type", resp.ctype)
	rw.Header().Set("Content-Length", fmt.Sprint(len(resp.body)))
	rw.WriteHeader(resp.status)
	if r.Method != http.MethodHead {
		rw.Write(resp.body) // a client that hung up is its own problem
	}
}

// canonicalHost lower-cases a Host header and drops its port and any
// trailing dot, so "People.Example.:80" is logged as "people.example".
func canonicalHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

func notFound(what string) response {
	return response{status: http.StatusNotFound, ctype: htmlType,
		body: []byte(page("Not found", "<h1>Not found</h1>\n<p>"+htmlEscape(what)+"</p>"))}
}
