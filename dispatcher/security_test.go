package dispatcher

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/wire"
)

// TestRefusedHandshakesLogged points peers with an unlisted key, with no
// key and with a wrong dispatcher key at a secured dispatcher running: it
// logs each once (they keep reconnecting; the log is rate-limited) with
// the peer's address and key where libzmq tells them, shows them in the
// status, and counts them as refused.
func TestRefusedHandshakesLogged(t *testing.T) {
	mk := keyMaker(t)
	own, listed, unlisted, other := mk(), mk(), mk(), mk()
	var logs syncBuffer
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Keys, c.Authorized = own, []string{listed.Public}
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	e.load("people.csv", csvOf("id,name,email,site", "1,Ada,,http://a.test/"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.run(ctx)
	peers := []wire.Security{
		{Keys: unlisted, ServerKey: own.Public},
		{Insecure: true},
		{Keys: listed, ServerKey: other.Public},
	}
	for _, sec := range peers {
		tx, err := wire.DialSecure(e.d.Endpoint(), sec)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Close()
		tx.Send(wire.KindHello, wire.Hello{Supervisor: "intruder"}, 100*time.Millisecond)
	}
	want := []string{
		`"msg":"supervisor handshake refused: key not authorized","address":"127.0.0.1","key":"` + unlisted.Public + `"`,
		`"msg":"supervisor handshake refused: no key (a plaintext client)"`,
		`"msg":"supervisor handshake refused: wrong server key`,
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		all := true
		for _, w := range want {
			all = all && strings.Contains(logs.String(), w)
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refused handshakes not all logged within 20s:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	// The status written after the logs (the one read may be older).
	for {
		st, err := ReadStatus(e.cfg.StateDir)
		if err == nil && len(st.Refused) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status shows refused peers %+v (%v), want 3", st.Refused, err)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	cancel()
	<-e.done
	for _, w := range want {
		if n := strings.Count(logs.String(), w); n != 1 {
			t.Errorf("%q logged %d times, want once (rate-limited)", w, n)
		}
	}
	if e.sum == nil || e.sum.RefusedBy["handshake"] < 3 {
		t.Errorf("summary refused %+v, want the handshakes counted", e.sum)
	}
}

// syncBuffer is a bytes.Buffer a logger may write while a test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// keyMaker returns a maker of CURVE key pairs, skipping the test without
// CURVE.
func keyMaker(t *testing.T) func() wire.Keys {
	t.Helper()
	if !wire.HasCurve() {
		proctest.NoCurve(t, "libzmq was built without CURVE")
	}
	return func() wire.Keys {
		k, err := wire.NewKeys()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
}
