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

// A request whose connection is not kept (keepalive.go) goes through a
// Transport of its own that keeps none: it keeps no state for the host
// either, where the keeping one would hold the host's want of an idle
// connection that never comes back, and count the host towards its swap.

// transports owns a Fetcher's current Transport and client and replaces
// them after max distinct hosts, and the client of the requests whose
// connection closes after them.
type transports struct {
	newTransport func() *http.Transport
	max          int
	closing      *http.Client // keeps no connection (nor host) between requests

	mu     sync.Mutex
	cur    *http.Transport
	client *http.Client
	hosts  map[string]struct{} // scheme://host:port served by cur
	swaps  atomic.Int64
}

func newTransports(max int, newTransport func() *http.Transport) *transports {
	ts := &transports{newTransport: newTransport, max: max}
	ts.install()
	tr := newTransport()
	tr.DisableKeepAlives = true
	ts.closing = newClient(tr)
	return ts
}

func newClient(tr *http.Transport) *http.Client {
	return &http.Client{
		Transport: tr,
		// Redirects are followed by Get itself, so every hop is counted,
		// loop-checked and dialed through the address guard.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// install puts a fresh Transport in place. Callers hold mu (or own ts).
func (ts *transports) install() {
	ts.cur = ts.newTransport()
	ts.client = newClient(ts.cur)
	ts.hosts = make(map[string]struct{}, min(ts.max, 1024))
}

// clientFor returns the client to send a request for u with: the closing
// one unless keep, else the current one, first replacing its Transport
// when u's host would be one too many for it.
func (ts *transports) clientFor(u *url.URL, keep bool) *http.Client {
	if !keep {
		return ts.closing
	}
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
