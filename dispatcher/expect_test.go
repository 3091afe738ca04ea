package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"backfill/cluster"
	"backfill/wire"
)

// logRecorder is a slog.Handler keeping every record, that a test can wait
// on.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
	more chan struct{}
}

func newLogRecorder() *logRecorder { return &logRecorder{more: make(chan struct{})} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	close(l.more)
	l.more = make(chan struct{})
	return nil
}

// attrs returns a record's attributes as strings.
func attrs(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

// wait returns the first record with message msg whose attributes include
// want, waiting up to d; ok is false if none came.
func (l *logRecorder) wait(msg string, want map[string]string, d time.Duration) (map[string]string, bool) {
	deadline := time.After(d)
	for i := 0; ; {
		l.mu.Lock()
		for ; i < len(l.recs); i++ {
			if l.recs[i].Message != msg {
				continue
			}
			a := attrs(l.recs[i])
			match := true
			for k, v := range want {
				match = match && a[k] == v
			}
			if match {
				l.mu.Unlock()
				return a, true
			}
		}
		more := l.more
		l.mu.Unlock()
		select {
		case <-more:
		case <-deadline:
			return nil, false
		}
	}
}

// expectWeb is twenty one-page sites, each a record's link.
func expectWeb(e *env) map[string]page {
	web := map[string]page{}
	lines := []string{"id,links"}
	for i := range 20 {
		u := fmt.Sprintf("https://site%d.example/", i)
		web[u] = page{}
		lines = append(lines, fmt.Sprintf("r%d,%s", i, u))
	}
	e.load("r.csv", csvOf(lines...))
	return web
}

// TestExpectWaits: with Expect 2, nothing is dispatched while one
// supervisor has joined, however long it waits, and the dispatcher says
// it is waiting; once the second joins, both get their share.
func TestExpectWaits(t *testing.T) {
	logs := newLogRecorder()
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Expect = 2
		c.ExpectTimeout = -1 // no limit
		c.Fields = []string{"email"}
		c.Logger = slog.New(logs)
	})
	web := expectWeb(e)
	digest := e.set.Digest()
	s1 := newSup(t, "s1", e.d.Endpoint(), 4, false, digest)
	e.run(context.Background())
	if !s1.join(5 * time.Second) {
		t.Fatal("s1: no welcome")
	}
	if _, ok := logs.wait("waiting for supervisors before dispatching", map[string]string{"supervisors": "1", "expected": "2", "timeout_seconds": "0"}, 10*time.Second); !ok {
		t.Fatal("no log line saying the dispatcher waits with one of two supervisors")
	}
	// Several heartbeat intervals and quiet spells pass (the old rules
	// would have dispatched): still nothing for s1.
	for range 20 {
		s1.poll(50 * time.Millisecond)
	}
	if len(s1.got) != 0 {
		t.Fatalf("s1 got %d tasks while one of two expected supervisors had joined", len(s1.got))
	}
	s2 := newSup(t, "s2", e.d.Endpoint(), 4, false, digest)
	if !s2.join(5 * time.Second) {
		t.Fatal("s2: no welcome")
	}
	st := crawl(t, e, []*testSup{s1, s2}, web, 20*time.Second)
	if e.err != nil {
		t.Fatal(e.err)
	}
	if len(s1.got) == 0 || len(s2.got) == 0 || len(st.requests) != len(web) {
		t.Errorf("s1 got %d tasks, s2 %d, %d URLs requested of %d", len(s1.got), len(s2.got), len(st.requests), len(web))
	}
	if _, ok := logs.wait("every expected supervisor joined; dispatching", map[string]string{"supervisors": "2"}, time.Second); !ok {
		t.Error("no log line saying every expected supervisor joined")
	}
}

// TestExpectTimeout: when the expected supervisors do not all join within
// ExpectTimeout, the dispatcher says so and crawls with those that did.
func TestExpectTimeout(t *testing.T) {
	logs := newLogRecorder()
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Expect = 3
		c.ExpectTimeout = 300 * time.Millisecond
		c.Fields = []string{"email"}
		c.Logger = slog.New(logs)
	})
	web := expectWeb(e)
	s1 := newSup(t, "s1", e.d.Endpoint(), 4, false, e.set.Digest())
	e.run(context.Background())
	if !s1.join(5 * time.Second) {
		t.Fatal("s1: no welcome")
	}
	st := crawl(t, e, []*testSup{s1}, web, 20*time.Second)
	if e.err != nil {
		t.Fatal(e.err)
	}
	if len(st.requests) != len(web) {
		t.Errorf("%d URLs requested of %d", len(st.requests), len(web))
	}
	if _, ok := logs.wait("not every expected supervisor joined in time; dispatching to those that did",
		map[string]string{"supervisors": "1", "expected": "3", "waited_seconds": "0.3"}, time.Second); !ok {
		t.Error("no warning that the expected supervisors did not all join")
	}
}

// TestSettleWaitsForResentAnswers: a dispatcher whose expected supervisors
// joined by Heartbeat (they ran before it: it restarted) waits
// answersQuiet after the last join, for the answers they send again on
// their Welcome, before it dispatches; one whose supervisors said Hello
// does not wait.
func TestSettleWaitsForResentAnswers(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		byBeat      bool
		since       time.Duration // from the last join
		members     int
		quarantined int // keys quarantined (before they joined)
		want        bool
	}{
		{name: "joined by hello", since: 0, members: 2, want: true},
		{name: "joined by heartbeat just now", byBeat: true, since: answersQuiet / 2, members: 2},
		{name: "joined by heartbeat a while ago", byBeat: true, since: answersQuiet, members: 2, want: true},
		{name: "one of two joined", byBeat: true, since: answersQuiet, members: 1},
		{name: "one of two joined, the other quarantined", since: answersQuiet, members: 1, quarantined: 1, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := &Dispatcher{log: slog.New(slog.DiscardHandler)}
			d.members = cluster.NewMembers(cluster.Admission{}, d.log, cluster.Hooks[*member]{
				Join:  func(c cluster.Member) (*member, error) { return &member{Member: c}, nil },
				Leave: func(*member, string) (int, error) { return 0, nil },
			})
			d.cfg.Expect, d.cfg.ExpectTimeout = 2, time.Hour
			now := start.Add(time.Second)
			for i := range tc.members {
				h := wire.Hello{Supervisor: fmt.Sprint("sup-", i), Endpoint: "inproc://sup-" + fmt.Sprint(i)}
				if _, ev, err := d.members.Register(h, wire.Peer{}, now); ev != cluster.Joined || err != nil {
					t.Fatalf("register %s: %v, %v", h.Supervisor, ev, err)
				}
			}
			for i := range tc.quarantined {
				d.members.Forged(wire.Peer{Key: fmt.Sprint("key-", i)}, "forger", "a test", now)
			}
			d.joinedByBeat, d.lastJoin = tc.byBeat, now.Add(-tc.since)
			if got := d.settle(start, now); got != tc.want {
				t.Errorf("settle = %v, want %v", got, tc.want)
			}
		})
	}
}
