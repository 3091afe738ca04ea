package dispatcher

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"backfill/cluster"
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

// TestRefusedMembersBounded: a member whose key is authorized sends
// Hellos of another mapping set and Hellos too large to be one, under a
// new long name each time. Each kind is logged once, at Warn, with the
// name cut; the status keeps one entry per kind and sender, counting them
// all; the summary counts them as refused.
func TestRefusedMembersBounded(t *testing.T) {
	mk := keyMaker(t)
	own, member := mk(), mk()
	var logs syncBuffer
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Keys, c.Authorized = own, []string{member.Public}
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	e.load("people.csv", csvOf("id,name,email,site", "1,Ada,,http://a.test/"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.run(ctx)
	tx, err := wire.DialSecure(e.d.Endpoint(), wire.Security{Keys: member, ServerKey: own.Public})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	const n = 50
	for i := range n {
		name := fmt.Sprintf("%03d", i) + strings.Repeat("n", 10<<10)
		h := wire.Hello{Supervisor: name, Endpoint: "tcp://127.0.0.1:1", Key: member.Public, Mappings: "other"}
		if err := tx.Send(wire.KindHello, h, time.Second); err != nil {
			t.Fatal(err)
		}
		h.Supervisor += strings.Repeat("n", wire.MaxHelloFrame)
		if err := tx.Send(wire.KindHello, h, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := ReadStatus(e.cfg.StateDir)
		got := map[string]int64{}
		if err == nil {
			for _, r := range st.RefusedMembers {
				got[r.Category] += r.Count
				if r.Key != member.Public || len(r.Member) > 2*cluster.MaxLabel {
					t.Fatalf("refused %+v: want the member's key and its name cut", r)
				}
			}
		}
		if got[cluster.RefusedMappings] == n && got[cluster.RefusedMalformed] == n && len(st.RefusedMembers) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status shows refused %+v (%v), want %d of each kind in two entries", st.RefusedMembers, err, n)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	cancel()
	<-e.done
	for _, w := range []string{`"level":"WARN","msg":"supervisor refused: its mappings differ`, `"level":"WARN","msg":"frame refused: `} {
		if c := strings.Count(logs.String(), w); c != 1 {
			t.Errorf("%q logged %d times, want once (rate-limited)", w, c)
		}
	}
	if l := len(logs.String()); l > 64<<10 {
		t.Errorf("%d bytes of log for %d refused Hellos", l, 2*n)
	}
	if e.sum == nil || e.sum.RefusedBy["registration"] != n || e.sum.RefusedBy["malformed-frame"] != n {
		t.Errorf("summary refused %+v, want %d registrations and %d malformed frames", e.sum.RefusedBy, n, n)
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
