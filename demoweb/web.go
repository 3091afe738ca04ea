package demoweb

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// snapshot is the small web as testweb serves it (TestSnapshot).
type snapshot struct {
	// Robots is each host's robots.txt at a Crawl-delay of
	// snapshotDelay; Pages each host's pages by path.
	Robots map[string]string            `json:"robots"`
	Pages  map[string]map[string]string `json:"pages"`
	// NotFound and Moved are the bodies of a 404 and of a 301, with
	// Placeholder where what they name goes.
	NotFound    string `json:"not_found"`
	Moved       string `json:"moved"`
	Placeholder string `json:"placeholder"`
	// Records is the sample records file; Truth the values a correct
	// crawl of it ends with, by record and field.
	Records string                       `json:"records"`
	Truth   map[string]map[string]string `json:"truth"`
}

// snapshotDelay is the Crawl-delay the snapshot's robots.txt files ask
// for; Start writes its own in their place.
const snapshotDelay = 1

//go:embed snapshot.json
var snapshotJSON []byte

func load() (*snapshot, error) {
	var s snapshot
	if err := json.Unmarshal(snapshotJSON, &s); err != nil {
		return nil, fmt.Errorf("demoweb: snapshot: %w", err)
	}
	return &s, nil
}

// Sample returns the sample records (CSV) and, per record id, the exact
// values a correct crawl at depth limit 1 ends with for each of its target
// fields ("" for one that must stay unfilled), as testweb.Sample does.
func Sample() (records []byte, truth map[string]map[string]string) {
	s, err := load()
	if err != nil {
		panic(err) // the embedded snapshot is the build's; TestSnapshot reads it
	}
	return []byte(s.Records), s.Truth
}

// Web is the running demo web.
type Web struct {
	snap   *snapshot
	delay  int
	srv    *http.Server
	addr   string
	served chan struct{}
}

// Start serves the demo web on 127.0.0.1 at a free port, every host's
// robots.txt asking for crawlDelay seconds between requests (0: no
// Crawl-delay line). Close it when done.
func Start(crawlDelay int) (*Web, error) {
	if crawlDelay < 0 {
		return nil, fmt.Errorf("demoweb: negative Crawl-delay %d", crawlDelay)
	}
	s, err := load()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demoweb: listen: %w", err)
	}
	w := &Web{snap: s, delay: crawlDelay, addr: ln.Addr().String(), served: make(chan struct{})}
	w.srv = &http.Server{Handler: w, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute,
		ErrorLog: log.New(io.Discard, "", 0)}
	go func() {
		defer close(w.served)
		w.srv.Serve(ln) // ErrServerClosed after Close
	}()
	return w, nil
}

// Addr is the listener's address, "127.0.0.1:PORT".
func (w *Web) Addr() string { return w.addr }

// Hosts lists the host names the web answers for, sorted.
func (w *Web) Hosts() []string {
	h := make([]string, 0, len(w.snap.Pages))
	for host := range w.snap.Pages {
		h = append(h, host)
	}
	sort.Strings(h)
	return h
}

// Resolve maps "host:80" to Addr for every host, the form
// fetch.Config.Resolve takes.
func (w *Web) Resolve() map[string]string {
	m := make(map[string]string, len(w.snap.Pages))
	for host := range w.snap.Pages {
		m[host+":80"] = w.addr
	}
	return m
}

// Close stops the listener, waits for the requests in flight and for the
// server goroutine to return.
func (w *Web) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := w.srv.Shutdown(ctx)
	if err != nil {
		w.srv.Close()
	}
	<-w.served
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("demoweb: shutdown %s: %w", w.addr, err)
	}
	return nil
}

// ServeHTTP answers by the Host header, as testweb's small web does.
func (w *Web) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	status, ctype, location, body := w.answer(host, r.URL.Path)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		status, ctype, location, body = http.StatusMethodNotAllowed, textType, "", "method not allowed\n"
		rw.Header().Set("Allow", "GET, HEAD")
	}
	if location != "" {
		rw.Header().Set("Location", location)
	}
	rw.Header().Set("Content-Type", ctype)
	rw.Header().Set("Content-Length", strconv.Itoa(len(body)))
	rw.WriteHeader(status)
	if r.Method != http.MethodHead {
		io.WriteString(rw, body)
	}
}

const (
	htmlType = "text/html; charset=utf-8"
	textType = "text/plain; charset=utf-8"
	jsonType = "application/json"
)

// answer is the response to a GET of path on host.
func (w *Web) answer(host, path string) (status int, ctype, location, body string) {
	s := w.snap
	pages, ok := s.Pages[host]
	if !ok {
		return http.StatusNotFound, htmlType, "", s.fill(s.NotFound, "unknown host "+host)
	}
	if path == "/robots.txt" {
		return http.StatusOK, textType, "", w.robots(host)
	}
	if b, ok := pages[path]; ok {
		ctype := htmlType
		if strings.HasSuffix(path, ".json") {
			ctype = jsonType
		}
		return http.StatusOK, ctype, "", b
	}
	if _, dir := pages[path+"/"]; dir {
		return http.StatusMovedPermanently, htmlType, path + "/", s.fill(s.Moved, path+"/")
	}
	return http.StatusNotFound, htmlType, "", s.fill(s.NotFound, host+path)
}

// fill puts what, escaped, in tmpl's placeholder.
func (s *snapshot) fill(tmpl, what string) string {
	return strings.Replace(tmpl, s.Placeholder, html.EscapeString(what), 1)
}

// robots is host's robots.txt with the web's Crawl-delay.
func (w *Web) robots(host string) string {
	line := fmt.Sprintf("Crawl-delay: %d\n", snapshotDelay)
	with := ""
	if w.delay > 0 {
		with = fmt.Sprintf("Crawl-delay: %d\n", w.delay)
	}
	return strings.Replace(w.snap.Robots[host], line, with, 1)
}
