package fetch

import (
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
)

// An http.Transport keeps bookkeeping for every host it was ever asked
// for: a request that finds no idle connection queues a want for one
// (idleConnWait), and the queue of a host that never hands a connection
// back — one that refused, timed out or has no address — stays in the
// Transport for good, holding its request's context. A crawl of millions
// of hosts that mostly fail grows by that much per host. So a Fetcher
// counts the distinct hosts its Transport served and, past
// Config.MaxTransportHosts, serves the next requests from a fresh one.
//
// The old Transport is not closed: requests already on it (and their
// redirects' hops, which may take either) go on and finish as usual.
// CloseIdleConnections makes it close each connection as it comes back
// idle, and once its last request is done nothing refers to it and its
// per-host state goes with it. The cost is the keep-alive connections of
// the hosts still being crawled, dialled again once per swap.

// DefaultMaxTransportHosts is Config.MaxTransportHosts's default: above
// the hosts a supervisor works on at once (its capacity), so a crawl of
// a few thousand hosts keeps its connections alive throughout.
const DefaultMaxTransportHosts = 8192

// transports owns a Fetcher's current Transport and client and replaces
// them after max distinct hosts.
type transports struct {
	newTransport func() *http.Transport
	max          int

	mu     sync.Mutex
	cur    *http.Transport
	client *http.Client
	hosts  map[string]struct{} // scheme://host:port served by cur
	swaps  atomic.Int64
}

func newTransports(max int, newTransport func() *http.Transport) *transports {
	ts := &transports{newTransport: newTransport, max: max}
	ts.install()
	return ts
}

// install puts a fresh Transport in place. Callers hold mu (or own ts).
func (ts *transports) install() {
	ts.cur = ts.newTransport()
	ts.client = &http.Client{
		Transport: ts.cur,
		// Redirects are followed by Get itself, so every hop is counted,
		// loop-checked and dialed through the address guard.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	ts.hosts = make(map[string]struct{}, min(ts.max, 1024))
}

// clientFor returns the client to send a request for u with, first
// replacing the Transport when u's host would be one too many for it.
func (ts *transports) clientFor(u *url.URL) *http.Client {
	key := u.Scheme + "://" + u.Host
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if _, ok := ts.hosts[key]; !ok {
		if len(ts.hosts) >= ts.max {
			old := ts.cur
			ts.install()
			ts.swaps.Add(1)
			// In-flight requests on old are unaffected: this closes
			// only idle connections, and those that come back idle.
			old.CloseIdleConnections()
		}
		ts.hosts[key] = struct{}{}
	}
	return ts.client
}

// current is the Transport in use and the hosts it served so far.
func (ts *transports) current() (*http.Transport, int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.cur, len(ts.hosts)
}

// closeIdle releases the idle connections of the current Transport
// (earlier ones close theirs as they come back).
func (ts *transports) closeIdle() {
	ts.mu.Lock()
	cur := ts.cur
	ts.mu.Unlock()
	cur.CloseIdleConnections()
}
