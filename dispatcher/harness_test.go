package dispatcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"backfill/etl"
	"backfill/store"
	"backfill/wire"
)

// page is what a test supervisor answers for a URL.
type page struct {
	fields []wire.Field
	links  []string
	class  string
	status int // with class: the HTTP status of a bad-status failure
}

func fld(name, value string) wire.Field {
	return wire.Field{Mapping: "profile", Name: name, Values: []string{value}, Match: name == "name"}
}

// env is a dispatcher on a real state directory and a real SQLite store.
type env struct {
	t     *testing.T
	dir   string
	set   *etl.Set
	st    store.Store
	d     *Dispatcher
	cfg   Config
	pages atomic.Int64
	wait  atomic.Int64
	done  chan struct{}
	sum   *Summary
	err   error
}

func loadSet(t *testing.T) *etl.Set {
	t.Helper()
	set, err := etl.LoadDir(filepath.Join("testdata", "mappings"))
	if err != nil {
		t.Fatalf("mappings: %v", err)
	}
	return set
}

func newEnv(t *testing.T, dir string, tweak func(*Config)) *env {
	t.Helper()
	e := &env{t: t, dir: dir, set: loadSet(t)}
	st, err := store.Open(context.Background(), filepath.Join(dir, "out.db"))
	if err != nil {
		t.Fatalf("store: %v", err)
	}
	e.st = st
	e.cfg = Config{
		StateDir:  filepath.Join(dir, "state"),
		Listen:    "tcp://127.0.0.1:*",
		Mappings:  e.set,
		Store:     st,
		Depth:     1,
		Heartbeat: 300 * time.Millisecond,
		Progress: func(p Progress) {
			e.pages.Store(p.Pages)
			e.wait.Store(int64(p.Waiting))
		},
	}
	if tweak != nil {
		tweak(&e.cfg)
	}
	e.d, err = New(e.cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { e.close() })
	return e
}

func (e *env) close() {
	if e.d != nil {
		if e.done != nil {
			<-e.done
		}
		e.d.Close()
		e.d = nil
	}
	if e.st != nil {
		e.st.Close()
		e.st = nil
	}
}

