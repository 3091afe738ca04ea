package wire

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// A CURVE Receiver keeps what it refused, for its owner to log and show:
// a handshake refused says nothing to the peer, so the peer cannot tell a
// wrong key from a dead dispatcher, and only this side can. ZAP (zap.go)
// sees a client with a key the socket does not authorize, with the
// client's address and key. A client without keys, or one that encrypted
// its handshake for another server's key (its copy of our public key is
// wrong), fails before ZAP is asked: libzmq reports those through the
// socket's monitor, without the peer's address.

// Reasons of a Refusal.
const (
	RefusedKey       = "key not authorized"
	RefusedPlaintext = "no key (a plaintext client)"
	RefusedServerKey = "wrong server key (the client's copy of this end's public key differs)"
)

// Refusal is one kind of refused handshake from one peer: how often, and
// when first and last.
type Refusal struct {
	Reason  string    `json:"reason"`
	Address string    `json:"address,omitempty"` // the peer's IP address; "" when libzmq does not tell
	Key     string    `json:"key,omitempty"`     // the peer's public key, when known
	Count   int64     `json:"count"`
	First   time.Time `json:"first"`
	Last    time.Time `json:"last"`
}

// maxRefusals bounds the peers a Receiver keeps; the least recent goes.
const maxRefusals = 64

// refusals is a Receiver's table of refused handshakes. Safe for
// concurrent use: ZAP's handler and the monitor goroutine write it.
type refusals struct {
	mu    sync.Mutex
	m     map[string]*Refusal
	total atomic.Int64
}

func newRefusals() *refusals { return &refusals{m: make(map[string]*Refusal)} }

func (r *refusals) note(reason, addr, key string, now time.Time) {
	r.total.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	id := reason + "\x00" + addr + "\x00" + key
	if e := r.m[id]; e != nil {
		e.Count++
		e.Last = now
		return
	}
	if len(r.m) >= maxRefusals {
		var oldest string
		for k, e := range r.m {
			if oldest == "" || e.Last.Before(r.m[oldest].Last) {
				oldest = k
			}
		}
		delete(r.m, oldest)
	}
	r.m[id] = &Refusal{Reason: reason, Address: addr, Key: key, Count: 1, First: now, Last: now}
}

// list is a copy of the table, the most recent first.
func (r *refusals) list() []Refusal {
	r.mu.Lock()
	out := make([]Refusal, 0, len(r.m))
	for _, e := range r.m {
		out = append(out, *e)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Last.Equal(out[j].Last) {
			return out[i].Last.After(out[j].Last)
		}
		return out[i].Reason+out[i].Address+out[i].Key < out[j].Reason+out[j].Address+out[j].Key
	})
	return out
}

// Protocol errors the monitor reports for a failed handshake (zmq.h's
// ZMQ_PROTOCOL_ERROR_ZMTP_*).
const (
	protoCryptographic     = 0x11000001
	protoMechanismMismatch = 0x11000002
)

// monitor reads a socket's failed handshakes into a refusals table until
// stopped. It owns its PAIR socket; stop asks it to end and waits.
type monitor struct {
	stopping atomic.Bool
	done     chan struct{}
}

var monitorSeq atomic.Int64

// watch starts monitoring sock's handshake failures into rs.
func watch(sock *zmq.Socket, rs *refusals) (*monitor, error) {
	addr := fmt.Sprintf("inproc://backfill-monitor-%d", monitorSeq.Add(1))
	if err := sock.Monitor(addr, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL|zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL); err != nil {
		return nil, err
	}
	pair, err := zmq.NewSocket(zmq.PAIR)
	if err != nil {
		sock.Monitor("", 0)
		return nil, err
	}
	if err := pair.Connect(addr); err != nil {
		pair.Close()
		sock.Monitor("", 0)
		return nil, err
	}
	m := &monitor{done: make(chan struct{})}
	go func() {
		defer close(m.done)
		defer pair.Close()
		p := zmq.NewPoller()
		p.Add(pair, zmq.POLLIN)
		for !m.stopping.Load() {
			polled, err := p.Poll(recvPollMonitor)
			if err != nil {
				return
			}
			if len(polled) == 0 {
				continue
			}
			ev, _, value, err := pair.RecvEvent(0)
			if err != nil {
				return
			}
			now := time.Now().UTC()
			switch {
			case ev == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL && value == protoMechanismMismatch:
				rs.note(RefusedPlaintext, "", "", now)
			case ev == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL && value == protoCryptographic:
				rs.note(RefusedServerKey, "", "", now)
			case ev == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
				rs.note(fmt.Sprintf("handshake failed (protocol error %#x)", value), "", "", now)
			case ev == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
				rs.note("handshake failed", "", "", now)
			}
		}
	}()
	return m, nil
}

// recvPollMonitor bounds how long stop waits for the monitor goroutine.
const recvPollMonitor = 50 * time.Millisecond

func (m *monitor) stop() {
	m.stopping.Store(true)
	<-m.done
}
