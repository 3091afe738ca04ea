package wire

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backfill/proctest"
)

func needCurve(t testing.TB) {
	t.Helper()
	if !HasCurve() {
		proctest.NoCurve(t, "libzmq was built without CURVE: security tests cannot run")
	}
}

func newKeys(t testing.TB) Keys {
	t.Helper()
	k, err := NewKeys()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// delivers sends a Hello over tx and reports whether rx got it in time.
func delivers(t *testing.T, tx *Sender, rx *Receiver, name string) bool {
	t.Helper()
	if err := tx.Send(KindHello, Hello{Supervisor: name}, 500*time.Millisecond); err != nil {
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("send: %v", err)
		}
		return false
	}
	kind, v, err := rx.Recv(5 * time.Second)
	if err != nil {
		t.Fatalf("sent but not received: %v", err)
	}
	if kind != KindHello || v.(*Hello).Supervisor != name {
		t.Fatalf("got %v %#v, want hello from %s", kind, v, name)
	}
	return true
}

func TestCurveCarriesAndRefuses(t *testing.T) {
	needCurve(t)
	server, client, stranger, other := newKeys(t), newKeys(t), newKeys(t), newKeys(t)
	rx, err := ListenSecure("tcp://127.0.0.1:*", Security{Keys: server, Authorized: []string{client.Public}})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	plainRx, err := Listen("tcp://127.0.0.1:*")
	if err != nil {
		t.Fatal(err)
	}
	defer plainRx.Close()

	cases := []struct {
		name    string
		rx      *Receiver
		sec     Security
		ok      bool
		refused Refusal // what the receiver keeps of the refusal (Count, times aside)
	}{
		{"listed key", rx, Security{Keys: client, ServerKey: server.Public}, true, Refusal{}},
		{"unlisted key", rx, Security{Keys: stranger, ServerKey: server.Public}, false,
			Refusal{Reason: RefusedKey, Address: "127.0.0.1", Key: stranger.Public}},
		{"wrong server key", rx, Security{Keys: client, ServerKey: other.Public}, false, Refusal{Reason: RefusedServerKey}},
		{"plaintext peer", rx, Security{}, false, Refusal{Reason: RefusedPlaintext}},
		{"secured peer of a plaintext socket", plainRx, Security{Keys: client, ServerKey: server.Public}, false, Refusal{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := c.rx.Refused()
			tx, err := DialSecure(c.rx.Endpoint(), c.sec)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Close()
			if got := delivers(t, tx, c.rx, c.name); got != c.ok {
				t.Fatalf("delivered = %v, want %v", got, c.ok)
			}
			if !c.ok {
				if _, _, err := c.rx.Recv(100 * time.Millisecond); !errors.Is(err, ErrTimeout) {
					t.Fatalf("a refused peer's frame arrived: %v", err)
				}
			}
			if c.refused.Reason != "" {
				kept := func() bool {
					for _, r := range c.rx.Refusals() {
						if r.Reason == c.refused.Reason && r.Address == c.refused.Address && r.Key == c.refused.Key && r.Count > 0 {
							return true
						}
					}
					return false
				}
				deadline := time.Now().Add(5 * time.Second)
				for (c.rx.Refused() == before || !kept()) && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond) // polling interval
				}
				if c.rx.Refused() == before || !kept() {
					t.Fatalf("the handshake was not kept as refused (%+v): %+v", c.refused, c.rx.Refusals())
				}
			}
		})
	}
	// The refused peers did not spoil the socket for a good one.
	tx, err := DialSecure(rx.Endpoint(), Security{Keys: client, ServerKey: server.Public})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if !delivers(t, tx, rx, "after") {
		t.Fatal("listed key refused after the others")
	}
}

