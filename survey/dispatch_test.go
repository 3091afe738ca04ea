package survey

import (
	"log/slog"
	"testing"
	"time"

	"backfill/cluster/clustertest"
	"backfill/wire"
)

// A heartbeat that lists a task as held renews its lease; a task whose
// lease ran out unlisted goes back to the queue, to be sent again. Leases
// are judged against given times, so nothing here waits.
func TestLeasesRenewedByHeartbeats(t *testing.T) {
	d, err := newDispatch(Cluster{Lease: time.Hour, Heartbeat: time.Hour}, slog.New(slog.DiscardHandler), wire.SurveyPorts, wire.SurveySpec{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	started := time.Now()
	mem := clustertest.New(t, "s1", d.in.Endpoint(), 8, wire.Keys{}, "")
	mem.Hello.Survey, mem.Hello.Started = true, started
	d.handle(wire.KindHello, &mem.Hello, wire.Peer{})
	m, ok := d.members.Get("s1")
	if !ok {
		t.Fatal("s1 did not join")
	}
	held, lost := &task{id: "p:127.0.0.1", ip: "127.0.0.1"}, &task{id: "p:127.0.0.2", ip: "127.0.0.2", seq: 1}
	for _, tk := range []*task{held, lost} {
		m.tasks[tk.id], d.flying[tk.id], d.deadl[tk.id] = tk, tk, started.Add(-time.Second)
	}

	d.handle(wire.KindHeartbeat, &wire.Heartbeat{Hello: mem.Hello,
		Surveys: []string{held.id, "p:127.0.0.9"}}, wire.Peer{})
	if !d.deadl[held.id].After(started.Add(50 * time.Minute)) {
		t.Fatalf("lease of the held task not renewed: %v", d.deadl[held.id])
	}
	if _, ok := d.deadl["p:127.0.0.9"]; ok {
		t.Fatal("a lease was made up for a task not sent")
	}
	d.expire(started.Add(time.Minute))
	if d.flying[held.id] == nil || m.tasks[held.id] == nil {
		t.Error("the held task was taken back")
	}
	if d.flying[lost.id] != nil || m.tasks[lost.id] != nil || len(d.queue) != 1 || d.queue[0] != lost || d.stats.Resent != 1 {
		t.Errorf("the lost task: flying %v, queue %v, resent %d", d.flying[lost.id], d.queue, d.stats.Resent)
	}

	// A heartbeat of another supervisor renews nothing of this one's.
	d.deadl[held.id] = started
	d.handle(wire.KindHeartbeat, &wire.Heartbeat{Hello: wire.Hello{Supervisor: "s2", Endpoint: "tcp://127.0.0.1:2", Started: started},
		Surveys: []string{held.id}}, wire.Peer{})
	if !d.deadl[held.id].Equal(started) {
		t.Error("another supervisor's heartbeat renewed the lease")
	}
}
