package dispatcher

import (
	"log/slog"
	"testing"

	"backfill/wire"
)

func TestMemberSecurity(t *testing.T) {
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
	own, listed, unlisted := mk(), mk(), mk()
	secured := Config{Keys: own, Authorized: []string{listed.Public}}
	cases := []struct {
		name     string
		cfg      Config
		endpoint string
		key      string
		ok       bool
		server   string // expected ServerKey when ok
	}{
		{"listed key", secured, "tcp://10.0.0.2:5560", listed.Public, true, listed.Public},
		{"unlisted key", secured, "tcp://10.0.0.2:5560", unlisted.Public, false, ""},
		{"no key", secured, "tcp://10.0.0.2:5560", "", false, ""},
		{"plaintext loopback", Config{}, "tcp://127.0.0.1:5560", "", true, ""},
		{"plaintext remote", Config{}, "tcp://10.0.0.2:5560", "", false, ""},
		{"plaintext remote, insecure", Config{Insecure: true}, "tcp://10.0.0.2:5560", "", true, ""},
	}
	for _, c := range cases {
		d := &Dispatcher{cfg: c.cfg, log: slog.New(slog.DiscardHandler), refused: map[string]bool{}}
		sec, ok := d.memberSecurity(wire.Hello{Supervisor: "s", Endpoint: c.endpoint, Key: c.key})
		if ok != c.ok {
			t.Errorf("%s: trusted = %v, want %v", c.name, ok, c.ok)
			continue
		}
		if !ok {
			if d.run.refused != 1 {
				t.Errorf("%s: refusal counted %d times, want 1", c.name, d.run.refused)
			}
			continue
		}
		if sec.ServerKey != c.server || (c.server != "" && sec.Keys != own) {
			t.Errorf("%s: dials with %+v, want server key %q and the dispatcher's own keys", c.name, sec, c.server)
		}
	}
}