// Several secured sockets in one process each keep their own authorized
// keys, and the process-wide handler stops with the last of them.
func TestCurveDomainsPerSocket(t *testing.T) {
	needCurve(t)
	s1, s2, a, b := newKeys(t), newKeys(t), newKeys(t), newKeys(t)
	rx1, err := ListenSecure("tcp://127.0.0.1:*", Security{Keys: s1, Authorized: []string{a.Public}})
	if err != nil {
		t.Fatal(err)
	}
	rx2, err := ListenSecure("tcp://127.0.0.1:*", Security{Keys: s2, Authorized: []string{b.Public}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		keys Keys
		rx   *Receiver
		srv  Keys
		ok   bool
	}{
		{"a to 1", a, rx1, s1, true},
		{"b to 2", b, rx2, s2, true},
		{"a to 2", a, rx2, s2, false},
		{"b to 1", b, rx1, s1, false},
	} {
		tx, err := DialSecure(c.rx.Endpoint(), Security{Keys: c.keys, ServerKey: c.srv.Public})
		if err != nil {
			t.Fatal(err)
		}
		if got := delivers(t, tx, c.rx, c.name); got != c.ok {
			t.Errorf("%s: delivered = %v, want %v", c.name, got, c.ok)
		}
		tx.Close()
	}
	rx1.Close()
	if !zap.running() {
		t.Fatal("handler stopped while a secured socket is open")
	}
	rx2.Close()
	if zap.running() {
		t.Fatal("handler still running after the last secured socket closed")
	}
	// And it starts again for the next one.
	rx3, err := ListenSecure("tcp://127.0.0.1:*", Security{Keys: s1, Authorized: []string{a.Public}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := DialSecure(rx3.Endpoint(), Security{Keys: a, ServerKey: s1.Public})
	if err != nil {
		t.Fatal(err)
	}
	if !delivers(t, tx, rx3, "again") {
		t.Error("restarted handler refused a listed key")
	}
	tx.Close()
	rx3.Close()
}

func TestSecurityChecked(t *testing.T) {
	needCurve(t)
	k, peer := newKeys(t), newKeys(t)
	cases := []struct {
		name     string
		endpoint string
		listen   bool
		sec      Security
		want     string // in the error; "" for none
		plain    bool   // wraps ErrPlaintext
	}{
		{"plaintext loopback", "tcp://127.0.0.1:5550", true, Security{}, "", false},
		{"plaintext wildcard", "tcp://0.0.0.0:5550", true, Security{}, "not loopback", true},
		{"plaintext remote dial", "tcp://192.0.2.1:5550", false, Security{}, "not loopback", true},
		{"plaintext allowed", "tcp://0.0.0.0:5550", true, Security{Insecure: true}, "", false},
		{"keys without authorized", "tcp://0.0.0.0:5550", true, Security{Keys: k}, "no authorized", false},
		{"keys without server key", "tcp://192.0.2.1:5550", false, Security{Keys: k}, "server key", false},
		{"peer keys without own", "tcp://127.0.0.1:5550", false, Security{ServerKey: peer.Public}, "without this end's key pair", false},
		{"mismatched pair", "tcp://0.0.0.0:5550", true, Security{Keys: Keys{Public: peer.Public, Secret: k.Secret}, Authorized: []string{peer.Public}}, "does not belong", false},
		{"bad authorized key", "tcp://0.0.0.0:5550", true, Security{Keys: k, Authorized: []string{"short"}}, "authorized key 1", false},
		{"secured", "tcp://0.0.0.0:5550", true, Security{Keys: k, Authorized: []string{peer.Public}}, "", false},
	}
	for _, c := range cases {
		err := c.sec.check(c.endpoint, c.listen)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one with %q", c.name, err, c.want)
		case errors.Is(err, ErrPlaintext) != c.plain:
			t.Errorf("%s: error %v: wraps ErrPlaintext = %v, want %v", c.name, err, !c.plain, c.plain)
		}
	}
	// The refusal names the endpoint and binds nothing.
	_, err := ListenSecure("tcp://0.0.0.0:0", Security{})
	if !errors.Is(err, ErrPlaintext) || !strings.Contains(err.Error(), "tcp://0.0.0.0:0") {
		t.Errorf("ListenSecure plaintext on a wildcard: %v", err)
	}
}

func TestLoopback(t *testing.T) {
	for ep, want := range map[string]bool{
		"tcp://127.0.0.1:5550":           true,
		"tcp://127.3.4.5:*":              true,
		"tcp://[::1]:5550":               true,
		"tcp://localhost:5550":           true,
		"tcp://[::ffff:127.0.0.1]:5550":  true,
		"ipc:///tmp/backfill.sock":       true,
		"inproc://tasks":                 true,
		"tcp://0.0.0.0:5550":             false,
		"tcp://*:5550":                   false,
		"tcp://[::]:5550":                false,
		"tcp://10.0.0.2:5550":            false,
		"tcp://eth0:5550":                false,
		"tcp://crawler.example:5560":     false,
		"tcp://127.0.0.1;10.0.0.2:5550":  false,
		"tcp://10.0.0.2;127.0.0.1:5550":  true,
		"pgm://127.0.0.1;239.1.1.1:5555": false,
		"127.0.0.1:5550":                 false,
		"tcp://127.0.0.1":                false,
	} {
		if got := Loopback(ep); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", ep, got, want)
		}
	}
}

func TestKeyFiles(t *testing.T) {
	needCurve(t)
	dir := t.TempDir()
	k := newKeys(t)
	name := filepath.Join(dir, "sup-1")
	if err := WriteKeys(name, k, false); err != nil {
		t.Fatal(err)
	}
	for ext, mode := range map[string]os.FileMode{SecretExt: 0o600, PublicExt: 0o644} {
		info, err := os.Stat(name + ext)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != mode {
			t.Errorf("%s mode %04o, want %04o", ext, info.Mode().Perm(), mode)
		}
	}
	got, err := LoadKeys(name + SecretExt)
	if err != nil || got != k {
		t.Fatalf("LoadKeys = %+v, %v; want %+v", got, err, k)
	}
	pub, err := LoadPublicKey(name + PublicExt)
	if err != nil || pub != k.Public {
		t.Fatalf("LoadPublicKey = %q, %v; want %q", pub, err, k.Public)
	}

	// Never overwritten by accident; replaced with force, secret still 0600.
	k2 := newKeys(t)
	if err := WriteKeys(name, k2, false); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("overwrite without force: %v", err)
	}
	if again, _ := LoadKeys(name + SecretExt); again != k {
		t.Fatal("refused overwrite changed the key")
	}
	os.Chmod(name+SecretExt, 0o644)
	if _, err := LoadKeys(name + SecretExt); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Fatalf("world-readable secret: %v", err)
	}
	if err := WriteKeys(name, k2, true); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(name + SecretExt); info.Mode().Perm() != 0o600 {
		t.Errorf("forced secret mode %04o, want 0600", info.Mode().Perm())
	}
	if got, err := LoadKeys(name + SecretExt); err != nil || got != k2 {
		t.Fatalf("after force: %+v, %v", got, err)
	}

	// Authorized keys: a directory of .pub files, or one file of keys.
	k3 := newKeys(t)
	if err := WriteKeys(filepath.Join(dir, "sup-2"), k3, false); err != nil {
		t.Fatal(err)
	}
	keys, err := LoadAuthorized(dir)
	if err != nil || len(keys) != 2 || !contains(keys, k2.Public) || !contains(keys, k3.Public) {
		t.Fatalf("LoadAuthorized(dir) = %v, %v", keys, err)
	}
	list := filepath.Join(dir, "authorized")
	os.WriteFile(list, []byte("# crawlers\n"+k2.Public+"\n\n  "+k3.Public+"  \n"+k2.Public+"\n"), 0o644)
	if keys, err := LoadAuthorized(list); err != nil || len(keys) != 2 {
		t.Fatalf("LoadAuthorized(file) = %v, %v", keys, err)
	}
	os.WriteFile(list, []byte(k2.Public+"\n"+k3.Secret[:39]+"\n"), 0o644)
	if _, err := LoadAuthorized(list); err == nil || !strings.Contains(err.Error(), list+":2:") {
		t.Fatalf("malformed line: %v, want an error naming %s:2", err, list)
	}
	if _, err := LoadAuthorized(t.TempDir()); err == nil {
		t.Fatal("a directory without .pub files gave no error")
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestCheckKey(t *testing.T) {
	for _, c := range []struct {
		key string
		ok  bool
	}{
		{"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7", true}, // RFC 32's example key
		{"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf", false},
		{"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7x", false},
		{"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf\"", false},
		{"%%%%%}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7", false}, // a group above 2^32-1
		{"", false},
	} {
		if err := CheckKey(c.key); (err == nil) != c.ok {
			t.Errorf("CheckKey(%q) = %v, want ok %v", c.key, err, c.ok)
		}
	}
}

func FuzzParseKeys(f *testing.F) {
	f.Add([]byte("# comment\nrq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\n"))
	f.Add([]byte("\n\n   \n"))
	f.Add([]byte("%%%%%}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := ParseKeys("fuzz", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "wire: fuzz:") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		for _, k := range keys {
			if CheckKey(k) != nil {
				t.Fatalf("parsed an invalid key %q", k)
			}
		}
	})
}

