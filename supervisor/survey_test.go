package supervisor

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"backfill/wire"
)

// connectProber is a Prober that really connects: it dials the task's
// address on each port and says whether the connection was made. It also
// records how many tasks run at once and panics on a task marked so.
type connectProber struct {
	now, peak atomic.Int32
	release   chan struct{} // when not nil, every probe waits for it
	entered   chan struct{} // when not nil, every probe says it began
}

func (p *connectProber) Probe(ctx context.Context, t *wire.SurveyTask) wire.SurveyResult {
	n := p.now.Add(1)
	defer p.now.Add(-1)
	for {
		m := p.peak.Load()
		if n <= m || p.peak.CompareAndSwap(m, n) {
			break
		}
	}
	if p.entered != nil {
		p.entered <- struct{}{}
	}
	if t.Job == "panic" {
		panic("probe exploded")
	}
	if p.release != nil {
		select {
		case <-p.release:
		case <-ctx.Done():
			return wire.SurveyResult{}
		}
	}
	r := wire.SurveyResult{TaskID: t.ID, Lease: t.Lease, IP: t.IP, At: time.Now().UTC()}
	for _, port := range t.Ports {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(t.IP, strconv.Itoa(port)))
		state := "open"
		if err != nil {
			state = "closed"
		} else {
			c.Close()
		}
		r.Ports = append(r.Ports, wire.PortProbe{Port: port, State: state})
	}
	return r
}

func surveyResults(t *testing.T, d *dispatcher, n int) map[string]*wire.SurveyResult {
	t.Helper()
	got := map[string]*wire.SurveyResult{}
	deadline := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case r := <-d.surveys:
			if _, dup := got[r.TaskID]; dup {
				t.Errorf("second result for survey task %s", r.TaskID)
			}
			got[r.TaskID] = r
		case <-deadline:
			t.Fatalf("got %d of %d survey results", len(got), n)
		}
	}
	return got
}

func sendSurvey(t *testing.T, d *dispatcher, task wire.SurveyTask) {
	t.Helper()
	if err := d.out.Send(wire.KindSurveyTask, task, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestSurveyTasksGoToTheProber(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	open := ln.Addr().(*net.TCPAddr).Port
	closedLn, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := closedLn.Addr().(*net.TCPAddr).Port
	closedLn.Close()

	d := newDispatcher(t, "tcp://127.0.0.1:*")
	p := &connectProber{}
	cfg := testConfig(t, d)
	cfg.Prober = p
	start(t, cfg)
	h := register(t, d)
	if !h.Survey {
		t.Fatal("Hello does not say the supervisor surveys")
	}
	sendSurvey(t, d, wire.SurveyTask{ID: "a", Lease: 7, Job: wire.SurveyPorts, IP: "127.0.0.1", Ports: []int{open, closed}})
	sendSurvey(t, d, wire.SurveyTask{ID: "boom", Lease: 2, Job: "panic", IP: "127.0.0.1"})
	got := surveyResults(t, d, 2)
	a := got["a"]
	if a.Lease != 7 || a.Supervisor != "sup-test" || len(a.Ports) != 2 || a.Ports[0].State != "open" || a.Ports[1].State != "closed" {
		t.Fatalf("result %+v", a)
	}
	if b := got["boom"]; b.Lease != 2 || !strings.Contains(b.Error, "probe exploded") {
		t.Fatalf("panicking probe answered %+v", b)
	}
}

// At most Capacity survey tasks are held; the rest are dropped for their
// lease to bring back, and a supervisor without a Prober says so.
func TestSurveyTasksBoundedByCapacity(t *testing.T) {
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	p := &connectProber{release: make(chan struct{}), entered: make(chan struct{}, 5)}
	cfg := testConfig(t, d)
	cfg.Prober = p
	cfg.Capacity = 3
	r := start(t, cfg)
	register(t, d)
	for i := range 5 {
		sendSurvey(t, d, wire.SurveyTask{ID: strconv.Itoa(i + 1), Lease: 1, Job: wire.SurveyPorts, IP: "127.0.0.1"})
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.sup.Stats().Dropped < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("dropped %d of the 2 tasks over capacity", r.sup.Stats().Dropped)
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
	for range 3 { // the tasks held have all begun before any may end
		select {
		case <-p.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d survey tasks began", p.now.Load())
		}
	}
	close(p.release)
	surveyResults(t, d, 3)
	if peak := p.peak.Load(); peak != 3 {
		t.Fatalf("%d survey tasks ran at once, want 3 (the capacity)", peak)
	}
	if st := r.sup.Stats(); st.Surveyed != 3 {
		t.Fatalf("Surveyed = %d, want 3", st.Surveyed)
	}

	d2 := newDispatcher(t, "tcp://127.0.0.1:*")
	start(t, testConfig(t, d2))
	if h := register(t, d2); h.Survey {
		t.Fatal("a supervisor without a Prober says it surveys")
	}
	sendSurvey(t, d2, wire.SurveyTask{ID: "x", Lease: 4, Job: wire.SurveyPorts, IP: "127.0.0.1"})
	if x := surveyResults(t, d2, 1)["x"]; x.Lease != 4 || !strings.Contains(x.Error, "does not run surveys") {
		t.Fatalf("answer %+v", x)
	}
}

// A survey task sent again while the supervisor still holds it (its lease
// ran out, or the dispatcher took the supervisor for gone) is not probed
// a second time: the run in progress answers it. Heartbeats list the tasks
// held, and none once they are answered.
func TestSurveyTaskSentAgainIsProbedOnce(t *testing.T) {
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	p := &connectProber{release: make(chan struct{}), entered: make(chan struct{}, 5)}
	cfg := testConfig(t, d)
	cfg.Prober = p
	r := start(t, cfg)
	register(t, d)
	sendSurvey(t, d, wire.SurveyTask{ID: "a", Lease: 1, Job: wire.SurveyPorts, IP: "127.0.0.1"})
	sendSurvey(t, d, wire.SurveyTask{ID: "a", Lease: 2, Job: wire.SurveyPorts, IP: "127.0.0.1"})
	// Tasks are taken in order: once b began, the second a was seen.
	sendSurvey(t, d, wire.SurveyTask{ID: "b", Lease: 1, Job: wire.SurveyPorts, IP: "127.0.0.1"})
	for range 2 {
		select {
		case <-p.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d survey tasks began", p.now.Load())
		}
	}
	awaitBeat(t, d, "a,b")
	close(p.release)
	got := surveyResults(t, d, 2)
	if got["a"].Lease != 1 || got["b"] == nil {
		t.Fatalf("results %+v", got)
	}
	awaitBeat(t, d, "")
	if err := r.stop(); err != nil { // every probe begun has ended
		t.Fatal(err)
	}
	if n := len(p.entered); n != 0 {
		t.Fatalf("task a was probed again (%d more probes)", n)
	}
}

// awaitBeat waits for a heartbeat listing exactly the survey tasks held
// (comma-separated, sorted).
func awaitBeat(t *testing.T, d *dispatcher, held string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case hb := <-d.beats:
			if strings.Join(hb.Surveys, ",") == held {
				return
			}
		case <-deadline:
			t.Fatalf("no heartbeat listing survey tasks %q", held)
		}
	}
}
