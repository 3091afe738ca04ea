package cluster

import (
	"errors"
	"testing"

	"backfill/proctest"
	"backfill/wire"
)

func TestAdmit(t *testing.T) {
	if !wire.HasCurve() {
		proctest.NoCurve(t, "admission by key")
	}
	mk := func() wire.Keys {
		k, err := wire.NewKeys()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	own, listed, other, unlisted := mk(), mk(), mk(), mk()
	secured := Admission{Keys: own, Authorized: []string{listed.Public, other.Public}}
	cases := []struct {
		name     string
		a        Admission
		endpoint string
		key      string // the task socket's key the Hello advertises
		sender   string // the key the Hello came under
		err      error
	}{
		{"listed key", secured, "tcp://10.0.0.2:5560", listed.Public, listed.Public, nil},
		{"unlisted key", secured, "tcp://10.0.0.2:5560", unlisted.Public, listed.Public, ErrKeyNotListed},
		{"no key", secured, "tcp://10.0.0.2:5560", "", listed.Public, ErrNoKey},
		{"another member's socket", secured, "tcp://10.0.0.2:5560", other.Public, listed.Public, ErrKeyNotSender},
		{"plaintext loopback", Admission{}, "tcp://127.0.0.1:5560", "", "", nil},
		{"plaintext remote", Admission{}, "tcp://10.0.0.2:5560", "", "", ErrPlaintextRemote},
		{"plaintext remote, insecure", Admission{Insecure: true}, "tcp://10.0.0.2:5560", "", "", nil},
	}
	for _, c := range cases {
		sec, err := c.a.Admit(wire.Hello{Supervisor: "s", Endpoint: c.endpoint, Key: c.key}, wire.Peer{Key: c.sender})
		if !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.err)
			continue
		}
		if err != nil {
			continue
		}
		if sec.ServerKey != c.key || (c.key != "" && sec.Keys != own) {
			t.Errorf("%s: dials with %+v, want server key %q and the dispatcher's own keys", c.name, sec, c.key)
		}
		if sec.Insecure != c.a.Insecure {
			t.Errorf("%s: insecure = %v, want %v", c.name, sec.Insecure, c.a.Insecure)
		}
	}
}

// TestWarning: a dispatcher warns about plaintext only when its members
// may be on other machines; a secured cluster, or one on this machine
// alone (`backfill run`, the demo), says nothing about security.
func TestWarning(t *testing.T) {
	keyed := Admission{Keys: wire.Keys{Public: "p", Secret: "s"}}
	for _, c := range []struct {
		a      Admission
		intake string
		warn   bool
	}{
		{Admission{}, "inproc://backfill-1-dispatcher-1", false},
		{Admission{}, "tcp://127.0.0.1:5550", false},
		{Admission{}, "ipc:///run/backfill.sock", false},
		{Admission{Insecure: true}, "tcp://0.0.0.0:5550", true},
		{Admission{Insecure: true}, "tcp://10.0.0.2:5550", true},
		{keyed, "tcp://0.0.0.0:5550", false},
	} {
		if got := c.a.Warning(c.intake); (got != "") != c.warn {
			t.Errorf("Warning(%s) secured=%v: %q, want a warning %v", c.intake, c.a.Secured(), got, c.warn)
		}
	}
}
