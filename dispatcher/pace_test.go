package dispatcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	"backfill/cluster"
	"backfill/wire"
)

// TestHostPace: a host whose results say it keeps a delay has one task out
// at a time, and its next task is sent only a moment (readyLead) before
// the time its last result named, not as soon as a slot is free: the
// waiting is the dispatcher's, not a lease's. A host whose results say
// it keeps no delay has its tasks sent as fast as they are answered, up
// to HostInFlight at once.
func TestHostPace(t *testing.T) {
	const ready = 1200 * time.Millisecond
	e := newEnv(t, t.TempDir(), func(c *Config) { c.HostInFlight = 3 })
	defer e.close()
	web := map[string]page{
		"http://slow.example/":  {fields: []wire.Field{fld("name", "Ada")}},
		"http://quick.example/": {fields: []wire.Field{fld("name", "Bo")}},
	}
	var slowLinks, quickLinks []string
	for i := range 4 {
		s := fmt.Sprintf("http://slow.example/p%d", i)
		q := fmt.Sprintf("http://quick.example/p%d", i)
		slowLinks, quickLinks = append(slowLinks, s), append(quickLinks, q)
		web[s], web[q] = page{}, page{}
	}
	web["http://slow.example/"] = page{fields: []wire.Field{fld("name", "Ada")}, links: slowLinks}
	web["http://quick.example/"] = page{fields: []wire.Field{fld("name", "Bo")}, links: quickLinks}
	e.load("r.csv", csvOf("id,name,email,link", "r1,Ada,,http://slow.example/", "r2,Bo,,http://quick.example/"))
	sup := newSup(t, "s1", e.d.Endpoint(), 64, false, e.set.Digest())
	sup.pace = func(task wire.Task) (time.Duration, time.Duration) {
		if task.Host == "slow.example" {
			return ready, ready
		}
		return 0, 0
	}
	e.run(context.Background())
	if !sup.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	var slowAt []time.Time
	quickMost := 0
	deadline := time.Now().Add(30 * time.Second)
	for !e.finished() && time.Now().Before(deadline) {
		sup.poll(10 * time.Millisecond)
		held := map[string]int{}
		for _, task := range sup.held {
			held[task.Host]++
			if task.Host == "slow.example" {
				slowAt = append(slowAt, time.Now())
			}
		}
		if held["slow.example"] > 1 {
			t.Errorf("slow.example has %d tasks out at once", held["slow.example"])
		}
		quickMost = max(quickMost, held["quick.example"])
		for _, task := range sup.held {
			sup.answer(task, web)
		}
		sup.held = nil
	}
	if !e.finished() {
		t.Fatal("the crawl did not finish")
	}
	if len(slowAt) != 5 {
		t.Fatalf("slow.example got %d tasks, want 5", len(slowAt))
	}
	// Received, then answered at once: the next one is due ready after
	// the answer, and sent readyLead before that.
	for i := 1; i < len(slowAt); i++ {
		if gap := slowAt[i].Sub(slowAt[i-1]); gap < ready-readyLead-50*time.Millisecond {
			t.Errorf("slow.example's task %d came %v after the one before; its host was not ready for %v", i, gap, ready)
		}
	}
	if quickMost < 2 {
		t.Errorf("quick.example, with no delay, never had more than %d task out at once (HostInFlight 3)", quickMost)
	}
}

// TestHeldElsewhere: the hosts a joining member says it has a request in
// flight to are handed to another member only once that request is
// surely over (its MaxRequest), unless a later hand-over time is known.
func TestHeldElsewhere(t *testing.T) {
	now := time.Now()
	d := &Dispatcher{w: newWindow()}
	d.w.hostLast["later.example"] = handover{at: now.Add(time.Hour), member: "b"}
	m := &member{Member: cluster.Member{ID: "a", MaxRequest: 30 * time.Second}}
	d.heldElsewhere(m, []string{"busy.example", "later.example"}, now)
	if ho := d.w.hostLast["busy.example"]; !ho.at.Equal(now.Add(30*time.Second)) || ho.member != "a" {
		t.Errorf("busy.example hand-over %+v, want a at +30s", ho)
	}
	if ho := d.w.hostLast["later.example"]; !ho.at.Equal(now.Add(time.Hour)) || ho.member != "b" {
		t.Errorf("later.example hand-over %+v, want the later one kept", ho)
	}
}

// TestDeferredRequeued: a task a supervisor hands back unfetched
// (wire.ClassDeferred: its host was not ready) is queued again, costs no
// attempt and counts no request, and goes out again only readyLead before
// the time its answer named; answered then, its record completes.
func TestDeferredRequeued(t *testing.T) {
	const ready = 1500 * time.Millisecond
	e := newEnv(t, t.TempDir(), nil)
	defer e.close()
	const link = "http://new.example/"
	web := map[string]page{link: {class: wire.ClassDeferred}}
	e.load("r.csv", csvOf("id,name,email,link", "r1,Ada,,"+link))
	sup := newSup(t, "s1", e.d.Endpoint(), 8, false, e.set.Digest())
	sup.pace = func(wire.Task) (time.Duration, time.Duration) { return ready, ready }
	e.run(context.Background())
	if !sup.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	var at []time.Time
	deadline := time.Now().Add(30 * time.Second)
	for !e.finished() && time.Now().Before(deadline) {
		sup.poll(10 * time.Millisecond)
		for _, task := range sup.held {
			at = append(at, time.Now())
			sup.answer(task, web)
			web[link] = page{fields: []wire.Field{fld("name", "Ada"), fld("email", "ada@new.example")}}
		}
		sup.held = nil
	}
	if !e.finished() {
		t.Fatal("the crawl did not finish")
	}
	if e.err != nil {
		t.Fatal(e.err)
	}
	if len(at) != 2 {
		t.Fatalf("the page went out %d times, want twice (handed back, then answered)", len(at))
	}
	if gap := at[1].Sub(at[0]); gap < ready-readyLead-50*time.Millisecond {
		t.Errorf("the task came back %v after it was handed back; its host was not ready for %v", gap, ready)
	}
	s := e.sum
	if s.Politeness.Deferred != 1 || s.Complete != 1 {
		t.Errorf("deferred %d, complete %d; want 1 and 1", s.Politeness.Deferred, s.Complete)
	}
	if len(s.Errors) != 0 || s.Requests != 1 {
		t.Errorf("errors %v, %d requests; want none and 1: a task handed back is no failure and no request", s.Errors, s.Requests)
	}
}
