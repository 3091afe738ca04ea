package survey

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/wire"
)

// surveyMember plays a survey supervisor over CURVE: its task socket hears
// only the dispatcher's key.
type surveyMember struct {
	t     *testing.T
	hello wire.Hello
	recv  *wire.Receiver
	send  *wire.Sender
	held  []wire.SurveyTask
}

func newSurveyMember(t *testing.T, name, endpoint string, keys wire.Keys, dispKey string) *surveyMember {
	t.Helper()
	recv, err := wire.ListenSecure("tcp://127.0.0.1:*", wire.Security{Keys: keys, Authorized: []string{dispKey}})
	if err != nil {
		t.Fatal(err)
	}
	send, err := wire.DialSecure(endpoint, wire.Security{Keys: keys, ServerKey: dispKey})
	if err != nil {
		recv.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		send.Close()
		recv.Close()
	})
	return &surveyMember{t: t, recv: recv, send: send, hello: wire.Hello{
		Supervisor: name, Endpoint: recv.Endpoint(), Capacity: 8, Key: keys.Public, Survey: true, Started: time.Now().UTC(),
	}}
}

// beat says hello (a heartbeat listing what it holds) and takes the tasks
// that arrive within wait.
func (m *surveyMember) beat(wait time.Duration) {
	hb := wire.Heartbeat{Hello: m.hello, At: time.Now()}
	for _, tk := range m.held {
		hb.Surveys = append(hb.Surveys, tk.ID)
	}
	if err := m.send.Send(wire.KindHeartbeat, hb, time.Second); err != nil && !errors.Is(err, wire.ErrTimeout) {
		m.t.Fatal(err)
	}
	for {
		kind, v, err := m.recv.Recv(wait)
		if errors.Is(err, wire.ErrTimeout) {
			return
		}
		if err != nil {
			m.t.Fatal(err)
		}
		wait = 5 * time.Millisecond
		if kind == wire.KindSurveyTask {
			m.held = append(m.held, *v.(*wire.SurveyTask))
		}
	}
}

func (m *surveyMember) answer(tk wire.SurveyTask, token int64, state string) {
	m.t.Helper()
	r := wire.SurveyResult{TaskID: tk.ID, Lease: token, Supervisor: m.hello.Supervisor, IP: tk.IP, At: time.Now(),
		Ports: []wire.PortProbe{{Port: 80, State: state}}}
	if err := m.send.Send(wire.KindSurveyResult, r, time.Second); err != nil {
		m.t.Fatal(err)
	}
}

// TestForgedSurveyAnswer: a survey supervisor whose key is authorized
// answers the tasks leased to another, under their own tokens, and under
// guessed ones. No row takes its answer, it is quarantined, and the honest
// member's answers make every row.
func TestForgedSurveyAnswer(t *testing.T) {
	if !wire.HasCurve() {
		proctest.NoCurve(t, "a secured survey cluster")
	}
	var k [3]wire.Keys
	for i := range k {
		var err error
		if k[i], err = wire.NewKeys(); err != nil {
			t.Fatal(err)
		}
	}
	disp, honestKey, forgerKey := k[0], k[1], k[2]
	d, err := newDispatch(Cluster{Keys: disp, Authorized: []string{honestKey.Public, forgerKey.Public}, Heartbeat: time.Hour},
		slog.New(slog.DiscardHandler), wire.SurveyPorts, wire.SurveySpec{})
	if err != nil {
		t.Fatal(err)
	}
	var tasks []*task
	for i := range 4 {
		tasks = append(tasks, &task{id: fmt.Sprintf("p:127.0.%d.1", i), seq: int64(i), ip: fmt.Sprintf("127.0.%d.1", i), ports: []int{80}})
	}
	got := map[string]string{} // task → the state its row says
	d.rows = func(t *task, r *wire.SurveyResult) []row {
		return []row{{key: t.id, seq: t.seq, doc: []byte(r.Ports[0].State)}}
	}
	d.commit = func(_ context.Context, rows []row, _ []string) error {
		for _, r := range rows {
			got[r.key] = string(r.doc)
		}
		return nil
	}
	endpoint := d.in.Endpoint()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.run(ctx, tasks) }()

	honest := newSurveyMember(t, "honest", endpoint, honestKey, disp.Public)
	forger := newSurveyMember(t, "forger", endpoint, forgerKey, disp.Public)
	deadline := time.Now().Add(10 * time.Second)
	for len(honest.held) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the honest member got no task within 10s")
		}
		honest.beat(20 * time.Millisecond)
		forger.beat(20 * time.Millisecond)
	}
	for _, tk := range honest.held {
		forger.answer(tk, tk.Lease, "forged")
		forger.answer(tk, tk.Lease+1, "forged")
	}
	for range 200 {
		forger.answer(honest.held[0], int64(time.Now().UnixNano()), "forged")
	}
	// The honest member answers everything it gets, the forger's share
	// too once the forger is dropped.
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			for _, tk := range tasks {
				if got[tk.id] != "open" {
					t.Errorf("task %s: row %q, want the honest answer", tk.id, got[tk.id])
				}
			}
			if d.stats.Forged == 0 || len(d.stats.Quarantined) != 1 || d.stats.Quarantined[0].Key != forgerKey.Public {
				t.Errorf("forged %d, quarantined %+v; want the forger's key alone", d.stats.Forged, d.stats.Quarantined)
			}
			return
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the survey did not finish within 10s")
		}
		honest.beat(20 * time.Millisecond)
		for _, tk := range honest.held {
			honest.answer(tk, tk.Lease, "open")
		}
		honest.held = nil
	}
}
