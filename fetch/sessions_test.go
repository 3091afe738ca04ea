package fetch

import (
	"crypto/tls"
	"testing"
)

// TestKeptSessionsAdmission: the first hosts keep their sessions, and
// keep them when their servers hand out new ones; a host beyond them
// keeps none until a slot is freed by a session its server refused.
func TestKeptSessionsAdmission(t *testing.T) {
	s1, s2 := &tls.ClientSessionState{}, &tls.ClientSessionState{}
	tests := []struct {
		name string
		puts []struct {
			key string
			cs  *tls.ClientSessionState
		}
		want map[string]*tls.ClientSessionState
	}{
		{name: "first come", puts: []struct {
			key string
			cs  *tls.ClientSessionState
		}{{"a", s1}, {"b", s2}}, want: map[string]*tls.ClientSessionState{"a": s1}},
		{name: "a new ticket replaces the old", puts: []struct {
			key string
			cs  *tls.ClientSessionState
		}{{"a", s1}, {"b", s2}, {"a", s2}}, want: map[string]*tls.ClientSessionState{"a": s2}},
		{name: "a refused session frees its slot", puts: []struct {
			key string
			cs  *tls.ClientSessionState
		}{{"a", s1}, {"a", nil}, {"b", s2}}, want: map[string]*tls.ClientSessionState{"b": s2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newKeptSessions(1)
			for _, p := range tt.puts {
				k.Put(p.key, p.cs)
			}
			for _, key := range []string{"a", "b"} {
				got, ok := k.Get(key)
				want, wok := tt.want[key]
				if ok != wok || got != want {
					t.Errorf("Get(%q) = %p, %v; want %p, %v", key, got, ok, want, wok)
				}
			}
			if k.kept() != len(tt.want) {
				t.Errorf("%d sessions kept, want %d", k.kept(), len(tt.want))
			}
		})
	}
}
