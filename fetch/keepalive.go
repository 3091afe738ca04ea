package fetch

import (
	"net"
	"net/url"
	"sync"
)

// Which hosts keep their connection between requests. An idle kept-alive
// connection costs its two buffers and the transport's two goroutines,
// about 36 KiB of memory with their stacks. A crawl goes round its hosts,
// each waiting out its delay, so with more hosts in the round than a pool
// keeps, a pool that drops its least recently used connection drops each
// host's just before its next request: every connection is kept (4,096
// of them, 75 MiB, in a crawl of 10,000 hosts at the default delay) and
// none is used again. So the first Config.KeptHosts hosts keep theirs for
// as long as it stays open, and a request to any other host asks the
// server to close its connection after the answer (Connection: close),
// through a transport that keeps nothing for the host (transport.go):
// neither side holds an idle connection for nothing. A slot is free again
// when its host's connection closes (the transport's idle limit, the
// server, a swap of transport), so hosts whose work is over give theirs
// to the next.

// DefaultKeptHosts is Config.KeptHosts's default: 512 connections, about
// 18 MiB. A host beyond them costs a TCP (and TLS) handshake a request,
// once per its delay.
const DefaultKeptHosts = 512

// keepAlive owns the slots of the hosts whose connections are kept.
type keepAlive struct {
	max int

	mu   sync.Mutex
	open map[string]int // a kept host's address → its connections open
}

func newKeepAlive(max int) *keepAlive {
	return &keepAlive{max: max, open: map[string]int{}}
}

// admit says whether a request to addr may leave its connection open:
// addr holds a slot, or takes a free one.
func (k *keepAlive) admit(addr string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.open[addr]; ok {
		return true
	}
	if len(k.open) >= k.max {
		return false
	}
	k.open[addr] = 0
	return true
}

// settle is called when a request to addr is over: a slot it took whose
// connection never opened (the dial failed) is free again.
func (k *keepAlive) settle(addr string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if n, ok := k.open[addr]; ok && n == 0 {
		delete(k.open, addr)
	}
}

// opened counts a connection dialled to addr and returns what to call
// when it closes, or nil when addr holds no slot (its request asked for
// the connection to close).
func (k *keepAlive) opened(addr string) (closed func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.open[addr]; !ok {
		return nil
	}
	k.open[addr]++
	var once sync.Once
	return func() {
		once.Do(func() {
			k.mu.Lock()
			defer k.mu.Unlock()
			if k.open[addr]--; k.open[addr] <= 0 {
				delete(k.open, addr)
			}
		})
	}
}

// kept is how many hosts hold a slot.
func (k *keepAlive) kept() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.open)
}

// dialAddr is the address the transport dials for u, as it names it to
// the dialer: the ASCII host and the port, the scheme's when none.
func dialAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}
