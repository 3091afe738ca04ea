package testweb

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
)

// The hostile site: one case per way the real web misbehaves, each under a
// host name of its own so that a crawl meets every case on a separate host
// (its own robots.txt, its own politeness slot, its own failure count).
//
// Three kinds of server stand behind the names:
//
//	an HTTP server     well-formed but nasty answers, chosen by Host header
//	                   (redirect games, huge and bomb bodies, binaries served
//	                   as HTML, legacy charsets, traps, farms, soft 404s)
//	a TLS server       the same handler behind a self-signed certificate
//	raw listeners      one per malformed-HTTP case, writing exactly the bytes
//	                   the case needs (silence, trickles, early closes,
//	                   garbled status lines, header floods)
//
// Every raw listener and every HTTP host answers /robots.txt with a plain
// allow-all file (raw listeners with Connection: close), so a crawler
// reaches each page itself and the case's class is what the page did, not
// what robots.txt did. The exceptions are deliberate and their Notes say
// so: robots-html and soft-404 answer robots.txt like any other path, and
// the bad-tls, dns-private and blocked-redirect hosts are unreachable for
// robots.txt exactly as for pages.

// HostDomain is the parent of every hostile case's host name.
const HostDomain = "hostile.example"

// Defaults of HostileOptions.
const (
	DefaultTrickleGap = 100 * time.Millisecond
	DefaultFarmHosts  = 2000
)

// Sizes of the generated pages. Every page the fetcher is expected to keep
// whole stays under 4 MiB, below the fetcher's default body limit.
const (
	// HugeBodyBytes is the Content-Length of the huge-body case: 8 GiB,
	// generated as it is written and never held in memory.
	HugeBodyBytes = 8 << 30
	// BombBytes is what the gzip bomb expands to: 10 GiB of zeros from
	// about 10 MB on the wire, likewise generated as it is written.
	BombBytes = 10 << 30
	// ManyLinks is the number of anchors on the many-links page.
	ManyLinks = 100_000
	// NestDepth is the nesting depth of the nested-markup page.
	NestDepth = 100_000
)

// sameBodyPage is what the soft-404-same-body host answers for every path
// but / (and /robots.txt, which allows everything).
var sameBodyPage = page("Oops", "<nav><a href=\"/\">Home</a> <a href=\"/people/\">People</a> <a href=\"/contact\">Contact</a></nav>\n<p>Nothing here</p>")

// ControlCase names the well-behaved case: a small page that must stay
// quick to fetch whatever the other hosts are doing.
const ControlCase = "control"

// Ways a slow case is ended; see Case.Deadline.
const (
	DeadlineFirstByte = "first-byte" // the response header deadline (fetch.Config.HeaderTimeout)
	DeadlineIdle      = "idle"       // the silence-between-reads deadline (fetch.Config.IdleTimeout)
	DeadlineTotal     = "total"      // the whole-fetch deadline (fetch.Config.Timeout)
)

// HostileOptions configures the hostile site started by StartHostile.
type HostileOptions struct {
	// TrickleGap is the pause before each byte of the trickled cases,
	// default DefaultTrickleGap. Keep it shorter than the fetcher's idle
	// deadline so that only the first-byte or total deadline can end those
	// fetches, as their Case.Deadline says.
	TrickleGap time.Duration
	// FarmHosts is how many invented hosts the link farm links to
	// (site-0001.farm.example …), default DefaultFarmHosts. Every one of
	// them is served and listed in Resolve, so a crawler that wrongly
	// expands the farm still never leaves loopback.
	FarmHosts int
	// Logger receives the servers' own errors (at Debug: a hostile site's
	// clients hang up on it all the time). Nil discards.
	Logger *slog.Logger
}

// Case is one hostile behaviour and what a fetch of URL must end in, under a
// fetcher configured as tests configure it: loopback allowed (every case
// lives on 127.0.0.1), private and link-local addresses refused, the
// fetcher's default size limits (5 MiB body, 10 redirects, 128 KiB and
// 256 lines of header) and deadlines of a second or more.
type Case struct {
	Name string // unique, lower-case words joined by "-"
	URL  string // where the fetch starts
	// WantClass is the fetch.Class the fetch must end in, as a string;
	// "" means fetched successfully.
	WantClass string
	// WantCrawlClass is the class a crawl answers the case's URL with,
	// when it differs from the fetch's: a crawler's supervisor knows more
	// than one fetch (a soft 404 needs the host's answer to an invented
	// path). "" means the same as WantClass; see CrawlClass.
	WantCrawlClass string
	Note           string // what the case does and why it ends as it does

	// Slow cases end only when one of the fetcher's deadlines fires;
	// Deadline names which one (DeadlineFirstByte, DeadlineIdle or
	// DeadlineTotal) for a fetcher whose first-byte deadline is shorter
	// than its idle deadline and both shorter than its total deadline (with
	// equal ones, either of them may fire first). A test can bound the
	// fetch by that deadline. Every other case must end without waiting on
	// a deadline.
	Slow     bool
	Deadline string

	// Extra expectations; zero values are not checked.
	WantStatus    int    // final HTTP status on the response
	WantTruncated bool   // the body exceeds the default body limit
	WantCharset   string // charset the body was decoded from (fetch's lower-case canonical name)
	WantText      string // substring of the body decoded to UTF-8
	WantBody      string // the exact decoded body
	WantURL       string // final URL after redirects and meta refreshes
}

// CrawlClass is the class a crawl must answer the case with.
func (c Case) CrawlClass() string {
	if c.WantCrawlClass != "" {
		return c.WantCrawlClass
	}
	return c.WantClass
}

// Hostile is a running hostile site. Its methods are safe for concurrent
// use.
type Hostile struct {
	opts   HostileOptions
	errLog *log.Logger

	httpLn, tlsLn net.Listener
	httpSrv       *http.Server
	tlsSrv        *http.Server
	httpAddr      string
	tlsAddr       string

	cases   []Case
	byHost  map[string]*hostileSpec // HTTP and TLS hosts
	raws    []*rawListener
	resolve map[string]string
	hosts   []string

	// Generated once at start: the bodies too large to build per request.
	bombMember []byte // one gzip member: 1 MiB of zeros
	hugeChunk  []byte // 64 KiB of HTML lines
	manyLinks  []byte
	nested     []byte
	pngImage   []byte
	cp1251Page []byte
	sjisPage   []byte

	done chan struct{} // closed by Close: every handler and raw connection returns

	mu       sync.Mutex
	closed   bool
	log      []Request
	conns    map[net.Conn]struct{} // raw connections open
	handlers sync.WaitGroup        // HTTP handlers and raw connections in flight
	loops    sync.WaitGroup        // Serve goroutines and accept loops

	closeOnce sync.Once
	closeErr  error
}