func (e *env) load(name, content string) LoadReport {
	e.t.Helper()
	path := filepath.Join(e.dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	rep, err := e.d.Load(context.Background(), path)
	if err != nil {
		e.t.Fatalf("Load: %v", err)
	}
	return rep
}

func (e *env) run(ctx context.Context) {
	e.done = make(chan struct{})
	go func() {
		defer close(e.done)
		e.sum, e.err = e.d.Run(ctx)
	}()
}

// runWithTwo starts two supervisors, s1 and s2, of capacity 3 for the
// mapping set, runs the dispatcher and waits until both are welcomed.
func (e *env) runWithTwo() []*testSup {
	e.t.Helper()
	digest := e.set.Digest()
	sups := []*testSup{
		newSup(e.t, "s1", e.d.Endpoint(), 3, false, digest),
		newSup(e.t, "s2", e.d.Endpoint(), 3, false, digest),
	}
	e.run(context.Background())
	for _, s := range sups {
		if !s.join(5 * time.Second) {
			e.t.Fatalf("%s: no welcome", s.hello.Supervisor)
		}
	}
	return sups
}

func (e *env) finished() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// records reads every record back from the store.
func (e *env) records() map[string]store.Record {
	e.t.Helper()
	out := make(map[string]store.Record)
	err := e.st.Records(context.Background(), func(r store.Record) error {
		out[r.ID] = r
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// testSup plays a supervisor over real sockets.
type testSup struct {
	t        *testing.T
	hello    wire.Hello
	recv     *wire.Receiver
	send     *wire.Sender
	welcomed bool
	held     []wire.Task
	got      []wire.Task
	lastBeat time.Time
	silent   bool // stops heartbeating
	// pace, when set, says what each result tells of its host's delay
	// and next time (wire.Result's Delay and Ready).
	pace func(wire.Task) (delay, ready time.Duration)
}

func newSup(t *testing.T, name, dispatcher string, capacity int, render bool, digest string) *testSup {
	t.Helper()
	recv, err := wire.Listen("tcp://127.0.0.1:*")
	if err != nil {
		t.Fatal(err)
	}
	send, err := wire.Dial(dispatcher)
	if err != nil {
		recv.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		send.Close()
		recv.Close()
	})
	return &testSup{t: t, recv: recv, send: send, hello: wire.Hello{
		Supervisor: name, Endpoint: recv.Endpoint(), Capacity: capacity, Render: render,
		Mappings: digest, Started: time.Now().UTC(),
	}}
}

// join sends Hello until a Welcome arrives (false if none within d).
func (s *testSup) join(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := s.send.Send(wire.KindHello, s.hello, time.Second); err != nil && !errors.Is(err, wire.ErrTimeout) {
			s.t.Fatal(err)
		}
		s.poll(100 * time.Millisecond)
		if s.welcomed {
			s.lastBeat = time.Now()
			return true
		}
	}
	return false
}

// poll takes the frames that arrive within wait (and any right behind
// them), and heartbeats when one is due.
func (s *testSup) poll(wait time.Duration) {
	if !s.silent && s.welcomed && time.Since(s.lastBeat) > 50*time.Millisecond {
		s.lastBeat = time.Now()
		hb := wire.Heartbeat{Hello: s.hello, InFlight: len(s.held), At: time.Now()}
		if err := s.send.Send(wire.KindHeartbeat, hb, time.Second); err != nil {
			s.t.Fatal(err)
		}
	}
	for {
		kind, v, err := s.recv.Recv(wait)
		if errors.Is(err, wire.ErrTimeout) {
			return
		}
		if err != nil {
			s.t.Fatal(err)
		}
		wait = 5 * time.Millisecond
		switch kind {
		case wire.KindWelcome:
			s.welcomed = true
		case wire.KindTask:
			task := *v.(*wire.Task)
			s.held = append(s.held, task)
			s.got = append(s.got, task)
		}
	}
}

func (s *testSup) answer(task wire.Task, web map[string]page) {
	s.t.Helper()
	p, ok := web[task.URL]
	res := wire.Result{TaskID: task.ID, Lease: task.Lease, Supervisor: s.hello.Supervisor, URL: task.URL, FetchedAt: time.Now()}
	switch {
	case !ok:
		res.Class, res.Status = "status", 404
	case p.class != "":
		res.Class, res.Status = p.class, p.status
	default:
		res.Status = 200
		res.Fields = p.fields
		for _, l := range p.links {
			res.Links = append(res.Links, wire.Link{URL: l})
		}
	}
	if s.pace != nil {
		res.Delay, res.Ready = s.pace(task)
	}
	if err := s.send.Send(wire.KindResult, res, time.Second); err != nil {
		s.t.Fatal(err)
	}
}

// crawl plays sups against the running dispatcher until Run returns,
// answering every task from web after checking the flow-control limits on
// everything held at that moment. It returns every task received.
type crawlStats struct {
	tasks       []wire.Task
	bySup       map[string]string // domain → supervisor
	maxHost     int
	maxSup      map[string]int
	requests    map[string]int
	supOfDomain map[string]map[string]bool
}

func crawl(t *testing.T, e *env, sups []*testSup, web map[string]page, timeout time.Duration) crawlStats {
	t.Helper()
	st := crawlStats{maxSup: make(map[string]int), requests: make(map[string]int), supOfDomain: make(map[string]map[string]bool)}
	deadline := time.Now().Add(timeout)
	for !e.finished() {
		if time.Now().After(deadline) {
			t.Fatalf("dispatcher still running after %v", timeout)
		}
		hostHeld := make(map[string]int)
		for _, s := range sups {
			s.poll(10 * time.Millisecond)
		}
		for _, s := range sups {
			if n := len(s.held); n > st.maxSup[s.hello.Supervisor] {
				st.maxSup[s.hello.Supervisor] = n
			}
			if len(s.held) > s.hello.Capacity {
				t.Errorf("%s holds %d tasks, capacity %d", s.hello.Supervisor, len(s.held), s.hello.Capacity)
			}
			for _, task := range s.held {
				hostHeld[task.Host]++
				_, dom := hostDomain(task.URL)
				if st.supOfDomain[dom] == nil {
					st.supOfDomain[dom] = make(map[string]bool)
				}
				st.supOfDomain[dom][s.hello.Supervisor] = true
				st.requests[task.URL]++
				st.tasks = append(st.tasks, task)
			}
		}
		for host, n := range hostHeld {
			st.maxHost = max(st.maxHost, n)
			if n > e.d.cfg.HostInFlight {
				t.Errorf("host %s has %d tasks in flight, limit %d", host, n, e.d.cfg.HostInFlight)
			}
		}
		for _, s := range sups {
			for _, task := range s.held {
				s.answer(task, web)
			}
			s.held = nil
		}
	}
	return st
}

func csvOf(lines ...string) string { return strings.Join(lines, "\n") + "\n" }
