package wire

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// ErrTimeout is returned by Recv when nothing arrived in time and by Send
// when the peer's queue stayed full (high-water mark) for the whole timeout.
var ErrTimeout = errors.New("wire: timeout")

// ErrClosed is returned by calls on a closed socket.
var ErrClosed = errors.New("wire: socket closed")

// hwm bounds the frames ZeroMQ queues per socket, in each direction. The
// dispatcher never has more in flight to a supervisor than the supervisor
// advertised, so the mark is a safety net, not flow control.
const hwm = 10000

// Receiver is a bound PULL socket: the dispatcher's intake (hellos,
// heartbeats, results) and a supervisor's task socket (welcomes, tasks).
// It is safe for concurrent use, though one reader is the normal case.
type Receiver struct {
	mu       sync.Mutex
	sock     *zmq.Socket
	ready    *readiness
	endpoint string
	bad      atomic.Int64
	domain   string    // ZAP domain of a CURVE server; "" for plaintext
	refused  *refusals // handshakes refused, by ZAP or before (CURVE servers only)
	mon      *monitor  // reads the handshakes refused before ZAP
}

// Sender is a PUSH socket connected to one peer with ZMQ_IMMEDIATE set, so
// nothing is queued to a peer whose handshake has not completed. Safe for
// concurrent use.
type Sender struct {
	mu       sync.Mutex
	sock     *zmq.Socket
	poller   *zmq.Poller
	endpoint string
}

// Listen binds a Receiver. endpoint is a ZeroMQ endpoint such as
// "tcp://127.0.0.1:5550" or "tcp://127.0.0.1:*" (any free port; see
// Endpoint for the one chosen).
func Listen(endpoint string) (*Receiver, error) {
	return listen(endpoint, &Receiver{}, nil)
}

// ListenSecure binds a Receiver with sec: a CURVE server accepting only
// sec.Authorized clients, or plaintext when sec has no keys, refused with
// ErrPlaintext on an endpoint that is not loopback unless sec.Insecure.
func ListenSecure(endpoint string, sec Security) (*Receiver, error) {
	if err := sec.check(endpoint, true); err != nil {
		return nil, fmt.Errorf("wire: listen %s: %w", endpoint, err)
	}
	if sec.Keys.IsZero() {
		return Listen(endpoint)
	}
	r := &Receiver{refused: newRefusals()}
	domain, err := zap.add(sec.Authorized, r.refused)
	if err != nil {
		return nil, fmt.Errorf("wire: listen %s: %w", endpoint, err)
	}
	r.domain = domain
	r, err = listen(endpoint, r, func(sock *zmq.Socket) error {
		return sock.ServerAuthCurve(domain, sec.Keys.Secret)
	})
	if err != nil {
		zap.remove(domain)
		return nil, err
	}
	if r.mon, err = watch(r.sock, r.refused); err != nil {
		r.Close()
		return nil, fmt.Errorf("wire: listen %s: monitor: %w", endpoint, err)
	}
	return r, nil
}

// listen binds r's socket, after secure (when not nil) set its security.
func listen(endpoint string, r *Receiver, secure func(*zmq.Socket) error) (*Receiver, error) {
	sock, err := zmq.NewSocket(zmq.PULL)
	if err != nil {
		return nil, fmt.Errorf("wire: listen %s: %w", endpoint, err)
	}
	for _, set := range []func() error{
		func() error { return sock.SetLinger(0) },
		func() error { return sock.SetRcvhwm(hwm) },
		func() error { return sock.SetMaxmsgsize(MaxFrame) },
		func() error {
			if secure == nil {
				return nil
			}
			return secure(sock)
		},
	} {
		if err := set(); err != nil {
			sock.Close()
			return nil, fmt.Errorf("wire: listen %s: %w", endpoint, err)
		}
	}
	if err := sock.Bind(endpoint); err != nil {
		sock.Close()
		return nil, fmt.Errorf("wire: listen %s: %w", endpoint, err)
	}
	bound, err := sock.GetLastEndpoint()
	if err != nil {
		sock.Close()
		return nil, fmt.Errorf("wire: listen %s: %w", endpoint, err)
	}
	ready, err := newReadiness(sock)
	if err != nil {
		sock.Close()
		return nil, fmt.Errorf("wire: listen %s: %w", endpoint, err)
	}
	r.sock, r.ready, r.endpoint = sock, ready, bound
	return r, nil
}

