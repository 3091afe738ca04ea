package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"backfill/etl"
	"backfill/fetch"
	"backfill/store"
	"backfill/wire"
)

// This file holds the test's stand-ins for the outside world, all real:
// web sites are HTTP servers on loopback reached under .test names through
// the fetcher's resolve override, and the dispatcher is a real ZeroMQ
// intake and task socket driven by the test.

const testUA = "backfill/1.0 (+https://backfill.example/about)"

// hit is one request a site received.
type hit struct {
	path string
	ua   string
	at   time.Time
}

// site is one web host: a robots.txt (empty means 404) and pages by path
// (anything else is 404). It logs every request with its arrival time.
type site struct {
	name   string
	srv    *httptest.Server
	robots string
	pages  map[string]string
	// hold, when set for a path, runs before that page is answered; tests
	// use it to prove two fetches are in progress at once.
	hold map[string]func()
	// missing, when set, answers every unknown path (robots.txt aside)
	// with 200 and this page: a soft-404 host.
	missing string

	mu   sync.Mutex
	hits []hit
}

func newSite(t *testing.T, name, robots string, pages map[string]string) *site {
	t.Helper()
	s := &site{name: name, robots: robots, pages: pages, hold: map[string]func(){}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits = append(s.hits, hit{path: r.URL.RequestURI(), ua: r.UserAgent(), at: time.Now()})
	hold := s.hold[r.URL.Path]
	s.mu.Unlock()
	if hold != nil {
		hold()
	}
	if r.URL.Path == "/robots.txt" {
		if s.robots == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, s.robots)
		return
	}
	body, ok := s.pages[r.URL.Path]
	if !ok && s.missing != "" {
		body, ok = s.missing, true
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	ctype := "text/html; charset=utf-8"
	switch path.Ext(r.URL.Path) {
	case ".js":
		ctype = "application/javascript"
	case ".json":
		ctype = "application/json"
		w.Header().Set("Access-Control-Allow-Origin", "*")
	}
	w.Header().Set("Content-Type", ctype)
	fmt.Fprint(w, body)
}

// log returns the requests received so far.
func (s *site) log() []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hit(nil), s.hits...)
}

func (s *site) requested(path string) bool {
	for _, h := range s.log() {
		if h.path == path {
			return true
		}
	}
	return false
}

// resolve maps each site's .test name on port 80 to its loopback server.
func resolve(sites ...*site) map[string]string {
	m := make(map[string]string)
	for _, s := range sites {
		m[s.name+":80"] = s.srv.Listener.Addr().String()
	}
	return m
}

// dispatcher plays the dispatcher: it owns a real intake socket and sorts
// what arrives into channels, and dials the supervisor to send Welcome and
// Tasks.
type dispatcher struct {
	t       *testing.T
	in      *wire.Receiver
	hellos  chan *wire.Hello
	beats   chan *wire.Heartbeat
	results chan *wire.Result
	surveys chan *wire.SurveyResult
	stop    chan struct{}
	done    chan struct{}
	out     *wire.Sender
}