// hostileSpec is a case and how it is served: by http (on the HTTP or TLS
// server) or by raw (on a listener of its own).
type hostileSpec struct {
	Case
	host   string
	path   string // path (with query) of URL
	https  bool
	robots bool // answers /robots.txt itself rather than with allow-all

	http func(w http.ResponseWriter, r *http.Request)

	rawStatus int // status the raw case claims, for the log; 0 for none
	raw       func(c net.Conn, done <-chan struct{})
}

// rawListener serves one raw case.
type rawListener struct {
	ln   net.Listener
	spec *hostileSpec
}

// StartHostile starts the hostile site on 127.0.0.1: an HTTP server, a TLS
// server and one raw TCP listener per malformed-HTTP case, each at a free
// port. Cases lists what is served; Resolve maps every host name to its
// server for fetch.Config.Resolve. Close it when done.
//
// One name is deliberately mapped off loopback: dns-private.hostile.example
// resolves to 10.0.0.1:80, standing for a DNS answer with a private
// address. A fetcher must refuse it before dialing; nothing listens there
// and nothing may ever try to connect.
func StartHostile(opts HostileOptions) (*Hostile, error) {
	if opts.TrickleGap < 0 {
		return nil, fmt.Errorf("testweb: negative trickle gap %s", opts.TrickleGap)
	}
	if opts.TrickleGap == 0 {
		opts.TrickleGap = DefaultTrickleGap
	}
	if opts.FarmHosts < 0 || opts.FarmHosts > 9999 {
		return nil, fmt.Errorf("testweb: link farm of %d hosts: must be 1..9999", opts.FarmHosts)
	}
	if opts.FarmHosts == 0 {
		opts.FarmHosts = DefaultFarmHosts
	}
	h := &Hostile{
		opts:    opts,
		errLog:  log.New(io.Discard, "", 0),
		byHost:  map[string]*hostileSpec{},
		resolve: map[string]string{},
		conns:   map[net.Conn]struct{}{},
		done:    make(chan struct{}),
	}
	if opts.Logger != nil {
		h.errLog = slog.NewLogLogger(opts.Logger.Handler(), slog.LevelDebug)
	}
	if err := h.generate(); err != nil {
		return nil, err
	}
	cert, err := selfSigned("bad-tls." + HostDomain)
	if err != nil {
		return nil, fmt.Errorf("testweb: hostile certificate: %w", err)
	}

	var listeners []net.Listener
	fail := func(err error) (*Hostile, error) {
		for _, ln := range listeners {
			ln.Close()
		}
		return nil, err
	}
	listen := func() (net.Listener, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testweb: listen on loopback: %w", err)
		}
		listeners = append(listeners, ln)
		return ln, nil
	}
	if h.httpLn, err = listen(); err != nil {
		return fail(err)
	}
	if h.tlsLn, err = listen(); err != nil {
		return fail(err)
	}
	h.httpAddr, h.tlsAddr = h.httpLn.Addr().String(), h.tlsLn.Addr().String()

	specs := h.specs()
	for _, s := range specs {
		if s.raw != nil {
			ln, err := listen()
			if err != nil {
				return fail(err)
			}
			h.raws = append(h.raws, &rawListener{ln: ln, spec: s})
			h.resolve[s.host+":80"] = ln.Addr().String()
			continue
		}
		if s.http == nil {
			continue // served elsewhere, or nowhere (dns-private)
		}
		h.byHost[s.host] = s
		if s.https {
			h.resolve[s.host+":443"] = h.tlsAddr
		} else {
			h.resolve[s.host+":80"] = h.httpAddr
		}
	}
	for i := 1; i <= opts.FarmHosts; i++ {
		h.resolve[farmHost(i)+":80"] = h.httpAddr
	}
	// Standing for a DNS answer with a private address: see StartHostile.
	h.resolve["dns-private."+HostDomain+":80"] = "10.0.0.1:80"

	seen := map[string]bool{}
	for hp := range h.resolve {
		host, _, _ := net.SplitHostPort(hp)
		if !seen[host] {
			seen[host] = true
			h.hosts = append(h.hosts, host)
		}
	}
	sort.Strings(h.hosts)
	for _, s := range specs {
		h.cases = append(h.cases, s.Case)
	}

	h.httpSrv = h.newServer()
	h.tlsSrv = h.newServer()
	tlsLn := tls.NewListener(h.tlsLn, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	h.serve(h.httpSrv, h.httpLn)
	h.serve(h.tlsSrv, tlsLn)
	for _, rl := range h.raws {
		h.loops.Add(1)
		go h.acceptRaw(rl)
	}
	return h, nil
}

func (h *Hostile) newServer() *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          h.errLog,
	}
}

func (h *Hostile) serve(srv *http.Server, ln net.Listener) {
	h.loops.Add(1)
	go func() {
		defer h.loops.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.errLog.Printf("testweb: hostile serve %s: %v", ln.Addr(), err)
		}
	}()
}

// Addr is the HTTP server's address, "127.0.0.1:PORT".
func (h *Hostile) Addr() string { return h.httpAddr }

// Cases returns the cases, in a fixed order, control first.
func (h *Hostile) Cases() []Case { return append([]Case(nil), h.cases...) }

// Hosts lists every host name the site answers for (the link farm's
// included), sorted.
func (h *Hostile) Hosts() []string { return append([]string(nil), h.hosts...) }

// Resolve maps "host:port" to "ip:port" for every host, the form
// fetch.Config.Resolve takes. Every address is on 127.0.0.1 except the
// one of dns-private.hostile.example (see StartHostile).
func (h *Hostile) Resolve() map[string]string {
	m := make(map[string]string, len(h.resolve))
	for k, v := range h.resolve {
		m[k] = v
	}
	return m
}

