package fetch

import (
	"crypto/tls"
	"net"
	"sync"
	"time"
)

// A connection's read deadline belongs to the request using it, never to
// the connection. The transport keeps a read pending on every kept-alive
// connection, idle or not (it watches for the server closing it), so a
// deadline set on each read would start when the connection went idle:
// with the idle limit as long as a host's delay, it passed just as the
// host's next request went out, the transport took the timeout for a dead
// connection and sent the request again on a new one. So a connection
// waits without a deadline while no request uses it; a request arms it
// when it takes the connection, just before it is written, and disarms it
// at its body's end. While armed, every read must see progress within
// IdleTimeout, including the read already pending when the request came.
// Writes always have the limit: they happen only for a request (or a
// protocol frame), and one that makes no progress is a peer not reading.

// idleConn is a dialled connection whose reads fail after idle without
// progress while at least one request uses it.
type idleConn struct {
	net.Conn
	idle time.Duration

	mu    sync.Mutex
	users int // requests using the connection (HTTP/2 may run several)

	// closed frees the host's keep-alive slot, if it holds one
	// (keepalive.go); nil otherwise.
	closed func()
}

// newIdleConn wraps c unarmed: the transport arms it per request.
func newIdleConn(c net.Conn, idle time.Duration) *idleConn {
	return &idleConn{Conn: c, idle: idle}
}

// arm starts a request's use of the connection: reads from now on,
// including one already waiting, fail after idle without progress.
func (c *idleConn) arm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.users++
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
}

// disarm ends a request's use; the last one out lifts the deadline, so the
// connection can wait in the pool for as long as the pool keeps it.
func (c *idleConn) disarm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.users == 0 {
		return
	}
	c.users--
	if c.users == 0 {
		_ = c.Conn.SetReadDeadline(time.Time{})
	}
}

func (c *idleConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	armed := c.users > 0
	if armed {
		if err := c.Conn.SetReadDeadline(time.Now().Add(c.idle)); err != nil {
			c.mu.Unlock()
			return 0, err
		}
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	if err != nil && isTimeout(err) {
		err = &idleTimeoutError{err}
	}
	return n, err
}

// Close closes the connection and frees its host's keep-alive slot when
// it was the host's last.
func (c *idleConn) Close() error {
	if c.closed != nil {
		c.closed()
	}
	return c.Conn.Close()
}

func (c *idleConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// idleConnOf finds the idleConn under a connection the transport hands a
// request (plain, or TLS over it), or nil.
func idleConnOf(c net.Conn) *idleConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	ic, _ := c.(*idleConn)
	return ic
}

// idleTimeoutError says the peer went silent longer than IdleTimeout.
type idleTimeoutError struct{ err error }

func (e *idleTimeoutError) Error() string   { return "peer silent too long: " + e.err.Error() }
func (e *idleTimeoutError) Unwrap() error   { return e.err }
func (e *idleTimeoutError) Timeout() bool   { return true }
func (e *idleTimeoutError) Temporary() bool { return true }