func newDispatcher(t *testing.T, endpoint string) *dispatcher {
	t.Helper()
	in, err := wire.Listen(endpoint)
	if err != nil {
		t.Fatalf("dispatcher listen: %v", err)
	}
	d := &dispatcher{
		t: t, in: in,
		hellos:  make(chan *wire.Hello, 1000),
		beats:   make(chan *wire.Heartbeat, 1000),
		results: make(chan *wire.Result, 1000),
		surveys: make(chan *wire.SurveyResult, 1000),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go d.read()
	t.Cleanup(d.close)
	return d
}

func (d *dispatcher) read() {
	defer close(d.done)
	for {
		select {
		case <-d.stop:
			return
		default:
		}
		kind, v, err := d.in.Recv(50 * time.Millisecond)
		if err != nil {
			if errors.Is(err, wire.ErrTimeout) || errors.Is(err, wire.ErrBadFrame) {
				continue
			}
			return
		}
		switch kind {
		case wire.KindHello:
			d.hellos <- v.(*wire.Hello)
		case wire.KindHeartbeat:
			d.beats <- v.(*wire.Heartbeat)
		case wire.KindResult:
			d.results <- v.(*wire.Result)
		case wire.KindSurveyResult:
			d.surveys <- v.(*wire.SurveyResult)
		}
	}
}

func (d *dispatcher) close() {
	select {
	case <-d.stop:
		return
	default:
	}
	close(d.stop)
	<-d.done
	d.in.Close()
	if d.out != nil {
		d.out.Close()
	}
}

func (d *dispatcher) endpoint() string { return d.in.Endpoint() }

// hello waits for the next Hello.
func (d *dispatcher) hello() *wire.Hello {
	d.t.Helper()
	select {
	case h := <-d.hellos:
		return h
	case <-time.After(10 * time.Second):
		d.t.Fatal("no Hello within 10s")
		return nil
	}
}

// welcome answers a Hello the way the dispatcher does: dial the advertised
// endpoint and send Welcome.
func (d *dispatcher) welcome(h *wire.Hello) {
	d.t.Helper()
	d.welcomeWith(h, wire.Welcome{Dispatcher: "test", Run: "run-1"})
}

// welcomeWith sends w to the supervisor of h, dialling it first if need
// be.
func (d *dispatcher) welcomeWith(h *wire.Hello, w wire.Welcome) {
	d.t.Helper()
	if d.out == nil {
		out, err := wire.Dial(h.Endpoint)
		if err != nil {
			d.t.Fatalf("dial supervisor: %v", err)
		}
		d.out = out
	}
	if err := d.out.Send(wire.KindWelcome, w, 5*time.Second); err != nil {
		d.t.Fatalf("send welcome: %v", err)
	}
}

func (d *dispatcher) task(id string, lease int64, rawURL string) {
	d.t.Helper()
	d.handover(id, lease, rawURL, time.Time{})
}

// handover sends a task of a host that moved here, with the time its last
// request may have ended elsewhere.
func (d *dispatcher) handover(id string, lease int64, rawURL string, hostLast time.Time) {
	d.t.Helper()
	host, _ := taskHost(rawURL)
	task := wire.Task{ID: id, Lease: lease, URL: rawURL, Host: host, HostLast: hostLast}
	if err := d.out.Send(wire.KindTask, task, 5*time.Second); err != nil {
		d.t.Fatalf("send task %s: %v", id, err)
	}
}

// collect waits for n results and returns them by task ID.
func (d *dispatcher) collect(n int, within time.Duration) map[string]*wire.Result {
	d.t.Helper()
	got := make(map[string]*wire.Result)
	deadline := time.After(within)
	for len(got) < n {
		select {
		case r := <-d.results:
			if _, dup := got[r.TaskID]; dup {
				d.t.Errorf("second result for task %s", r.TaskID)
			}
			got[r.TaskID] = r
		case <-deadline:
			d.t.Fatalf("got %d of %d results within %v: %v", len(got), n, within, got)
		}
	}
	return got
}

// mappings loads the test mapping set.
func mappings(t *testing.T) *etl.Set {
	t.Helper()
	set, err := etl.LoadDir(filepath.Join("testdata", "mappings"))
	if err != nil {
		t.Fatalf("load mappings: %v", err)
	}
	return set
}

// openCache opens a real SQLite store in the test's temporary directory.
func openCache(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "cache.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testConfig is a Config for tests: fast heartbeats, short delays, loopback
// allowed, a real SQLite cache.
func testConfig(t *testing.T, d *dispatcher, sites ...*site) Config {
	t.Helper()
	return Config{
		Name:         "sup-test",
		Dispatcher:   d.endpoint(),
		Workers:      4,
		Mappings:     mappings(t),
		Fetch:        fetch.Config{UserAgent: testUA, Resolve: resolve(sites...), AllowLoopback: true, Timeout: 5 * time.Second},
		Cache:        openCache(t),
		DefaultDelay: 200 * time.Millisecond,
		Heartbeat:    100 * time.Millisecond,
		HelloMax:     300 * time.Millisecond,
	}
}

// running is a supervisor whose Run is in progress.
type running struct {
	sup    *Supervisor
	cancel context.CancelFunc
	errc   chan error
}

// start builds and runs a supervisor; cleanup stops it and checks that Run
// returned cleanly.
func start(t *testing.T, cfg Config) *running {
	t.Helper()
	sup, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{sup: sup, cancel: cancel, errc: make(chan error, 1)}
	go func() { r.errc <- sup.Run(ctx) }()
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return r
}

// stop cancels Run and waits for it to return.
func (r *running) stop() error {
	r.cancel()
	select {
	case err, ok := <-r.errc:
		if !ok {
			return nil
		}
		close(r.errc)
		return err
	case <-time.After(10 * time.Second):
		return errors.New("Run did not return within 10s of cancel")
	}
}

// register waits for the Hello and welcomes the supervisor.
func register(t *testing.T, d *dispatcher) *wire.Hello {
	t.Helper()
	h := d.hello()
	d.welcome(h)
	return h
}

// freeEndpoint finds a free loopback TCP port for a dispatcher that comes
// up later.
func freeEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "tcp://" + addr
}

// waitGoroutines polls until the goroutine count is back to at most n.
func waitGoroutines(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := runtime.NumGoroutine()
		if got <= n {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines left, want at most %d:\n%s", got, n, buf)
		}
		runtime.Gosched()
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// gaps returns the intervals between consecutive request arrivals.
func gaps(hits []hit) []time.Duration {
	sort.Slice(hits, func(i, j int) bool { return hits[i].at.Before(hits[j].at) })
	var out []time.Duration
	for i := 1; i < len(hits); i++ {
		out = append(out, hits[i].at.Sub(hits[i-1].at))
	}
	return out
}

func paths(hits []hit) string {
	var p []string
	for _, h := range hits {
		p = append(p, h.path)
	}
	return strings.Join(p, " ")
}

func newLogger(b *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// holdUntilCleanup is a site.hold that keeps a request unanswered until
// the test's cleanup releases it (a supervisor that stops first cancels
// its request anyway), before the site's server closes.
func holdUntilCleanup(t *testing.T) func() {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return func() { <-release }
}
