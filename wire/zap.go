package wire

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// ZAP (ZeroMQ RFC 27) is how libzmq asks the application whether a CURVE
// client may connect: during each handshake on a CURVE server socket it
// sends a request naming the socket's domain and the client's public key to
// the handler bound at zapEndpoint, and accepts the client only on a "200".
//
// The handler is process-global, as libzmq looks for one endpoint. Each
// secured Receiver registers its own domain with its own authorized keys,
// so several dispatchers and supervisors in one process (tests, `backfill
// run`) never see each other's keys. The handler runs while at least one
// domain is registered: it starts before the first CURVE server socket
// binds and stops after the last one is closed, so a CURVE server never
// exists without it (libzmq would then accept any client key).
//
// This is pebbe/zmq4's AuthStart/AuthCurveAdd/AuthStop, done here instead:
// zmq4 keeps its key tables in plain maps that its handler goroutine reads
// without a lock, so adding a domain while another socket is mid-handshake
// (a refused peer reconnects ten times a second) is a data race and can
// crash the process. Here every table access holds zapState.mu.
const zapEndpoint = "inproc://zeromq.zap.01"

// zapState is the handler's state; zap is the only instance.
type zapState struct {
	life sync.Mutex // serializes add and remove, so start and stop

	mu      sync.Mutex // guards domains and next; the handler takes it per request
	domains map[string]*zapDomain
	next    int

	done chan struct{} // closed when the handler goroutine ends; nil while stopped
}

// zapDomain is one Receiver's policy.
type zapDomain struct {
	keys    map[string]bool // Z85 public keys accepted
	refused *refusals       // the Receiver's table of refused handshakes
}

var zap = zapState{domains: make(map[string]*zapDomain)}

// add registers a new domain accepting keys, starting the handler if it is
// not running, and returns the domain's name.
func (z *zapState) add(keys []string, refused *refusals) (string, error) {
	z.life.Lock()
	defer z.life.Unlock()
	if z.done == nil {
		if err := z.start(); err != nil {
			return "", err
		}
	}
	d := &zapDomain{keys: make(map[string]bool, len(keys)), refused: refused}
	for _, k := range keys {
		d.keys[k] = true
	}
	z.mu.Lock()
	z.next++
	name := "backfill-" + strconv.Itoa(z.next)
	z.domains[name] = d
	z.mu.Unlock()
	return name, nil
}

// remove forgets a domain; the handler stops with the last one.
func (z *zapState) remove(domain string) {
	z.life.Lock()
	defer z.life.Unlock()
	z.mu.Lock()
	delete(z.domains, domain)
	empty := len(z.domains) == 0
	z.mu.Unlock()
	if empty && z.done != nil {
		z.stop()
	}
}

// running reports whether the handler goroutine is running (for tests).
func (z *zapState) running() bool {
	z.life.Lock()
	defer z.life.Unlock()
	return z.done != nil
}

// start binds the handler socket and starts its goroutine. Callers hold
// life.
func (z *zapState) start() error {
	sock, err := zmq.NewSocket(zmq.REP)
	if err != nil {
		return fmt.Errorf("wire: zap handler: %w", err)
	}
	if err := sock.SetLinger(0); err != nil {
		sock.Close()
		return fmt.Errorf("wire: zap handler: %w", err)
	}
	// A handler stopped a moment ago may still hold the inproc name
	// while libzmq's reaper finishes closing it.
	for tries := 0; ; tries++ {
		err = sock.Bind(zapEndpoint)
		if err == nil {
			break
		}
		if zmq.AsErrno(err) != zmq.EADDRINUSE || tries == 50 {
			sock.Close()
			return fmt.Errorf("wire: zap handler: bind %s: %w", zapEndpoint, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	done := make(chan struct{})
	z.done = done
	go z.serve(sock, done)
	return nil
}

// stop asks the handler to quit, over its own socket, and waits for it.
// Callers hold life.
func (z *zapState) stop() {
	defer func() { z.done = nil }()
	quit, err := zmq.NewSocket(zmq.REQ)
	if err == nil {
		quit.SetLinger(0)
		if err = quit.Connect(zapEndpoint); err == nil {
			if _, err = quit.Send("QUIT", 0); err == nil {
				_, err = quit.Recv(0)
			}
		}
		quit.Close()
	}
	if err != nil {
		// Cannot happen with a live handler; waiting would hang.
		return
	}
	<-z.done
}

// serve answers ZAP requests until told to quit.
func (z *zapState) serve(sock *zmq.Socket, done chan struct{}) {
	defer close(done)
	defer sock.Close()
	for {
		msg, err := sock.RecvMessageBytes(0)
		if err != nil {
			return
		}
		if len(msg) == 1 && string(msg[0]) == "QUIT" {
			sock.Send("QUIT", 0)
			return
		}
		if _, err := sock.SendMessage(z.answer(msg)); err != nil {
			return
		}
	}
}

// answer decides one request: version, request id, domain, address,
// identity, mechanism, credentials. Only CURVE clients with a key
// registered for the socket's domain pass.
func (z *zapState) answer(msg [][]byte) []string {
	if len(msg) < 6 {
		id := ""
		if len(msg) > 1 {
			id = string(msg[1])
		}
		return []string{"1.0", id, "500", "malformed request", "", ""}
	}
	version, id, domain, address, mechanism := string(msg[0]), string(msg[1]), string(msg[2]), string(msg[3]), string(msg[5])
	if version != "1.0" {
		return []string{"1.0", id, "500", "unknown version", "", ""}
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	d := z.domains[domain]
	if d == nil {
		if mechanism == "NULL" && domain == "" {
			return []string{version, id, "200", "OK", "", ""} // a plaintext socket of no concern here
		}
		return []string{version, id, "400", "unknown domain", "", ""}
	}
	key := ""
	if mechanism == "CURVE" && len(msg) == 7 && len(msg[6]) == 32 {
		key = zmq.Z85encode(string(msg[6]))
		if d.keys[key] {
			return []string{version, id, "200", "OK", key, ""}
		}
	}
	d.refused.note(RefusedKey, address, key, time.Now().UTC())
	return []string{version, id, "400", "key not authorized", "", ""}
}