// Log returns a copy of every request received so far, in arrival order,
// raw listeners' included. For a raw case Status is the code on the status
// line it writes (0 when it writes none); Path is "" when the request could
// not be read.
func (h *Hostile) Log() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.log...)
}

// Close stops every listener, cuts every connection (a hostile response
// never finishes on its own), and waits for every handler, raw connection
// and server goroutine to return. Calling it again returns the first
// result.
func (h *Hostile) Close() error {
	h.closeOnce.Do(func() {
		h.mu.Lock()
		h.closed = true
		close(h.done)
		for c := range h.conns {
			c.Close()
		}
		h.mu.Unlock()
		for _, rl := range h.raws {
			rl.ln.Close()
		}
		var errs []error
		for _, srv := range []*http.Server{h.httpSrv, h.tlsSrv} {
			if err := srv.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		h.loops.Wait()
		h.handlers.Wait()
		if err := errors.Join(errs...); err != nil {
			h.closeErr = fmt.Errorf("testweb: close hostile site: %w", err)
		}
	})
	return h.closeErr
}

// enter registers a handler or connection in flight; false once closed.
func (h *Hostile) enter() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.handlers.Add(1)
	return true
}

func (h *Hostile) logRequest(r Request) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, r)
	return len(h.log) - 1
}

func (h *Hostile) setStatus(i, status int) {
	h.mu.Lock()
	h.log[i].Status = status
	h.mu.Unlock()
}

// ServeHTTP answers the HTTP and TLS servers' requests by Host header.
func (h *Hostile) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if !h.enter() {
		rw.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	defer h.handlers.Done()
	host := canonicalHost(r.Host)
	i := h.logRequest(Request{Host: host, Path: r.URL.RequestURI(), Time: time.Now(), UserAgent: r.UserAgent()})
	w := &statusWriter{ResponseWriter: rw, set: func(code int) { h.setStatus(i, code) }}

	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeBody(w, http.StatusMethodNotAllowed, textType, []byte("method not allowed\n"))
		return
	}
	spec := h.byHost[host]
	robots := r.URL.Path == "/robots.txt"
	farm := isFarmHost(host, h.opts.FarmHosts)
	landing := host == "127.0.0.1" || host == "localhost" // targets of redirect-loopback and redirect-localhost
	switch {
	case spec != nil && (!robots || spec.robots):
		spec.http(w, r)
	case robots && (spec != nil || farm || landing):
		writeBody(w, http.StatusOK, textType, []byte(allowAll))
	case farm:
		h.farmSite(w, r, host)
	case landing:
		writeHTML(w, page("Landing", "<p>landed on "+htmlEscape(host)+r.URL.EscapedPath()+"</p>"))
	default:
		nf := notFound("unknown host " + host)
		writeBody(w, nf.status, nf.ctype, nf.body)
	}
}

