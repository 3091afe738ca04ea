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
	s := newScheduler(10)
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
	s := newScheduler(10)
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
	s := newScheduler(2)
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
	s := newScheduler(2)
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

func TestSchedulerForgetsIdleHosts(t *testing.T) {
	s := newScheduler(1)
	s.evictAt = 3
	for i := range 6 {
		name := fmt.Sprintf("h%d", i)
		if _, err := s.add(name, task(name)); err != nil {
			t.Fatal(err)
		}
		h, err := take(t, s, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		s.pop(h)
		s.done()
		ready := time.Now()
		if i == 0 {
			ready = ready.Add(time.Hour) // still in its delay: kept
		}
		s.release(h, ready)
	}
	if _, hosts := s.counts(); hosts > 4 {
		t.Errorf("%d hosts kept, want idle ones forgotten", hosts)
	}
	s.mu.Lock()
	_, kept := s.hosts["h0"]
	s.mu.Unlock()
	if !kept {
		t.Error("a host still in its delay was forgotten")
	}
}
