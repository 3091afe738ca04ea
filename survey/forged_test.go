package survey

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"backfill/cluster/clustertest"
	"backfill/proctest"
	"backfill/wire"
)

// surveyMember plays a survey supervisor over CURVE (the cluster's test
// member, clustertest.Member): its task socket hears only the
// dispatcher's key.
type surveyMember struct {
	*clustertest.Member
	held []wire.SurveyTask
}

func newSurveyMember(t *testing.T, name, endpoint string, keys wire.Keys, dispKey string) *surveyMember {
	t.Helper()
	m := &surveyMember{Member: clustertest.New(t, name, endpoint, 8, keys, dispKey)}
	m.Hello.Survey = true
	m.OnSurvey = func(tk wire.SurveyTask) { m.held = append(m.held, tk) }
	m.Beat = func(hb *wire.Heartbeat) {
		for _, tk := range m.held {
			hb.Surveys = append(hb.Surveys, tk.ID)
		}
	}
	return m
}

// beat says hello (a heartbeat listing what it holds) and takes the tasks
// that arrive within wait.
func (m *surveyMember) beat(wait time.Duration) {
	m.Heartbeat()
	m.Receive(wait)
}

func (m *surveyMember) answer(tk wire.SurveyTask, token int64, state string) {
	m.T.Helper()
	m.Send(wire.KindSurveyResult, wire.SurveyResult{TaskID: tk.ID, Lease: token, Supervisor: m.Hello.Supervisor, IP: tk.IP,
		At: time.Now(), Ports: []wire.PortProbe{{Port: 80, State: state}}})
}

// TestForgedSurveyAnswer: a survey supervisor whose key is authorized
// says Hello first under another's name, then answers the tasks leased
// to that other, under their own tokens, and under
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
	d, err := newDispatch(Cluster{Keys: disp, Authorized: []string{honestKey.Public, forgerKey.Public}, Heartbeat: time.Hour, Expect: 2,
		Names: map[string]string{honestKey.Public: "honest", forgerKey.Public: "forger"}},
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

	// The forger says it is honest, first: a member is its key, so it
	// joins as itself and the honest member as honest.
	forger := newSurveyMember(t, "honest", endpoint, forgerKey, disp.Public)
	forger.beat(20 * time.Millisecond)
	honest := newSurveyMember(t, "honest", endpoint, honestKey, disp.Public)
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
			if d.stats.Forged == 0 || len(d.stats.Quarantined) != 1 || d.stats.Quarantined[0].Key != forgerKey.Public ||
				d.stats.Quarantined[0].Member != "forger" {
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
