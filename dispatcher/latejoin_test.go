package dispatcher

import (
	"errors"
	"testing"
	"time"

	"backfill/wire"
)

// TestLateJoinerToldRunIsOver: a supervisor that says Hello once the run
// is finished (restarted in its last moments) gets a Bye, not silence.
func TestLateJoinerToldRunIsOver(t *testing.T) {
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Fields = []string{"email"}
		c.LateJoinWait = 10 * time.Second
	})
	e.load("r.jsonl", `{"id":"r1","links":["https://x.example/"]}`+"\n")
	web := map[string]page{"https://x.example/": {fields: []wire.Field{fld("email", "a@x.example")}}}
	s1 := newSup(t, "s1", e.d.Endpoint(), 2, false, e.set.Digest())
	e.run(runCtx(t))
	if !s1.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if st, err := ReadStatus(e.cfg.StateDir); err == nil && st.State == StateFinished {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run did not finish within 10s")
		}
		s1.poll(10 * time.Millisecond)
		for _, task := range s1.held {
			s1.answer(task, web)
		}
		s1.held = nil
	}
	if e.finished() {
		t.Fatal("Run returned before the late-join wait")
	}
	late := newSup(t, "s2", e.d.Endpoint(), 2, false, e.set.Digest())
	if err := late.Out.Send(wire.KindHello, late.Hello, time.Second); err != nil {
		t.Fatal(err)
	}
	for {
		kind, _, err := late.In.Recv(time.Until(deadline))
		if errors.Is(err, wire.ErrTimeout) {
			t.Fatal("the late supervisor heard nothing: no Bye")
		}
		if err != nil {
			t.Fatal(err)
		}
		if kind == wire.KindBye {
			break
		}
		if kind == wire.KindTask {
			t.Fatal("the late supervisor got a task from a finished run")
		}
	}
}