// statusWriter records the status of a response in the log as it is sent.
type statusWriter struct {
	http.ResponseWriter
	set  func(int)
	sent bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.sent {
		w.sent = true
		w.set(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if !w.sent {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

const allowAll = "User-agent: *\nAllow: /\n"

func writeBody(w http.ResponseWriter, status int, ctype string, body []byte) {
	if ctype != "" {
		w.Header().Set("Content-Type", ctype)
	} else {
		w.Header()["Content-Type"] = nil // no sniffing by the server
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body) // a client that hung up is its own problem
}

func writeHTML(w http.ResponseWriter, html string) {
	writeBody(w, http.StatusOK, htmlType, []byte(html))
}

func redirect(w http.ResponseWriter, status int, location string) {
	w.Header().Set("Location", location)
	writeBody(w, status, htmlType, []byte(page("Moved", "<p>Moved.</p>")))
}

func hostURL(host, path string) string { return "http://" + host + path }

// specs builds the case table. Listeners' addresses are known by now; the
// raw listeners' are not needed by any URL, since raw hosts are reached by
// name through Resolve.
func (h *Hostile) specs() []*hostileSpec {
	_, httpPort, _ := net.SplitHostPort(h.httpAddr)
	gap := h.opts.TrickleGap
	var out []*hostileSpec
	add := func(s *hostileSpec) {
		s.host = s.Name + "." + HostDomain
		if s.path == "" {
			s.path = "/"
		}
		scheme := "http"
		if s.https {
			scheme = "https"
		}
		s.URL = scheme + "://" + s.host + s.path
		out = append(out, s)
	}
	raw := func(name, class string, status int, note string, serve func(c net.Conn, done <-chan struct{})) *hostileSpec {
		return &hostileSpec{Case: Case{Name: name, WantClass: class, Note: note}, rawStatus: status, raw: serve}
	}
	html := func(name, class, note string, serve func(w http.ResponseWriter, r *http.Request)) *hostileSpec {
		return &hostileSpec{Case: Case{Name: name, WantClass: class, Note: note}, http: serve}
	}
	with := func(s *hostileSpec, f func(s *hostileSpec)) *hostileSpec { f(s); return s }

	// The control host: a small page, always quick.
	add(with(html(ControlCase, "", "A well-behaved host: a small page, answered at once. Fetched alongside the slow cases to show they hold nothing else up.",
		func(w http.ResponseWriter, r *http.Request) {
			writeHTML(w, page("Control", "<h1>Control</h1>\n<p>A well-behaved control page.</p>"))
		}), func(s *hostileSpec) { s.WantText, s.WantStatus = "well-behaved control page", 200 }))

	// Hangs: the server accepts and reads the request, then stalls.
	add(with(raw("accept-silence", "timeout", 0,
		"Accepts the connection and reads the request, then never sends a byte: only the first-byte deadline ends it.",
		func(c net.Conn, _ <-chan struct{}) { drain(c) }),
		func(s *hostileSpec) { s.Slow, s.Deadline = true, DeadlineFirstByte }))
	add(with(raw("headers-trickle", "timeout", 200,
		fmt.Sprintf("Sends the response header one byte every %s, forever: each read is within the idle deadline, so the first-byte deadline must end it.", gap),
		func(c net.Conn, done <-chan struct{}) {
			head := "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
			filler := "X-Trickle: " + strings.Repeat("slow", 16) + "\r\n"
			trickleBytes(c, done, gap, func(i int) byte {
				if i < len(head) {
					return head[i]
				}
				return filler[(i-len(head))%len(filler)]
			})
		}), func(s *hostileSpec) { s.Slow, s.Deadline = true, DeadlineFirstByte }))
	add(with(raw("body-trickle", "timeout", 200,
		fmt.Sprintf("Sends a complete header promising 1,000,000 bytes, then the body one byte every %s: neither the first-byte nor the idle deadline fires, so the total deadline must end it.", gap),
		func(c net.Conn, done <-chan struct{}) {
			if !writeAll(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 1000000\r\n\r\n") {
				return
			}
			line := "<p>slowly, one byte at a time</p>\n"
			trickleBytes(c, done, gap, func(i int) byte { return line[i%len(line)] })
		}), func(s *hostileSpec) { s.Slow, s.Deadline = true, DeadlineTotal }))
	add(with(raw("content-length-larger-held", "timeout", 200,
		"Promises 5000 bytes, sends 24 and keeps the connection open in silence: the idle deadline ends it.",
		func(c net.Conn, _ <-chan struct{}) {
			if writeAll(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5000\r\n\r\n<p>and then nothing</p>\n") {
				drain(c)
			}
		}), func(s *hostileSpec) { s.Slow, s.Deadline = true, DeadlineIdle }))

	// Broken HTTP: connections closed early, lengths that lie, garbage.
	add(raw("closed-after-request", "protocol", 0,
		"Reads the request and closes the connection without a byte of response.",
		func(net.Conn, <-chan struct{}) {}))
	add(raw("closed-mid-headers", "protocol", 200,
		"Closes the connection halfway through the response header.",
		writeThenClose("HTTP/1.1 200 OK\r\nContent-Type: text/ht")))
	add(raw("closed-mid-body", "protocol", 200,
		"Sends a chunked body and closes inside the first chunk, before the terminating chunk.",
		writeThenClose("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n<p>the first part of a body that never ends")))
	add(raw("content-length-larger", "protocol", 200,
		"Promises 5000 bytes, sends 24 and closes: a truncated body is an error, not a page.",
		writeThenClose("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5000\r\n\r\n<p>and then it closes</p>\n")))
	short := "<p>counted</p>"
	add(with(raw("content-length-smaller", "", 200,
		"Promises 14 bytes and sends more: the body is the 14 bytes promised; the rest is not part of the response.",
		writeThenClose("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: "+strconv.Itoa(len(short))+
			"\r\nConnection: close\r\n\r\n"+short+"<p>EXTRA BYTES BEYOND THE LENGTH</p>")),
		func(s *hostileSpec) { s.WantBody, s.WantStatus = short, 200 }))
	add(raw("garbled-status", "protocol", 0,
		"Answers with a status line that is not HTTP: \"HTPT/1.l 2OO 0K\".",
		writeThenClose("HTPT/1.l 2OO 0K\r\nContent-Type: text/html\r\n\r\n<p>garbled</p>")))
	add(with(raw("status-999", "bad-status", 999,
		"Answers status 999, which no standard defines: a bad status, the response kept.",
		writeThenClose("HTTP/1.1 999 Request Denied\r\nContent-Type: text/html\r\nContent-Length: 16\r\nConnection: close\r\n\r\n<p>go away</p>\r\n")),
		func(s *hostileSpec) { s.WantStatus = 999 }))
	add(raw("status-0", "protocol", 0,
		"Answers status 0: not a three-digit code, so the status line is malformed.",
		writeThenClose("HTTP/1.1 0 OK\r\nContent-Type: text/html\r\nContent-Length: 9\r\nConnection: close\r\n\r\n<p>0</p>\n")))
	add(raw("ten-thousand-headers", "too-large", 200,
		"Sends 10,000 header lines of 8 bytes (80 KB, under the header byte cap): the header line cap refuses it.",
		writeThenClose("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"+strings.Repeat("X-A: b\r\n", 10_000)+"Content-Length: 9\r\n\r\n<p>ok</p>\n")))
	add(raw("megabyte-header", "too-large", 200,
		"Sends one header line a megabyte long: the header byte cap refuses it.",
		writeThenClose("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Big: "+strings.Repeat("a", 1<<20)+"\r\nContent-Length: 9\r\n\r\n<p>ok</p>\n")))
	add(with(raw("high-bit-headers", "", 200,
		"Sends header values with bytes that are not UTF-8 (Latin-1 and windows-1251): the page is fetched and the values made valid UTF-8.",
		writeThenClose("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nX-Author: Fran\xe7ois M\xfcller\r\nX-Title: \xcf\xf0\xe8\xe2\xe5\xf2 \xff\xfe\r\n"+
			"Content-Length: 29\r\nConnection: close\r\n\r\n<p>headers are not utf-8</p>\n")),
		func(s *hostileSpec) { s.WantText, s.WantStatus = "headers are not utf-8", 200 }))

	// Redirects.
	add(with(html("redirect-loop", "redirect", "/a redirects to /b, which redirects back to /a.",
		func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/a":
				redirect(w, http.StatusFound, "/b")
			case "/b":
				redirect(w, http.StatusMovedPermanently, "/a")
			default:
				redirect(w, http.StatusFound, "/a")
			}
		}), func(s *hostileSpec) { s.path = "/a" }))
	add(with(html("redirect-chain-30", "redirect", "A chain of 30 redirects /hop/0 → /hop/1 → … → /hop/30 that does end in a page, beyond the default cap of 10 hops.",
		func(w http.ResponseWriter, r *http.Request) {
			n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hop/"))
			switch {
			case err != nil || n < 0 || n > 30:
				writeBody(w, http.StatusNotFound, htmlType, []byte(page("Not found", "<p>no such hop</p>")))
			case n == 30:
				writeHTML(w, page("End of the chain", "<p>end of the chain</p>"))
			default:
				redirect(w, http.StatusFound, "/hop/"+strconv.Itoa(n+1))
			}
		}), func(s *hostileSpec) { s.path = "/hop/0" }))
	relHost := "redirect-relative." + HostDomain
	add(with(html("redirect-relative", "", "Redirects with relative Locations (\"../next/hop\", then \"end\"), resolved against the current URL: ends on /next/end.",
		func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/dir/start":
				redirect(w, http.StatusMovedPermanently, "../next/hop")
			case "/next/hop":
				redirect(w, http.StatusFound, "end")
			case "/next/end":
				writeHTML(w, page("Relative", "<p>reached by relative redirects</p>"))
			default:
				writeBody(w, http.StatusNotFound, htmlType, []byte(page("Not found", "<p>not here</p>")))
			}
		}), func(s *hostileSpec) {
		s.path, s.WantURL, s.WantText = "/dir/start", hostURL(relHost, "/next/end"), "reached by relative redirects"
	}))
	add(html("redirect-no-location", "redirect", "Answers 302 Found with no Location header.",
		func(w http.ResponseWriter, r *http.Request) {
			writeBody(w, http.StatusFound, htmlType, []byte(page("Found", "<p>found, but where?</p>")))
		}))
	loopTarget := "http://127.0.0.1:" + httpPort + "/landing/loopback"
	add(with(html("redirect-loopback", "", "Redirects to "+loopTarget+". Allowed only because tests allow loopback; a default fetcher refuses it (blocked-address).",
		func(w http.ResponseWriter, r *http.Request) { redirect(w, http.StatusFound, loopTarget) }),
		func(s *hostileSpec) { s.WantURL, s.WantText = loopTarget, "landed on 127.0.0.1/landing/loopback" }))
	localTarget := "http://localhost:" + httpPort + "/landing/localhost"
	add(with(html("redirect-localhost", "", "Redirects to "+localTarget+": localhost is loopback, so it is allowed exactly when loopback is (tests allow it; a default fetcher refuses it as blocked-address).",
		func(w http.ResponseWriter, r *http.Request) { redirect(w, http.StatusFound, localTarget) }),
		func(s *hostileSpec) { s.WantURL, s.WantText = localTarget, "landed on localhost/landing/localhost" }))
	add(html("redirect-private", "blocked-address", "Redirects to http://10.0.0.1/admin: a private address, refused before dialing.",
		func(w http.ResponseWriter, r *http.Request) { redirect(w, http.StatusFound, "http://10.0.0.1/admin") }))
	add(html("redirect-link-local", "blocked-address", "Redirects to the cloud metadata address http://169.254.169.254/latest/meta-data/ (link-local), refused before dialing.",
		func(w http.ResponseWriter, r *http.Request) {
			redirect(w, http.StatusTemporaryRedirect, "http://169.254.169.254/latest/meta-data/")
		}))
	add(html("redirect-unqualified", "blocked-address", "Redirects to http://intranet/: a name without a dot, which a resolver's search list would complete into some internal host.",
		func(w http.ResponseWriter, r *http.Request) { redirect(w, http.StatusFound, "http://intranet/") }))
	refreshHost := "meta-refresh." + HostDomain
	add(with(html("meta-refresh", "", "The page says <meta http-equiv=refresh content=\"0; url=/refreshed\">: followed like a redirect.",
		func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/refreshed" {
				writeHTML(w, page("Refreshed", "<p>meta refresh followed</p>"))
				return
			}
			writeHTML(w, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0; url=/refreshed\">"+
				"<title>Moving</title></head><body><p>This page has moved.</p></body></html>\n")
		}), func(s *hostileSpec) {
		s.WantURL, s.WantText = hostURL(refreshHost, "/refreshed"), "meta refresh followed"
	}))
	add(&hostileSpec{Case: Case{Name: "dns-private", WantClass: "blocked-address",
		Note: "The name resolves to 10.0.0.1 (Resolve maps it there, as a DNS answer with a private address would): refused before dialing. Nothing listens there; nothing may connect."}})

	// Size.
	add(with(html("huge-body", "", "An 8 GiB page (Content-Length says so), generated as it is sent: kept up to the body limit and marked truncated.",
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", htmlType)
			w.Header().Set("Content-Length", strconv.FormatInt(HugeBodyBytes, 10))
			h.stream(w, r, HugeBodyBytes/int64(len(h.hugeChunk)), h.hugeChunk)
		}), func(s *hostileSpec) { s.WantTruncated, s.WantText = true, "huge page line" }))
	add(html("gzip-bomb", "too-large", fmt.Sprintf("A gzip body of about %d MB that expands to 10 GiB of zeros (one 1 MiB member repeated): refused by its compression ratio.", int64(BombBytes>>20)*int64(len(h.bombMember))>>20),
		func(w http.ResponseWriter, r *http.Request) {
			n := int64(BombBytes >> 20)
			w.Header().Set("Content-Type", htmlType)
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Length", strconv.FormatInt(n*int64(len(h.bombMember)), 10))
			h.stream(w, r, n, h.bombMember)
		}))

	// Not HTML.
	add(with(html("image-as-html", "not-html", "A PNG image served as text/html; charset=utf-8, at a path without a file extension, so only its bytes tell.",
		func(w http.ResponseWriter, r *http.Request) { writeBody(w, http.StatusOK, htmlType, h.pngImage) }),
		func(s *hostileSpec) { s.path = "/photo" }))
	add(with(html("pdf-as-html", "not-html", "A PDF document served as text/html, at a path without a file extension.",
		func(w http.ResponseWriter, r *http.Request) { writeBody(w, http.StatusOK, "text/html", []byte(pdfDoc)) }),
		func(s *hostileSpec) { s.path = "/paper" }))

	// Charsets.
	legacy := func(name, note, ctype string, body []byte, charset, want string) *hostileSpec {
		return with(html(name, "", note, func(w http.ResponseWriter, r *http.Request) { writeBody(w, http.StatusOK, ctype, body) }),
			func(s *hostileSpec) { s.WantCharset, s.WantText = charset, want })
	}
	add(legacy("cp1251-undeclared", "Russian text in windows-1251 with no charset anywhere (Content-Type text/html, no <meta>): detected.",
		"text/html", h.cp1251Page, "windows-1251", ruWant))
	add(legacy("cp1251-wrong-charset", "Russian text in windows-1251 declared charset=iso-8859-1: the bytes contradict the declaration and are decoded as windows-1251.",
		"text/html; charset=iso-8859-1", h.cp1251Page, "windows-1251", ruWant))
	add(legacy("sjis-undeclared", "Japanese text in Shift_JIS with no charset anywhere: detected.",
		"text/html", h.sjisPage, "shift_jis", jaWant))
	add(legacy("sjis-wrong-charset", "Japanese text in Shift_JIS declared charset=euc-jp: decoded as Shift_JIS.",
		"text/html; charset=euc-jp", h.sjisPage, "shift_jis", jaWant))
	inconsistent := append([]byte("<!DOCTYPE html>\n<html lang=\"ru\"><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=windows-1251\">"),
		h.cp1251Page[len(legacyHead):]...)
	add(legacy("charset-inconsistent", "The header says utf-8, the <meta> says windows-1251, the bytes are windows-1251: decoded as windows-1251.",
		"text/html; charset=utf-8", inconsistent, "windows-1251", ruWant))
	add(legacy("charset-unknown", "Shift_JIS text declared charset=shift_jisx0213, a label no decoder knows: treated as undeclared and detected.",
		"text/html; charset=shift_jisx0213", h.sjisPage, "shift_jis", jaWant))

	// TLS.
	add(with(html("bad-tls", "tls", "HTTPS with a self-signed certificate: refused by default; under fetch.Config.InsecureTLS fetched, with the problem recorded in Response.TLSError. robots.txt is behind the same certificate.",
		func(w http.ResponseWriter, r *http.Request) {
			writeHTML(w, page("Secure?", "<p>served behind a self-signed certificate</p>"))
		}), func(s *hostileSpec) { s.https = true }))

	// Misleading success.
	add(with(html("soft-404", "", "Answers 200 with a \"Page not found\" page for every path, robots.txt included (which then holds no rules): a success at fetch level; the soft-404 detector must recognise such pages.",
		func(w http.ResponseWriter, r *http.Request) {
			writeHTML(w, page("Page not found", "<h1>Page not found</h1>\n<p>Sorry, the page "+htmlEscape(r.URL.Path)+" does not exist on this site.</p>\n<p><a href=\"/\">Home</a></p>"))
		}), func(s *hostileSpec) {
		s.path, s.robots, s.WantStatus, s.WantText = "/people/no-such-person-4711", true, 200, "Page not found"
		s.WantCrawlClass = "soft-404"
	}))
	softHost := "soft-404-redirect." + HostDomain
	add(with(html("soft-404-redirect", "", "Answers every unknown path with 302 to the home page instead of 404: a success at fetch level, ending on /.",
		func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/" {
				redirect(w, http.StatusFound, "/")
				return
			}
			writeHTML(w, page("Home", "<h1>Welcome home</h1>"))
		}), func(s *hostileSpec) {
		s.path, s.WantURL, s.WantText = "/no/such/page", hostURL(softHost, "/"), "Welcome home"
		s.WantCrawlClass = "soft-404"
	}))
	add(with(html("soft-404-same-body", "", "Answers / with a home page and every other path in place with one fixed 200 page, a menu whose few words are those of the paths it lists: only its bytes, the same as the answer to an invented path, give it away as a soft 404.",
		func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/" {
				writeHTML(w, page("Home", "<h1>Welcome home</h1>\n<p>See our <a href=\"/people/contact\">people</a>.</p>"))
				return
			}
			writeHTML(w, sameBodyPage)
		}), func(s *hostileSpec) {
		s.path, s.WantStatus, s.WantText = "/people/contact", 200, "Nothing here"
		s.WantCrawlClass = "soft-404"
	}))
	add(with(html("robots-html", "", "/robots.txt is served as an HTML page (text/html) wrapping rules in markup: fetched as text; the robots parser must read it as the RFC says.",
		func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				writeHTML(w, page("robots.txt", "<pre>\nUser-agent: *\nDisallow: /private/\n</pre>\n<p>User-agent: * <br>Disallow: /</p>"))
				return
			}
			writeHTML(w, page("Robots as HTML", "<p>a page on a host whose robots.txt is HTML</p>"))
		}), func(s *hostileSpec) { s.path, s.robots, s.WantText = "/robots.txt", true, "Disallow" }))

	// Traps and floods.
	add(with(html("calendar-trap", "", "/calendar/YEAR/MONTH links to the next and previous month, forever: each page is fine; a crawler must bound the trap itself.",
		func(w http.ResponseWriter, r *http.Request) {
			if body, ok := calendarPage(r.URL.Path); ok {
				writeHTML(w, body)
				return
			}
			writeBody(w, http.StatusNotFound, htmlType, []byte(page("Not found", "<p>no such month</p>")))
		}), func(s *hostileSpec) { s.path, s.WantText = "/calendar/2026/11", `href="/calendar/2026/12"` }))
	add(with(html("deep-paths", "", "Every /a/a/…/a/ page links to \"a/\", one level deeper, forever.",
		func(w http.ResponseWriter, r *http.Request) {
			if body, ok := deepPage(r.URL.Path); ok {
				writeHTML(w, body)
				return
			}
			writeBody(w, http.StatusNotFound, htmlType, []byte(page("Not found", "<p>not here</p>")))
		}), func(s *hostileSpec) { s.path, s.WantText = "/a/", `href="a/"` }))
	add(with(html("link-farm", "", fmt.Sprintf("Links to %d invented hosts site-0001.farm.example …, each of which links to %d others: a link farm, fetched fine; a crawler must not expand it.", h.opts.FarmHosts, farmFanout),
		func(w http.ResponseWriter, r *http.Request) { writeHTML(w, farmHub(h.opts.FarmHosts)) }),
		func(s *hostileSpec) { s.WantText = `href="http://` + farmHost(h.opts.FarmHosts) + `/"` }))
	add(with(html("many-links", "", fmt.Sprintf("One page with %d links (about %d KB) to pages of its own host.", ManyLinks, len(h.manyLinks)>>10),
		func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/" {
				writeBody(w, http.StatusOK, htmlType, h.manyLinks)
				return
			}
			writeHTML(w, page("A link", "<p>one of many</p>\n<p><a href=\"/\">back</a></p>"))
		}), func(s *hostileSpec) { s.WantText = fmt.Sprintf(`href="/l/%d"`, ManyLinks) }))
	add(with(html("nested-markup", "", fmt.Sprintf("%d nested <div> elements around one paragraph (about %d KB).", NestDepth, len(h.nested)>>10),
		func(w http.ResponseWriter, r *http.Request) { writeBody(w, http.StatusOK, htmlType, h.nested) }),
		func(s *hostileSpec) { s.WantText = "the bottom of the nest" }))
	add(with(html("nul-bytes", "", "NUL bytes inside the text of an HTML page: fetched, each NUL replaced by U+FFFD.",
		func(w http.ResponseWriter, r *http.Request) {
			writeBody(w, http.StatusOK, "text/html", []byte(page("NUL", "<p>before\x00after</p>\n<p>"+strings.Repeat("Ordinary text around a stray control byte. ", 20)+"</p>")))
		}), func(s *hostileSpec) { s.WantText = "before\uFFFDafter" }))
	return out
}

