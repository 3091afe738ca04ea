package fetch

import (
	"crypto/tls"
	"sync"
)

// Which hosts keep a TLS session to resume. A host beyond
// Config.KeptHosts gets a new connection for each request, once per its
// delay (keepalive.go). Without a session to resume, each of those is a
// full handshake: the server signs anew and we check its certificates
// anew, every time. A resumed one skips both. The client keeps the
// session tickets its servers hand out, for the first
// Config.KeptSessions hosts. Admission is sticky, as for kept
// connections and for the same reason: a crawl going round more hosts
// than a least-recently-used cache holds would evict each host's ticket
// just before its next connection, and resume nothing. A host keeps its
// slot while its server keeps handing out tickets; one whose ticket is
// refused (the server's keys rotated) gets the next one in its place.

// DefaultKeptSessions is Config.KeptSessions's default. A session holds
// its server's certificates, parsed: a few KiB a host, some 16 MiB in
// all at most.
const DefaultKeptSessions = 4096

// keptSessions is a tls.ClientSessionCache with sticky admission.
type keptSessions struct {
	max int

	mu       sync.Mutex
	sessions map[string]*tls.ClientSessionState // by the cache key the handshake gives (the server's name)
}

func newKeptSessions(max int) *keptSessions {
	return &keptSessions{max: max, sessions: map[string]*tls.ClientSessionState{}}
}

func (k *keptSessions) Get(key string) (*tls.ClientSessionState, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cs, ok := k.sessions[key]
	return cs, ok
}

// Put keeps cs for key if key holds a slot or a slot is free; a nil cs
// (the server refused the session) frees key's slot.
func (k *keptSessions) Put(key string, cs *tls.ClientSessionState) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if cs == nil {
		delete(k.sessions, key)
		return
	}
	if _, ok := k.sessions[key]; ok || len(k.sessions) < k.max {
		k.sessions[key] = cs
	}
}

// kept is how many hosts hold a session.
func (k *keptSessions) kept() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.sessions)
}
