package cluster

import (
	"errors"
	"testing"

	"backfill/wire"
)

func TestAdmit(t *testing.T) {
	if !wire.HasCurve() {
		t.Skip("libzmq was built without CURVE")
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