// stream writes chunk n times, stopping early when the client goes away
// or the site closes.
func (h *Hostile) stream(w http.ResponseWriter, r *http.Request, n int64, chunk []byte) {
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	for i := int64(0); i < n; i++ {
		select {
		case <-h.done:
			return
		case <-r.Context().Done():
			return
		default:
		}
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
}

// acceptRaw serves one raw listener until it is closed.
func (h *Hostile) acceptRaw(rl *rawListener) {
	defer h.loops.Done()
	for {
		c, err := rl.ln.Accept()
		if err != nil {
			return // closed by Close
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			c.Close()
			return
		}
		h.conns[c] = struct{}{}
		h.handlers.Add(1)
		h.mu.Unlock()
		go func() {
			defer h.handlers.Done()
			defer func() {
				c.Close()
				h.mu.Lock()
				delete(h.conns, c)
				h.mu.Unlock()
			}()
			h.serveRaw(rl.spec, c)
		}()
	}
}

// serveRaw reads one request head, logs it, answers robots.txt politely
// and everything else with the case's behaviour.
func (h *Hostile) serveRaw(s *hostileSpec, c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	req, err := http.ReadRequest(bufio.NewReaderSize(c, 4096))
	_ = c.SetReadDeadline(time.Time{})
	entry := Request{Host: s.host, Time: time.Now()}
	if err == nil {
		entry.Host, entry.Path, entry.UserAgent = canonicalHost(req.Host), req.URL.RequestURI(), req.UserAgent()
	}
	if err == nil && req.URL.Path == "/robots.txt" {
		entry.Status = http.StatusOK
		h.logRequest(entry)
		writeAll(c, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(allowAll), allowAll))
		return
	}
	entry.Status = s.rawStatus
	h.logRequest(entry)
	if err != nil {
		return // not a request we can answer: close
	}
	s.raw(c, h.done)
}

