package fetch

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
)

// TestSessionsResumed: a host whose connection is not kept gets a new
// connection for each request, and each after the first resumes the TLS
// session of the one before: one full handshake per host.
func TestSessionsResumed(t *testing.T) {
	noLeak(t)
	for _, h2 := range []bool{true, false} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			cfg := baseConfig()
			cfg.KeptHosts = 1
			var mu sync.Mutex
			var resumed []bool
			site, s := newTLSSite(t, &cfg, h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				resumed = append(resumed, r.TLS.DidResume)
				mu.Unlock()
				w.Header().Set("Content-Type", "text/html")
				w.Write([]byte("<html><body>ok</body></html>"))
			}))
			f := New(cfg)
			defer f.Close()
			other := newConnCounter(t)
			if _, err := f.Get(context.Background(), other.srv.URL+"/"); err != nil {
				t.Fatal(err) // takes the one kept connection
			}
			const n = 3
			for range n {
				if _, err := f.Get(context.Background(), site+"/"); err != nil {
					t.Fatal(err)
				}
			}
			if got := s.conns.Load(); got != n {
				t.Fatalf("%d connections for %d requests to a host not kept, want %d", got, n, n)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []bool{false, true, true}; !slices.Equal(resumed, want) {
				t.Errorf("handshakes resumed: %v, want %v", resumed, want)
			}
		})
	}
}

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
