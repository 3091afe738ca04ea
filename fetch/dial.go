package fetch

import (
	"context"
	"errors"
	"net"
)

// DialContext connects to addr ("host:port") exactly as Get would: Resolve
// overrides first, every resolved address through the address guard, the
// DNS and connect timeouts, and the idle timeout on the connection. A
// refused or failed dial is an *Error carrying its class. It exists so that
// another client on this machine — the survey's probes — can reach only
// what Get may reach.
func (f *Fetcher) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := f.dial(ctx, network, addr)
	if err == nil {
		// No transport arms it per request: the caller's every read has
		// the idle limit.
		c.arm()
		return c, nil
	}
	var de *dialError
	if errors.As(err, &de) {
		return nil, &Error{Class: de.class, URL: addr, Err: de.err}
	}
	return nil, &Error{Class: ClassConnect, URL: addr, Err: err}
}