// writeAll writes s with a generous deadline (Close cuts it short anyway)
// and reports whether it all went.
func writeAll(c net.Conn, s string) bool {
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := io.WriteString(c, s)
	return err == nil
}

func writeThenClose(s string) func(net.Conn, <-chan struct{}) {
	return func(c net.Conn, _ <-chan struct{}) { writeAll(c, s) }
}

// drain reads and discards until the client hangs up or Close cuts the
// connection: the server stays silent meanwhile.
func drain(c net.Conn) { _, _ = io.Copy(io.Discard, c) }

// trickleBytes writes next(0), next(1), … one byte per gap until the
// client hangs up or done is closed.
func trickleBytes(c net.Conn, done <-chan struct{}, gap time.Duration, next func(int) byte) {
	t := time.NewTicker(gap)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-done:
			return
		case <-t.C:
		}
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte{next(i)}); err != nil {
			return
		}
	}
}

// calendarPage is the month page of the calendar trap for a path
// /calendar/YEAR/MONTH, with links to the months either side.
func calendarPage(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/calendar/")
	if !ok {
		return "", false
	}
	ys, ms, ok := strings.Cut(strings.TrimSuffix(rest, "/"), "/")
	if !ok {
		return "", false
	}
	y, err1 := strconv.Atoi(ys)
	m, err2 := strconv.Atoi(ms)
	if err1 != nil || err2 != nil || y < 1 || y > 999_999_999 || m < 1 || m > 12 {
		return "", false
	}
	prevY, prevM, nextY, nextM := y, m-1, y, m+1
	if prevM == 0 {
		prevY, prevM = y-1, 12
	}
	if nextM == 13 {
		nextY, nextM = y+1, 1
	}
	month := time.Month(m).String()
	var b strings.Builder
	fmt.Fprintf(&b, "<h1>Events in %s %d</h1>\n<p>No events this month.</p>\n<ul class=\"nav\">\n", month, y)
	if prevY >= 1 {
		fmt.Fprintf(&b, "  <li><a href=\"/calendar/%d/%d\">previous month</a></li>\n", prevY, prevM)
	}
	fmt.Fprintf(&b, "  <li><a href=\"/calendar/%d/%d\">next month</a></li>\n</ul>", nextY, nextM)
	return page(fmt.Sprintf("Calendar: %s %d", month, y), b.String()), true
}