// TestRecvFromSaysWhoSent: a CURVE Receiver names each frame's sender by
// the key its handshake authenticated, whatever name the frame carries;
// frames of two clients interleave and each keeps its own key. A plaintext
// Receiver names no key.
func TestRecvFromSaysWhoSent(t *testing.T) {
	needCurve(t)
	server, a, b := newKeys(t), newKeys(t), newKeys(t)
	rx, err := ListenSecure("tcp://127.0.0.1:*", Security{Keys: server, Authorized: []string{a.Public, b.Public}})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	want := map[string]string{}
	for name, k := range map[string]Keys{"a": a, "b": b} {
		tx, err := DialSecure(rx.Endpoint(), Security{Keys: k, ServerKey: server.Public})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Close()
		// Each claims to be the other: the name is the sender's to write.
		claim := map[string]string{"a": "b", "b": "a"}[name]
		if err := tx.Send(KindHello, Hello{Supervisor: claim}, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		want[claim] = k.Public
	}
	for range 2 {
		kind, v, from, err := rx.RecvFrom(5 * time.Second)
		if err != nil || kind != KindHello {
			t.Fatalf("RecvFrom: %v %v", kind, err)
		}
		if name := v.(*Hello).Supervisor; from.Key != want[name] {
			t.Errorf("hello naming %q came under key %q, want the sender's %q", name, from.Key, want[name])
		}
		if from.Address != "127.0.0.1" {
			t.Errorf("sender address %q, want 127.0.0.1", from.Address)
		}
	}

	plain, tx := plainPair(t)
	if err := tx.Send(KindHello, Hello{Supervisor: "p"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, _, from, err := plain.RecvFrom(5 * time.Second); err != nil || from.Key != "" {
		t.Errorf("plaintext sender: key %q (%v), want none", from.Key, err)
	}
}
