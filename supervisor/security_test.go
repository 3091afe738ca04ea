package supervisor

import (
	"errors"
	"strings"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/wire"
)

// A secured supervisor advertises its key in Hello, and its task socket
// takes frames from the dispatcher's key only.
func TestSecuredTaskSocket(t *testing.T) {
	k := threeKeys(t)
	disp, sup, stranger := k[0], k[1], k[2]
	in, err := wire.ListenSecure("tcp://127.0.0.1:*", wire.Security{Keys: disp, Authorized: []string{sup.Public}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	r := start(t, Config{
		Name: "sup-secured", Dispatcher: in.Endpoint(), Workers: 1, Mappings: mappings(t), Cache: openCache(t),
		Heartbeat: 100 * time.Millisecond, HelloMax: 300 * time.Millisecond,
		Keys: sup, DispatcherKey: disp.Public,
	})

	var h *wire.Hello
	for deadline := time.Now().Add(10 * time.Second); h == nil; {
		if time.Now().After(deadline) {
			t.Fatal("no Hello over CURVE within 10s")
		}
		kind, v, err := in.Recv(100 * time.Millisecond)
		if err == nil && kind == wire.KindHello {
			h = v.(*wire.Hello)
		}
	}
	if h.Key != sup.Public {
		t.Fatalf("Hello advertises key %q, want the supervisor's %q", h.Key, sup.Public)
	}

	welcome := wire.Welcome{Dispatcher: "test", Run: "run-1"}
	for _, c := range []struct {
		name string
		sec  wire.Security
	}{
		{"stranger's key", wire.Security{Keys: stranger, ServerKey: h.Key}},
		{"plaintext", wire.Security{}},
	} {
		out, err := wire.DialSecure(h.Endpoint, c.sec)
		if err != nil {
			t.Fatal(err)
		}
		err = out.Send(wire.KindWelcome, welcome, 300*time.Millisecond)
		out.Close()
		if !errors.Is(err, wire.ErrTimeout) {
			t.Errorf("%s: Welcome send = %v, want a timeout (refused handshake)", c.name, err)
		}
	}
	if r.sup.Stats().Registered {
		t.Fatal("registered by a Welcome from a refused peer")
	}

	out, err := wire.DialSecure(h.Endpoint, wire.Security{Keys: disp, ServerKey: h.Key})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := out.Send(wire.KindWelcome, welcome, 5*time.Second); err != nil {
		t.Fatalf("the dispatcher's key: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); !r.sup.Stats().Registered; {
		if time.Now().After(deadline) {
			t.Fatal("the dispatcher's Welcome was not taken")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A supervisor whose key the dispatcher does not authorise hears nothing
// back (a refused CURVE handshake is silent): after its first attempts it
// says what to check, naming its own key.
func TestUnauthorisedSupervisorSaysWhatToCheck(t *testing.T) {
	k := threeKeys(t)
	disp, sup, other := k[0], k[1], k[2]
	in, err := wire.ListenSecure("tcp://127.0.0.1:*", wire.Security{Keys: disp, Authorized: []string{other.Public}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var logs logBuffer
	start(t, Config{
		Name: "sup-unlisted", Dispatcher: in.Endpoint(), Workers: 1, Mappings: mappings(t), Cache: openCache(t),
		Heartbeat: 100 * time.Millisecond, HelloMax: 300 * time.Millisecond,
		Keys: sup, DispatcherKey: disp.Public, Logger: newLogger(&logs),
	})
	want := "no answer from " + in.Endpoint() + ": check the dispatcher's public key and that ours is authorised"
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(logs.String(), want); {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 20s:\n%s", want, logs.String())
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	if !strings.Contains(logs.String(), "our_key=") || !strings.Contains(logs.String(), sup.Public) {
		t.Errorf("the hint does not name our key:\n%s", logs.String())
	}
}

// threeKeys makes three CURVE key pairs, skipping the test without CURVE.
func threeKeys(t *testing.T) [3]wire.Keys {
	t.Helper()
	if !wire.HasCurve() {
		proctest.NoCurve(t, "libzmq was built without CURVE")
	}
	var k [3]wire.Keys
	for i := range k {
		var err error
		if k[i], err = wire.NewKeys(); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// TestForgedTaskFromAnotherMember: another member of the cluster, whose key
// the dispatcher authorizes, dials a supervisor's task socket and sends it a
// Task. The supervisor takes tasks only from the dispatcher it registered
// with (its key): the handshake is refused, nothing is fetched.
func TestForgedTaskFromAnotherMember(t *testing.T) {
	k := threeKeys(t)
	disp, sup, member := k[0], k[1], k[2]
	in, err := wire.ListenSecure("tcp://127.0.0.1:*", wire.Security{Keys: disp, Authorized: []string{sup.Public, member.Public}})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	r := start(t, Config{
		Name: "sup-target", Dispatcher: in.Endpoint(), Workers: 1, Mappings: mappings(t), Cache: openCache(t),
		Heartbeat: 100 * time.Millisecond, HelloMax: 300 * time.Millisecond,
		Keys: sup, DispatcherKey: disp.Public,
	})
	var h *wire.Hello
	for deadline := time.Now().Add(10 * time.Second); h == nil; {
		if time.Now().After(deadline) {
			t.Fatal("no Hello over CURVE within 10s")
		}
		kind, v, from, err := in.RecvFrom(100 * time.Millisecond)
		if err == nil && kind == wire.KindHello {
			h = v.(*wire.Hello)
			if from.Key != sup.Public {
				t.Fatalf("Hello came under key %q, want the supervisor's %q (the transport's, per message)", from.Key, sup.Public)
			}
		}
	}
	out, err := wire.DialSecure(h.Endpoint, wire.Security{Keys: member, ServerKey: h.Key})
	if err != nil {
		t.Fatal(err)
	}
	task := wire.Task{ID: "0000000000000001", Lease: 1, URL: "http://127.0.0.1:1/", Host: "127.0.0.1:1"}
	err = out.Send(wire.KindTask, task, 300*time.Millisecond)
	out.Close()
	if !errors.Is(err, wire.ErrTimeout) {
		t.Errorf("a member's Task send = %v, want a timeout (refused handshake)", err)
	}
	if st := r.sup.Stats(); st.Registered || st.Fetched > 0 || len(st.Failed) > 0 {
		t.Errorf("after a member's Task: %+v, want nothing taken", st)
	}
}
