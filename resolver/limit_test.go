package resolver

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"
)

// clock is a limiter's time in a test: now moves only by advance, and the
// timers the limiter sets fire when it passes them, in order.
type clock struct {
	mu     sync.Mutex
	t      time.Time
	timers []timer
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

type timer struct {
	at time.Time
	f  func()
}

func (c *clock) afterFunc(d time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = append(c.timers, timer{c.t.Add(d), f})
}

// advance moves the clock by d and fires the timers due, outside its
// lock (a timer takes the limiter's, which may be calling now).
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
		if len(c.timers) == 0 || c.timers[0].at.After(c.t) {
			c.mu.Unlock()
			return
		}
		t := c.timers[0]
		c.timers = c.timers[1:]
		c.mu.Unlock()
		t.f()
	}
}

func testLimiter(max int) (*limiter, *clock) {
	c := &clock{t: time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)}
	l := newLimiter(max)
	l.now, l.afterFunc = c.now, c.afterFunc
	return l, c
}

// step is one thing a limiter test does, and what it then expects.
type step struct {
	do string // "send N": N acquires (the ones with room return at once, the others queue);
	// "answer N" / "timeout N": release the N oldest queries sent, answered or timed out;
	// "wait D": the clock moves D
	n        int
	d        time.Duration
	window   float64 // expected after the step
	rate     float64
	inflight int
	waiting  int
}

// TestLimiter drives one server's limiter through slow start, cuts on
// time-outs and the pace, on a clock of the test's own: no sleeps.
func TestLimiter(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		max   int
		steps []step
	}{
		{"window starts at 8 and the ninth waits", 64, []step{
			{do: "send", n: 9, window: 8, inflight: 8, waiting: 1},
		}},
		{"slow start: one more per answer", 64, []step{
			{do: "send", n: 20, window: 8, inflight: 8, waiting: 12},
			{do: "answer", n: 4, window: 12, inflight: 12, waiting: 4},
			{do: "answer", n: 4, window: 16, inflight: 12, waiting: 0}, // the queue ran dry
		}},
		{"the window never passes max", 10, []step{
			{do: "send", n: 8, window: 8, inflight: 8},
			{do: "answer", n: 8, window: 10, inflight: 0},
		}},
		{"a time-out halves the window and paces at the busiest tenth", 64, []step{
			{do: "send", n: 8, window: 8, inflight: 8},
			{do: "answer", n: 8, window: 16, inflight: 0}, // 8 answers in one tenth of a second
			{do: "send", n: 16, window: 16, inflight: 16},
			{do: "timeout", n: 1, window: 8, rate: 80, inflight: 15},
		}},
		{"time-outs of queries sent before the cut cut nothing more", 64, []step{
			{do: "send", n: 8, window: 8, inflight: 8},
			{do: "answer", n: 8, window: 16, inflight: 0},
			{do: "send", n: 16, window: 16, inflight: 16},
			{do: "timeout", n: 1, window: 8, rate: 80, inflight: 15},
			{do: "timeout", n: 5, window: 8, rate: 80, inflight: 10},
		}},
		{"the pace admits a query a slot, on its timer", 64, []step{
			{do: "send", n: 8, window: 8, inflight: 8},
			{do: "answer", n: 8, window: 16, inflight: 0},
			{do: "send", n: 2, window: 16, inflight: 2},
			{do: "timeout", n: 1, window: 8, rate: 80, inflight: 1},
			{do: "send", n: 3, window: 8, rate: 80, inflight: 2, waiting: 2}, // one now, then one every 12.5 ms
			{do: "wait", d: 12 * ms, window: 8, rate: 80, inflight: 2, waiting: 2},
			{do: "wait", d: 1 * ms, window: 8, rate: 80, inflight: 3, waiting: 1},
			{do: "wait", d: 13 * ms, window: 8, rate: 80, inflight: 4, waiting: 0},
		}},
		{"the pace never falls below minRate", 64, []step{
			{do: "send", n: 1, window: 8, inflight: 1},
			{do: "timeout", n: 1, window: 8, rate: minRate, inflight: 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, c := testLimiter(tc.max)
			var sent []time.Time // the queries in flight, oldest first
			var waiting []chan time.Time
			collect := func() { // queued acquires admitted meanwhile
				for len(waiting) > 0 {
					select {
					case at := <-waiting[0]:
						sent = append(sent, at)
						waiting = waiting[1:]
						continue
					default:
					}
					break
				}
			}
			for i, s := range tc.steps {
				switch s.do {
				case "send":
					for range s.n {
						ch := make(chan time.Time, 1)
						waiting = append(waiting, ch)
						go func() {
							at, err := l.acquire(context.Background())
							if err == nil {
								ch <- at
							}
						}()
						waitFor(t, func() bool { // queued or admitted
							l.mu.Lock()
							defer l.mu.Unlock()
							return len(l.queue)+l.inflight >= len(sent)+len(waiting)
						})
					}
				case "answer", "timeout":
					for range s.n {
						collect()
						l.release(sent[0], s.do == "timeout")
						sent = sent[1:]
					}
				case "wait":
					c.advance(s.d)
				}
				waitFor(t, func() bool { collect(); return len(sent) == l.state().inflight })
				st := l.state()
				if st.window != s.window || st.rate != s.rate || st.inflight != s.inflight || st.waiting != s.waiting {
					t.Fatalf("step %d (%s %d %v): window %v rate %v in flight %d waiting %d; want %v %v %d %d",
						i, s.do, s.n, s.d, st.window, st.rate, st.inflight, st.waiting, s.window, s.rate, s.inflight, s.waiting)
				}
			}
		})
	}
}

// waitFor waits until cond holds: an acquire runs on its own goroutine
// and reaches the limiter's queue in its own time (a scheduling wait,
// not a timed one).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the limiter never got there")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLimiterTimeout: a first attempt waits a few round trips (at least
// minRTO, initialRTO before any), each later one twice as long, and the
// last one the whole limit.
func TestLimiterTimeout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rtts     []time.Duration
		attempt  int
		attempts int
		want     time.Duration
	}{
		{"no round trip yet", nil, 0, 3, initialRTO},
		{"a near server: at least minRTO", []time.Duration{time.Millisecond}, 0, 3, minRTO},
		{"doubled on the second attempt", []time.Duration{time.Millisecond}, 1, 3, 2 * minRTO},
		{"the last attempt has the whole limit", []time.Duration{time.Millisecond}, 2, 3, 2 * time.Second},
		{"a far server: srtt + 4 rttvar", []time.Duration{100 * time.Millisecond}, 0, 3, 300 * time.Millisecond},
		{"never past the limit", []time.Duration{900 * time.Millisecond}, 1, 3, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := testLimiter(64)
			for _, r := range tc.rtts {
				l.sample(r)
			}
			if got := l.timeout(tc.attempt, tc.attempts, 2*time.Second); got != tc.want {
				t.Errorf("timeout(%d of %d) = %v, want %v", tc.attempt, tc.attempts, got, tc.want)
			}
		})
	}
}

// TestLimiterCancel: a query given up while it waits leaves the queue
// and takes no room.
func TestLimiterCancel(t *testing.T) {
	l, _ := testLimiter(8)
	for range 8 {
		if _, err := l.acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := l.acquire(ctx)
		done <- err
	}()
	waitFor(t, func() bool { return l.state().waiting == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled acquire returned no error")
	}
	if st := l.state(); st.waiting != 0 || st.inflight != 8 {
		t.Errorf("after a cancelled wait: %+v, want 8 in flight and none waiting", st)
	}
}
