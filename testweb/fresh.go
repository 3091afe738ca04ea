package testweb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Fresh is a fixture web whose pages change while a test runs, for
// testing recrawls: every page may carry an ETag (derived from its body)
// and a Last-Modified date, and a conditional request whose validators
// still hold is answered 304 Not Modified, as a careful server does. It
// logs the validators each request sent. Every host serves a robots.txt
// that allows everything. Its methods are safe for concurrent use.
type Fresh struct {
	srv    *http.Server
	addr   string
	delay  int
	served chan struct{}

	mu    sync.Mutex
	pages map[string]map[string]FreshPage // host → path → page
	log   []FreshRequest

	closeOnce sync.Once
	closeErr  error
}

// FreshPage is one page of a Fresh web.
type FreshPage struct {
	Body         string    // HTML
	ETag         bool      // send a strong ETag, a hash of Body
	LastModified time.Time // sent as Last-Modified unless zero
}

// FreshRequest is one request a Fresh web received.
type FreshRequest struct {
	Request
	IfNoneMatch     string
	IfModifiedSince string
}

// StartFresh starts an empty Fresh web on 127.0.0.1 at a free port, its
// robots.txt asking for crawlDelay seconds between requests (0: no
// Crawl-delay line). Put pages in it; Close it when done.
func StartFresh(crawlDelay int) (*Fresh, error) {
	if crawlDelay < 0 {
		return nil, fmt.Errorf("testweb: negative Crawl-delay %d", crawlDelay)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testweb: listen on loopback: %w", err)
	}
	f := &Fresh{addr: ln.Addr().String(), delay: crawlDelay, served: make(chan struct{}),
		pages: make(map[string]map[string]FreshPage)}
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() {
		defer close(f.served)
		f.srv.Serve(ln) // returns ErrServerClosed after Close
	}()
	return f, nil
}

// Put adds the page at host and path, or changes it.
func (f *Fresh) Put(host, path string, p FreshPage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	host = canonicalHost(host)
	if f.pages[host] == nil {
		f.pages[host] = make(map[string]FreshPage)
	}
	f.pages[host][path] = p
}

// Addr is the listener's address, "127.0.0.1:PORT".
func (f *Fresh) Addr() string { return f.addr }

// Resolve maps "host:80" of every host with a page to Addr.
func (f *Fresh) Resolve() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]string, len(f.pages))
	for h := range f.pages {
		m[h+":80"] = f.addr
	}
	return m
}

// Log returns a copy of every request received so far, in arrival order.
func (f *Fresh) Log() []FreshRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FreshRequest(nil), f.log...)
}

// Close stops the server and waits for requests in flight.
func (f *Fresh) Close() error {
	f.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := f.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.closeErr = fmt.Errorf("testweb: shutdown %s: %w", f.addr, err)
			f.srv.Close()
		}
		<-f.served
	})
	return f.closeErr
}

// ETagOf is the ETag a Fresh web sends for a page body.
func ETagOf(body string) string {
	sum := sha256.Sum256([]byte(body))
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}

// ServeHTTP answers by the Host header and logs the request.
func (f *Fresh) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	host := canonicalHost(r.Host)
	inm, ims := r.Header.Get("If-None-Match"), r.Header.Get("If-Modified-Since")
	f.mu.Lock()
	i := len(f.log)
	f.log = append(f.log, FreshRequest{
		Request:     Request{Host: host, Path: r.URL.RequestURI(), Time: time.Now(), UserAgent: r.UserAgent()},
		IfNoneMatch: inm, IfModifiedSince: ims,
	})
	site, known := f.pages[host]
	p, found := site[r.URL.Path]
	f.mu.Unlock()

	status := http.StatusOK
	h := rw.Header()
	switch {
	case !known:
		status = http.StatusNotFound
		h.Set("Content-Type", textType)
	case r.URL.Path == "/robots.txt" && !found:
		h.Set("Content-Type", textType)
	case !found:
		status = http.StatusNotFound
		h.Set("Content-Type", htmlType)
	default:
		h.Set("Content-Type", htmlType)
		etag := ""
		if p.ETag {
			etag = ETagOf(p.Body)
			h.Set("ETag", etag)
		}
		if !p.LastModified.IsZero() {
			h.Set("Last-Modified", p.LastModified.UTC().Format(http.TimeFormat))
		}
		if notModified(inm, ims, etag, p.LastModified) {
			status = http.StatusNotModified
		}
	}
	f.mu.Lock()
	f.log[i].Status = status
	f.mu.Unlock()

	var body string
	switch {
	case status == http.StatusNotModified:
		rw.WriteHeader(status)
		return
	case !known || !found && r.URL.Path != "/robots.txt":
		body = "not found\n"
	case r.URL.Path == "/robots.txt":
		body = "User-agent: *\nAllow: /\n"
		if f.delay > 0 {
			body += fmt.Sprintf("Crawl-delay: %d\n", f.delay)
		}
	default:
		body = p.Body
	}
	h.Set("Content-Length", fmt.Sprint(len(body)))
	rw.WriteHeader(status)
	if r.Method != http.MethodHead {
		io.WriteString(rw, body)
	}
}

// notModified evaluates a conditional GET (RFC 9110 §13.2.2):
// If-None-Match, when sent, decides alone (weak comparison); otherwise
// If-Modified-Since holds when the page changed no later than it says.
func notModified(inm, ims, etag string, modified time.Time) bool {
	if inm != "" {
		if etag == "" {
			return false
		}
		for _, t := range strings.Split(inm, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == strings.TrimPrefix(etag, "W/") {
				return true
			}
		}
		return false
	}
	if ims == "" || modified.IsZero() {
		return false
	}
	since, err := http.ParseTime(ims)
	return err == nil && !modified.Truncate(time.Second).After(since)
}
