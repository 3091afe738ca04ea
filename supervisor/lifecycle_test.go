package supervisor

import (
	"strings"
	"testing"
	"time"

	"backfill/wire"
)

// runResult waits for Run to return on its own (not cancelled).
func (r *running) result(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-r.errc:
		close(r.errc)
		return err
	case <-time.After(within):
		t.Fatalf("Run did not return within %s", within)
		return nil
	}
}

// A supervisor asked to exit when the dispatcher's run is finished does so
// on the dispatcher's Bye, without an error.
func TestExitWhenDone(t *testing.T) {
	t.Parallel()
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d)
	cfg.ExitWhenDone = true
	r := start(t, cfg)
	register(t, d)
	if err := d.out.Send(wire.KindBye, wire.Bye{Dispatcher: "test", Run: "run-1"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := r.result(t, 10*time.Second); err != nil {
		t.Errorf("Run after Bye: %v, want nil", err)
	}
}

// Without ExitWhenDone a supervisor is a service: after a Bye it sends no
// more heartbeats, logs once that it waits, and registers again with the
// next run's dispatcher.
func TestWaitsForTheNextRun(t *testing.T) {
	t.Parallel()
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	var logs logBuffer
	cfg := testConfig(t, d)
	cfg.Logger = newLogger(&logs)
	r := start(t, cfg)
	register(t, d)
	select {
	case <-d.beats:
	case <-time.After(10 * time.Second):
		t.Fatal("no heartbeat after the Welcome")
	}
	if err := d.out.Send(wire.KindBye, wire.Bye{Dispatcher: "test", Run: "run-1"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The next Hello is the next run's registration; the heartbeats
	// stopped before it.
	h := d.hello()
	for len(d.beats) > 0 {
		<-d.beats
	}
	if r.sup.Stats().Registered {
		t.Error("still registered after the Bye")
	}
	if !strings.Contains(logs.String(), "the dispatcher's run is finished; waiting for its next run") {
		t.Errorf("the wait is not logged:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("waiting for the next run logs warnings:\n%s", logs.String())
	}
	d.welcome(h)
	select {
	case <-d.beats:
	case <-time.After(10 * time.Second):
		t.Fatal("no heartbeat after registering again")
	}
	select {
	case err := <-r.errc:
		t.Fatalf("Run returned (%v) though no ExitWhenDone", err)
	default:
	}
}

// A task socket that fails stops the supervisor, and Run returns why:
// heart-beating on while deaf to tasks would keep its domains routed to
// it.
func TestTaskSocketFailureStopsRun(t *testing.T) {
	t.Parallel()
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	r := start(t, testConfig(t, d))
	register(t, d)
	r.sup.in.Close() // the socket breaks under the reader
	err := r.result(t, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "task socket") {
		t.Fatalf("Run = %v, want the task socket's failure", err)
	}
}