// Endpoint is the endpoint actually bound, with the port resolved.
func (r *Receiver) Endpoint() string { return r.endpoint }

// Peer is who sent a frame, as the transport knows it. Key is the
// sender's CURVE public key (Z85) as the ZAP handler authenticated it
// during the handshake, and libzmq attaches it to every message the
// connection carries: a peer cannot send under another key without its
// secret. It is empty on a plaintext socket, whose senders cannot be told
// apart. Address is the sender's IP address, for logs (libzmq's
// Peer-Address); it authenticates nothing.
type Peer struct {
	Key     string
	Address string
}

// Recv waits up to timeout for one frame and decodes it. A frame that does
// not decode is counted (see Dropped) and reported as an error wrapping
// ErrBadFrame; the socket stays usable.
func (r *Receiver) Recv(timeout time.Duration) (Kind, any, error) {
	kind, v, _, err := r.RecvFrom(timeout)
	return kind, v, err
}

// RecvFrom is Recv that also says who sent the frame (see Peer). On a
// CURVE Receiver every frame has the Key of an authorized client.
func (r *Receiver) RecvFrom(timeout time.Duration) (Kind, any, Peer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sock == nil {
		return 0, nil, Peer{}, ErrClosed
	}
	var deadline time.Time
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	frame, meta, err := r.sock.RecvBytesWithMetadata(zmq.DONTWAIT, "User-Id", "Peer-Address")
	for isEAGAIN(err) {
		if err := r.ready.wait(r.sock, deadline); err != nil {
			if errors.Is(err, ErrTimeout) {
				return 0, nil, Peer{}, ErrTimeout
			}
			return 0, nil, Peer{}, fmt.Errorf("wire: recv on %s: %w", r.endpoint, err)
		}
		frame, meta, err = r.sock.RecvBytesWithMetadata(zmq.DONTWAIT, "User-Id", "Peer-Address")
	}
	if err != nil {
		return 0, nil, Peer{}, fmt.Errorf("wire: recv on %s: %w", r.endpoint, err)
	}
	from := Peer{Address: meta["Peer-Address"]}
	if r.domain != "" {
		// Only a CURVE server's ZAP handler sets User-Id (to the key it
		// authorized); on a plaintext socket it means nothing.
		from.Key = meta["User-Id"]
	}
	// A multipart message from a foreign peer: drain and refuse the rest.
	for more, _ := r.sock.GetRcvmore(); more; more, _ = r.sock.GetRcvmore() {
		if _, err := r.sock.RecvBytes(0); err != nil {
			break
		}
		frame = nil
	}
	if frame == nil {
		r.bad.Add(1)
		return 0, nil, from, fmt.Errorf("%w: multipart message on %s", ErrBadFrame, r.endpoint)
	}
	kind, v, err := Decode(frame)
	if err != nil {
		r.bad.Add(1)
		countFrame(&traffic.in, 0, len(frame))
		return 0, nil, from, fmt.Errorf("on %s: %w", r.endpoint, err)
	}
	countFrame(&traffic.in, kind, len(frame))
	return kind, v, from, nil
}

// Dropped counts frames that were refused as bad.
func (r *Receiver) Dropped() int64 { return r.bad.Load() }

// Refused counts the handshakes a CURVE Receiver refused: clients whose
// key is not authorized, plaintext clients, and clients that dialled with
// another server key. 0 for a plaintext Receiver.
func (r *Receiver) Refused() int64 {
	if r.refused == nil {
		return 0
	}
	return r.refused.total.Load()
}

// Refusals lists the handshakes a CURVE Receiver refused, by reason and
// peer, the most recent first (at most maxRefusals of them). Nil for a
// plaintext Receiver.
func (r *Receiver) Refusals() []Refusal {
	if r.refused == nil {
		return nil
	}
	return r.refused.list()
}

// Close closes the socket, discarding anything unread.
func (r *Receiver) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sock == nil {
		return nil
	}
	if r.mon != nil {
		r.sock.Monitor("", 0)
		r.mon.stop()
	}
	err := errors.Join(r.ready.close(), r.sock.Close())
	r.sock = nil
	if r.domain != "" {
		zap.remove(r.domain)
	}
	return err
}

// Dial connects a Sender to endpoint. ZeroMQ connects in the background and
// reconnects by itself; Dial fails only on a malformed endpoint.
func Dial(endpoint string) (*Sender, error) {
	return dial(endpoint, nil)
}

