package fetch

import (
	"context"
	"io"
	"net/http/httptrace"
	"net/url"
	"sync"
)

// One request's exchange with a server, as the transport's trace reports
// it: the address it reached, so that a response or a classified failure
// can name it; the connections it took, whose read deadlines it arms for
// as long as it runs (conn.go); and whether it went out more than once.
//
// Nothing below the Fetcher may send a request again: a retry is the
// caller's, under its host's rules, and counted. net/http's Transport
// resends a request that failed on a reused connection when the request
// is replayable (a GET without a body, or with a body it can rewind), and
// its HTTP/2 client resends one the server refused (REFUSED_STREAM), left
// unprocessed at a GOAWAY, or reset with PROTOCOL_ERROR. Every request is
// therefore sent with an empty body that cannot be rewound (unreplayable):
// on the wire it is the same GET (HTTP/1.1 probes the body, finds it empty
// and sends none; HTTP/2 ends the stream with an empty DATA frame), but
// the Transport fails it instead of sending it twice. The only resend
// left is of a request never written (an HTTP/2 connection that could no
// longer take a stream), which is not a repeat. Should one happen all the
// same, the trace sees the request take a connection or be written after
// it was written once, and Stats counts it.

// exchange is one request's trace, reached through its context.
type exchange struct {
	mu        sync.Mutex
	addr      string
	resolving string      // the host being looked up in DNS right now, if any
	conns     []*idleConn // connections armed for this request
	wrote     bool        // the request head has gone out
	repeated  bool        // ... and gone out, or taken a connection, again
	reused    bool        // the connection it took had served a request before
}

type exchangeKey struct{}

func (n *exchange) set(addr string) {
	n.mu.Lock()
	n.addr = addr
	n.mu.Unlock()
}

func (n *exchange) get() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addr
}

// gotConn records the connection the transport hands the request: its
// address, and its deadlines armed for the request.
func (n *exchange) gotConn(info httptrace.GotConnInfo) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.wrote {
		n.repeated = true
	}
	n.reused = info.Reused
	if info.Conn == nil {
		return
	}
	if a := info.Conn.RemoteAddr(); a != nil {
		n.addr = a.String()
	}
	if ic := idleConnOf(info.Conn); ic != nil {
		ic.arm()
		n.conns = append(n.conns, ic)
	}
}

func (n *exchange) wroteHeaders() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.wrote {
		n.repeated = true
	}
	n.wrote = true
}

// end disarms the request's connections (its body has been read or
// abandoned) and reports whether the request went out more than once.
func (n *exchange) end() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.conns {
		c.disarm()
	}
	n.conns = nil
	return n.repeated
}

// noteResolving records that the request whose context ctx is waits for
// a DNS answer for host ("" once it has one).
func noteResolving(ctx context.Context, host string) {
	if n, ok := ctx.Value(exchangeKey{}).(*exchange); ok {
		n.mu.Lock()
		n.resolving = host
		n.mu.Unlock()
	}
}

// reusedConn reports whether the request whose context ctx is went out
// on a kept-alive connection that had served a request before.
func reusedConn(ctx context.Context) bool {
	if n, ok := ctx.Value(exchangeKey{}).(*exchange); ok {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.reused
	}
	return false
}

// resolvingOf is the host the request whose context ctx is waits for a
// DNS answer for, or "".
func resolvingOf(ctx context.Context) string {
	if n, ok := ctx.Value(exchangeKey{}).(*exchange); ok {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.resolving
	}
	return ""
}

// noteRemote records addr on the request whose context ctx is, if any:
// the dialer notes every address it tries or refuses.
func noteRemote(ctx context.Context, addr string) {
	if n, ok := ctx.Value(exchangeKey{}).(*exchange); ok {
		n.set(addr)
	}
}

// onceNoted is once under an exchange: the remote address recorded on
// what it returns, the connection's deadlines armed while it runs, a
// repeat counted.
func (f *Fetcher) onceNoted(ctx, parent context.Context, u *url.URL, r Request) (*Response, *Error) {
	n := &exchange{}
	ctx = context.WithValue(ctx, exchangeKey{}, n)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:      n.gotConn,
		WroteHeaders: n.wroteHeaders,
	})
	resp, err := f.once(ctx, parent, u, r)
	if n.end() {
		f.repeated.Add(1)
	}
	addr := n.get()
	if resp != nil {
		resp.RemoteAddr = addr
	}
	if err != nil {
		err.RemoteAddr = addr
	}
	return resp, err
}

// unreplayable is the empty body every request is sent with, so that the
// transport never sends it twice (see above).
type unreplayable struct{}

func (unreplayable) Read([]byte) (int, error) { return 0, io.EOF }
func (unreplayable) Close() error             { return nil }

// Stats are a Fetcher's counts since New.
type Stats struct {
	// Repeated counts requests that went out more than once below the
	// Fetcher: it stays 0 unless net/http changes what it resends.
	Repeated int64
}

// Stats returns the Fetcher's counts.
func (f *Fetcher) Stats() Stats {
	return Stats{Repeated: f.repeated.Load()}
}