// deepPage is the page of the ever-deeper trap for a path made only of
// "a" segments and ending in a slash.
func deepPage(path string) (string, bool) {
	if len(path) < 3 || !strings.HasSuffix(path, "/") {
		return "", false
	}
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for _, s := range segs {
		if s != "a" {
			return "", false
		}
	}
	return page(fmt.Sprintf("Level %d", len(segs)),
		fmt.Sprintf("<p>Level %d of the archive.</p>\n<p><a href=\"a/\">deeper</a> · <a href=\"../\">up</a></p>", len(segs))), true
}

// The link farm: a hub on link-farm.hostile.example and FarmHosts invented
// hosts, each linking to farmFanout others and back to the hub.
const farmFanout = 20

func farmHost(i int) string { return fmt.Sprintf("site-%04d.farm.example", i) }

// isFarmHost reports whether host is one of the n farm hosts.
func isFarmHost(host string, n int) bool {
	num, ok := strings.CutPrefix(host, "site-")
	if !ok {
		return false
	}
	num, ok = strings.CutSuffix(num, ".farm.example")
	if !ok || len(num) != 4 || strings.Trim(num, "0123456789") != "" {
		return false
	}
	i, _ := strconv.Atoi(num)
	return i >= 1 && i <= n
}

func farmHub(n int) string {
	var b strings.Builder
	b.Grow(48 * n)
	b.WriteString("<h1>Best sites</h1>\n<ul>\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "<li><a href=\"http://%s/\">great deals %d</a></li>\n", farmHost(i), i)
	}
	b.WriteString("</ul>")
	return page("Best sites", b.String())
}

