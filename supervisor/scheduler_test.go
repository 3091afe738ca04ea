package supervisor

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"backfill/wire"
)

func task(id string) *wire.Task { return &wire.Task{ID: id, URL: "http://" + id + ".test/"} }

func take(t *testing.T, s *scheduler, within time.Duration) (*host, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return s.take(ctx)
}

func TestSchedulerServesInOrderOfReadiness(t *testing.T) {
	s := newScheduler(10, DefaultMaxHosts)
	for _, name := range []string{"x", "y", "z"} {
		for i := range 2 {
			if _, err := s.add(name, task(fmt.Sprintf("%s%d", name, i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// All are ready now: served in arrival order.
	held := map[string]*host{}
	for _, want := range []string{"x", "y", "z"} {
		h, err := take(t, s, time.Second)
		if err != nil || h.name != want {
			t.Fatalf("take = %v, %v; want %s", h, err, want)
		}
		s.pop(h)
		s.done()
		held[want] = h
	}
	// Each got its next time; the earliest comes first, and not before
	// its time.
	base := time.Now()
	readyAt := map[string]time.Time{
		"x": base.Add(150 * time.Millisecond),
		"y": base.Add(50 * time.Millisecond),
		"z": base.Add(100 * time.Millisecond),
	}
	for _, name := range []string{"x", "y", "z"} {
		s.release(held[name], readyAt[name])
	}
	for _, want := range []string{"y", "z", "x"} {
		h, err := take(t, s, 5*time.Second)
		if err != nil || h.name != want {
			t.Fatalf("take = %v, %v; want %s", h, err, want)
		}
		if now := time.Now(); now.Before(readyAt[want]) {
			t.Errorf("%s handed out %v before its time", want, readyAt[want].Sub(now))
		}
	}
}

func TestSchedulerOneHolderPerHost(t *testing.T) {
	s := newScheduler(10, DefaultMaxHosts)
	s.add("x", task("a"))
	s.add("x", task("b"))
	h, err := take(t, s, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.pop(h); got.ID != "a" {
		t.Fatalf("pop = %s, want a", got.ID)
	}
	// x still has a task, but is held: nobody else gets it.
	if h2, err := take(t, s, 100*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second take = %v, %v; want the held host withheld", h2, err)
	}
	s.done()
	s.release(h, time.Now())
	h, err = take(t, s, time.Second)
	if err != nil || h.name != "x" {
		t.Fatalf("take after release = %v, %v", h, err)
	}
	if got := s.pop(h); got.ID != "b" {
		t.Fatalf("pop = %s, want b", got.ID)
	}
}

func TestSchedulerCapacity(t *testing.T) {
	s := newScheduler(2, DefaultMaxHosts)
	for _, id := range []string{"a", "b"} {
		if _, err := s.add("x", task(id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.add("y", task("c")); !errors.Is(err, errFull) {
		t.Fatalf("third add: %v, want errFull", err)
	}
	// A re-sent task (new lease) replaces the queued one, even when full.
	again := task("b")
	again.Lease = 7
	if replaced, err := s.add("x", again); err != nil || !replaced {
		t.Fatalf("re-add = %v, %v; want replaced", replaced, err)
	}
	if held, _ := s.counts(); held != 2 {
		t.Fatalf("held %d, want 2", held)
	}
	h, _ := take(t, s, time.Second)
	s.pop(h)
	if _, err := s.add("y", task("c")); !errors.Is(err, errFull) {
		t.Fatalf("add while the popped task is in progress: %v, want errFull", err)
	}
	s.done()
	if _, err := s.add("y", task("c")); err != nil {
		t.Fatalf("add after done: %v", err)
	}
	if got := s.pop(h); got.Lease != 7 {
		t.Errorf("queued b has lease %d, want the re-sent 7", got.Lease)
	}
}

func TestSchedulerStopWakesWaiters(t *testing.T) {
	s := newScheduler(2, DefaultMaxHosts)
	s.add("x", task("a"))
	h, _ := take(t, s, time.Second)
	s.release(h, time.Now().Add(time.Hour))
	errc := make(chan error, 1)
	go func() {
		_, err := s.take(context.Background())
		errc <- err
	}()
	s.stop()
	select {
	case err := <-errc:
		if !errors.Is(err, errStopped) {
			t.Fatalf("take after stop: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stop did not wake a waiting take")
	}
	if _, err := s.add("y", task("b")); !errors.Is(err, errStopped) {
		t.Errorf("add after stop: %v", err)
	}
}

// TestSchedulerIdleHostsBounded releases ten times maxIdle distinct hosts,
// some still in their delay: the scheduler keeps at most maxIdle idle
// hosts (the least recently released go first), never one with tasks or
// held by a worker, and a forgotten host that gets a task again is a new
// one (its first turn reads its state from the cache).
func TestSchedulerIdleHostsBounded(t *testing.T) {
	const maxIdle = 4
	s := newScheduler(3, maxIdle)
	// A host with a task queued and one held by a worker are not idle.
	if _, err := s.add("queued", task("queued-1")); err != nil {
		t.Fatal(err)
	}
	h, err := take(t, s, time.Second)
	if err != nil || h.name != "queued" {
		t.Fatalf("take = %v, %v", h, err)
	}
	if _, err := s.add("queued", task("queued-2")); err != nil {
		t.Fatal(err)
	}
	held := h
	for i := range 10 * maxIdle {
		name := fmt.Sprintf("h%d", i)
		if _, err := s.add(name, task(name)); err != nil {
			t.Fatal(err)
		}
		h, err := take(t, s, time.Second)
		if err != nil || h.name != name {
			t.Fatalf("take = %v, %v; want %s", h, err, name)
		}
		s.pop(h)
		s.done()
		h.last = time.Now()
		ready := time.Now()
		if i%2 == 0 {
			ready = ready.Add(time.Hour) // still in its delay: forgotten all the same
		}
		s.release(h, ready)
		if _, hosts := s.counts(); hosts > maxIdle+1 {
			t.Fatalf("after %d hosts: %d kept, want at most %d idle and the one held", i+1, hosts, maxIdle)
		}
	}
	s.mu.Lock()
	_, keptHeld := s.hosts["queued"]
	_, keptOld := s.hosts["h0"]
	_, keptNew := s.hosts[fmt.Sprintf("h%d", 10*maxIdle-1)]
	s.mu.Unlock()
	if !keptHeld || keptOld || !keptNew {
		t.Errorf("held host kept %v (want true), oldest idle kept %v (want false), newest idle kept %v (want true)", keptHeld, keptOld, keptNew)
	}
	if _, err := s.add("h0", task("h0-again")); err != nil {
		t.Fatal(err)
	}
	if h := take1(t, s, "h0"); !h.last.IsZero() {
		t.Error("a forgotten host came back with state kept in the scheduler")
	}
	s.release(held, time.Now())
}

// take1 takes the next host, which must be name.
func take1(t *testing.T, s *scheduler, name string) *host {
	t.Helper()
	h, err := take(t, s, time.Second)
	if err != nil || h.name != name {
		t.Fatalf("take = %v, %v; want %s", h, err, name)
	}
	return h
}
