package supervisor

import (
	"strings"
	"testing"
	"time"

	"backfill/wire"
)

// TestFence: a member that stops hearing from the dispatcher stops
// starting requests once half its lease is gone (saying so at Warn),
// drops the tasks it holds when the lease ends (saying so too), and
// resumes, saying so, when a Renew answers one of its heartbeats. No
// request starts while it is cut off.
func TestFence(t *testing.T) {
	t.Parallel()
	const lease = 800 * time.Millisecond
	pages := map[string]string{}
	for _, p := range []string{"a", "b", "c", "d", "e", "f"} {
		pages["/p/"+p] = "<html><body><h1>" + p + "</h1></body></html>"
	}
	s := newSite(t, "a.test", "", pages)
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d, s)
	cfg.DefaultDelay = NoDelay
	cfg.NoSoft404 = true
	var logs logBuffer
	cfg.Logger = newLogger(&logs)
	r := start(t, cfg)
	h := d.hello()
	granted := time.Now() // the Hello was sent before this: its lease ends before granted+lease
	d.welcomeWith(h, wire.Welcome{Dispatcher: "test", Run: "r", Seq: h.Seq, Lease: lease})
	d.task("a", 1, "http://a.test/p/a")
	d.collect(1, 5*time.Second)

	// No renewal: half the lease on, requests stop; the tasks sent now
	// wait, and are dropped at the lease's end.
	waitFor(t, 5*time.Second, "the pause", func() bool { return strings.Contains(logs.String(), "cut off from the dispatcher") })
	for _, id := range []string{"b", "c", "d"} {
		d.task(id, 1, "http://a.test/p/"+id)
	}
	waitFor(t, 5*time.Second, "the tasks dropped", func() bool { return r.sup.Stats().Abandoned == 3 })
	if !strings.Contains(logs.String(), "lease on the hosts held is over") {
		t.Errorf("no Warn at the lease's end:\n%s", logs.String())
	}
	for _, hit := range s.log() {
		if hit.at.After(granted.Add(lease / 2)) {
			t.Errorf("%s requested %v after the lease was granted, past half its %v", hit.path, hit.at.Sub(granted), lease)
		}
	}
	select {
	case res := <-d.results:
		t.Errorf("a task held while cut off was answered: %+v", res)
	default:
	}

	// A Renew of a heartbeat sent now: requests resume.
	var beat *wire.Heartbeat
	for beat == nil || time.Since(beat.At) > 50*time.Millisecond {
		select {
		case beat = <-d.beats:
		case <-time.After(5 * time.Second):
			t.Fatal("no heartbeat")
		}
	}
	if err := d.out.Send(wire.KindRenew, wire.Renew{Seq: beat.Seq, Lease: lease}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	d.task("e", 2, "http://a.test/p/e")
	if res := d.collect(1, 5*time.Second)["e"]; res == nil || res.Class != "" {
		t.Fatalf("after the renewal: %+v", res)
	}
	if !strings.Contains(logs.String(), "requests resume") {
		t.Errorf("no Warn when requests resume:\n%s", logs.String())
	}
}

// waitFor polls cond until it holds, failing after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// TestNewDispatcherProcess: welcomed by a new dispatcher process (another
// Gen), a member drops the tasks of the old one it has not started.
func TestNewDispatcherProcess(t *testing.T) {
	t.Parallel()
	s := newSite(t, "a.test", "User-agent: *\nCrawl-delay: 30\n", map[string]string{
		"/p/b": "<html><body><h1>b</h1></body></html>",
		"/p/c": "<html><body><h1>c</h1></body></html>",
	})
	// robots.txt is not answered until the test ends, which holds the two
	// tasks here (a long wait after it would hand them back: deferred.go).
	s.hold["/robots.txt"] = holdUntilCleanup(t)
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d, s)
	cfg.NoSoft404 = true
	r := start(t, cfg)
	h := d.hello()
	welcome := func(gen int64) {
		d.welcomeWith(h, wire.Welcome{Dispatcher: "test", Run: "r", Seq: h.Seq, Lease: time.Minute, Gen: gen})
	}
	welcome(1)
	d.task("b", 1, "http://a.test/p/b")
	d.task("c", 1, "http://a.test/p/c")
	waitFor(t, 5*time.Second, "the tasks held", func() bool { return r.sup.Stats().InFlight == 2 })
	welcome(1) // the same process again: nothing dropped
	welcome(2)
	waitFor(t, 5*time.Second, "the old process's tasks dropped", func() bool { return r.sup.Stats().Abandoned == 2 })
	if n := r.sup.Stats().InFlight; n != 0 {
		t.Errorf("%d tasks still held", n)
	}
	for _, hit := range s.log() {
		if hit.path == "/p/b" || hit.path == "/p/c" {
			t.Errorf("a dropped task was fetched: %s", hit.path)
		}
	}
}