func (h *Hostile) farmSite(w http.ResponseWriter, r *http.Request, host string) {
	if r.URL.Path != "/" {
		writeBody(w, http.StatusNotFound, htmlType, []byte(page("Not found", "<p>not here</p>")))
		return
	}
	n := h.opts.FarmHosts
	i, _ := strconv.Atoi(host[len("site-") : len("site-")+4])
	var b strings.Builder
	fmt.Fprintf(&b, "<h1>Site %d of the network</h1>\n<ul>\n", i)
	for k := 1; k <= farmFanout; k++ {
		j := (i*7919+k*104729)%n + 1
		fmt.Fprintf(&b, "<li><a href=\"http://%s/\">partner %d</a></li>\n", farmHost(j), j)
	}
	fmt.Fprintf(&b, "</ul>\n<p><a href=\"http://link-farm.%s/\">directory</a></p>", HostDomain)
	writeHTML(w, page(fmt.Sprintf("Site %d", i), b.String()))
}

// Legacy-charset pages. The head carries no charset; the texts are long
// enough for detection, as real pages are.
const legacyHead = "<!DOCTYPE html>\n<html lang=\"xx\"><head>"

const (
	ruWant = "Сотрудники кафедры"
	jaWant = "研究室のメンバー"
)

const ruPage = legacyHead + "<title>Сотрудники кафедры прикладной математики</title></head>\n<body>\n" +
	"<h1>Сотрудники кафедры</h1>\n<p>Анна Сергеевна Волкова — доцент кафедры прикладной математики. " +
	"Читает лекции по теории вероятностей и математической статистике, руководит дипломными работами студентов.</p>\n" +
	"<p>Город: Новосибирск, Россия. Часы приёма: вторник и четверг, с десяти до двенадцати часов.</p>\n</body></html>\n"

const jaPage = legacyHead + "<title>研究室のメンバー紹介</title></head>\n<body>\n" +
	"<h1>研究室のメンバー</h1>\n<p>佐藤花子は大阪大学の准教授です。専門は計算言語学で、日本語の文法解析と機械翻訳の研究を行っています。</p>\n" +
	"<p>所在地：大阪府吹田市。連絡は研究室の事務までお願いします。学生の皆さんの見学を歓迎します。</p>\n</body></html>\n"

const pdfDoc = "%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n" +
	"2 0 obj\n<< /Type /Pages /Kids [] /Count 0 >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n"

// generate builds the bodies too large or too costly to build per request.
func (h *Hostile) generate() error {
	var err error
	if h.cp1251Page, err = charmap.Windows1251.NewEncoder().Bytes([]byte(strings.Replace(ruPage, "xx", "ru", 1))); err != nil {
		return fmt.Errorf("testweb: encode windows-1251 page: %w", err)
	}
	if h.sjisPage, err = japanese.ShiftJIS.NewEncoder().Bytes([]byte(strings.Replace(jaPage, "xx", "ja", 1))); err != nil {
		return fmt.Errorf("testweb: encode Shift_JIS page: %w", err)
	}
	// Replacing "xx" keeps the ASCII head the same length in both, which
	// charset-inconsistent relies on to swap in a <meta>.
	if !bytes.HasPrefix(h.cp1251Page, []byte(strings.Replace(legacyHead, "xx", "ru", 1))) {
		return errors.New("testweb: windows-1251 page lost its head")
	}

	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return fmt.Errorf("testweb: gzip bomb: %w", err)
	}
	if _, err := zw.Write(make([]byte, 1<<20)); err != nil {
		return fmt.Errorf("testweb: gzip bomb: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("testweb: gzip bomb: %w", err)
	}
	h.bombMember = gz.Bytes()

	var hb bytes.Buffer
	for i := 0; hb.Len() < 64<<10-64; i++ {
		fmt.Fprintf(&hb, "<p>huge page line %06d</p>\n", i)
	}
	for hb.Len() < 64<<10 {
		hb.WriteByte('\n')
	}
	h.hugeChunk = hb.Bytes()

	var lb bytes.Buffer
	lb.Grow(ManyLinks * 28)
	lb.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Everything</title></head><body>\n<h1>Everything</h1>\n")
	num := make([]byte, 0, 8)
	for i := 1; i <= ManyLinks; i++ {
		num = strconv.AppendInt(num[:0], int64(i), 10)
		lb.WriteString(`<a href="/l/`)
		lb.Write(num)
		lb.WriteString(`">`)
		lb.Write(num)
		lb.WriteString("</a>\n")
	}
	lb.WriteString("</body></html>\n")
	h.manyLinks = lb.Bytes()

	var nb bytes.Buffer
	nb.Grow(NestDepth * 11)
	nb.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Nest</title></head><body>\n")
	for i := 0; i < NestDepth; i++ {
		nb.WriteString("<div>")
	}
	nb.WriteString("<p>the bottom of the nest</p>")
	for i := 0; i < NestDepth; i++ {
		nb.WriteString("</div>")
	}
	nb.WriteString("\n</body></html>\n")
	h.nested = nb.Bytes()

	img := image.NewNRGBA(image.Rect(0, 0, 16, 16))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 37)
	}
	img.Set(0, 0, color.NRGBA{255, 0, 0, 255})
	var pb bytes.Buffer
	if err := png.Encode(&pb, img); err != nil {
		return fmt.Errorf("testweb: png: %w", err)
	}
	h.pngImage = pb.Bytes()
	return nil
}

// selfSigned makes a certificate for name signed by itself, which no
// fetcher trusts unless told to.
func selfSigned(name string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Hostile fixture"}},
		DNSNames:              []string{name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