// DialSecure connects a Sender with sec: a CURVE client that talks only to
// the server holding sec.ServerKey, or plaintext when sec has no keys,
// refused with ErrPlaintext on an endpoint that is not loopback unless
// sec.Insecure.
func DialSecure(endpoint string, sec Security) (*Sender, error) {
	if err := sec.check(endpoint, false); err != nil {
		return nil, fmt.Errorf("wire: dial %s: %w", endpoint, err)
	}
	if sec.Keys.IsZero() {
		return Dial(endpoint)
	}
	return dial(endpoint, func(sock *zmq.Socket) error {
		// Not ClientAuthCurve: it ignores a failure to set the secret.
		if err := sock.SetCurveServerkey(sec.ServerKey); err != nil {
			return err
		}
		if err := sock.SetCurvePublickey(sec.Keys.Public); err != nil {
			return err
		}
		return sock.SetCurveSecretkey(sec.Keys.Secret)
	})
}

// dial connects a Sender, after secure (when not nil) set its security.
func dial(endpoint string, secure func(*zmq.Socket) error) (*Sender, error) {
	sock, err := zmq.NewSocket(zmq.PUSH)
	if err != nil {
		return nil, fmt.Errorf("wire: dial %s: %w", endpoint, err)
	}
	for _, set := range []func() error{
		func() error { return sock.SetLinger(500 * time.Millisecond) },
		func() error { return sock.SetSndhwm(hwm) },
		func() error { return sock.SetImmediate(true) },
		func() error { return sock.SetReconnectIvl(100 * time.Millisecond) },
		func() error { return sock.SetReconnectIvlMax(5 * time.Second) },
		func() error {
			if secure == nil {
				return nil
			}
			return secure(sock)
		},
	} {
		if err := set(); err != nil {
			sock.Close()
			return nil, fmt.Errorf("wire: dial %s: %w", endpoint, err)
		}
	}
	if err := sock.Connect(endpoint); err != nil {
		sock.Close()
		return nil, fmt.Errorf("wire: dial %s: %w", endpoint, err)
	}
	p := zmq.NewPoller()
	p.Add(sock, zmq.POLLOUT)
	return &Sender{sock: sock, poller: p, endpoint: endpoint}, nil
}

// Endpoint is the endpoint the Sender was dialled to.
func (s *Sender) Endpoint() string { return s.endpoint }

// Send encodes v as a frame of the given kind and queues it, waiting up to
// timeout for room (for a connected peer with room in its queue). v must be
// the value type matching kind (Hello for KindHello, and so on).
func (s *Sender) Send(kind Kind, v any, timeout time.Duration) error {
	frame, err := Encode(kind, v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sock == nil {
		return ErrClosed
	}
	// Try first: a connected peer with room takes the frame at once, and
	// the lock is held for one call instead of a poll and a send. Only a
	// full queue (or no peer yet) waits, in the poll below.
	if _, err := s.sock.SendBytes(frame, zmq.DONTWAIT); !isEAGAIN(err) {
		if err != nil {
			return fmt.Errorf("wire: send %s to %s: %w", kind, s.endpoint, err)
		}
		countFrame(&traffic.out, kind, len(frame))
		return nil
	}
	polled, err := s.poller.Poll(timeout)
	if err != nil {
		return fmt.Errorf("wire: send %s to %s: %w", kind, s.endpoint, err)
	}
	if len(polled) == 0 {
		return fmt.Errorf("wire: send %s to %s: %w", kind, s.endpoint, ErrTimeout)
	}
	if _, err := s.sock.SendBytes(frame, zmq.DONTWAIT); err != nil {
		if isEAGAIN(err) {
			return fmt.Errorf("wire: send %s to %s: %w", kind, s.endpoint, ErrTimeout)
		}
		return fmt.Errorf("wire: send %s to %s: %w", kind, s.endpoint, err)
	}
	countFrame(&traffic.out, kind, len(frame))
	return nil
}

// isEAGAIN reports whether err is ZeroMQ's "try again": nothing to
// receive, or no room to send, right now.
func isEAGAIN(err error) bool {
	return err != nil && zmq.AsErrno(err) == zmq.Errno(11)
}

// Close closes the socket; frames not yet sent get a short linger.
func (s *Sender) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sock == nil {
		return nil
	}
	err := s.sock.Close()
	s.sock = nil
	return err
}
