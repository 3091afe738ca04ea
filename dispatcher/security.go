package dispatcher

import (
	"time"

	"backfill/wire"
)

// refusalLogEvery is how often one peer's refused handshakes are logged
// again while it keeps trying (it reconnects many times a second).
const refusalLogEvery = time.Minute

// refusalHints say what to do about each kind of refused handshake.
var refusalHints = map[string]string{
	wire.RefusedKey:       "if the supervisor is ours, put its .pub among --authorized-keys and restart the dispatcher",
	wire.RefusedPlaintext: "the supervisor has no keys: start it with --key and --dispatcher-key",
	wire.RefusedServerKey: "the supervisor's --dispatcher-key is not this dispatcher's public key",
}

// loggedRefusal is when a refused peer was last logged, at what count.
type loggedRefusal struct {
	count int64
	at    time.Time
}

// noteRefusals logs the handshakes the intake refused: each peer when it
// is first refused, then at most every refusalLogEvery while it keeps
// trying. Callers hold mu.
func (d *Dispatcher) noteRefusals(now time.Time) {
	if len(d.refusalLogged) > 4*maxRefusalsLogged {
		clear(d.refusalLogged) // peers come and go; a bound, not a history
	}
	for _, r := range d.recv.Refusals() {
		id := r.Reason + "\x00" + r.Address + "\x00" + r.Key
		l, seen := d.refusalLogged[id]
		if seen && (r.Count == l.count || now.Sub(l.at) < refusalLogEvery) {
			continue
		}
		d.refusalLogged[id] = loggedRefusal{count: r.Count, at: now}
		args := []any{"address", r.Address, "key", r.Key, "attempts", r.Count, "since", r.First}
		if h := refusalHints[r.Reason]; h != "" {
			args = append(args, "hint", h)
		}
		d.log.Warn("supervisor handshake refused: "+r.Reason, args...)
	}
}

// maxRefusalsLogged is about how many refused peers the intake keeps.
const maxRefusalsLogged = 64

// forged handles a frame from that claims what its sender was not given:
// an answer to a lease it does not hold. The sender's key is quarantined
// (cluster.Members.Forged: logged, refused from now on) and, when it is
// a member, dropped, so that its tasks go to others and it gets no more.
// A plaintext cluster cannot tell who sent it: the frame is only refused
// and counted. Callers hold mu.
func (d *Dispatcher) forged(from wire.Peer, label, why string, now time.Time) error {
	d.run.forged++
	_, err := d.members.Forged(from, label, why, now)
	return err
}

// frameMember is the supervisor name a frame carries, for logs only.
func frameMember(v any) string {
	switch v := v.(type) {
	case *wire.Result:
		return v.Supervisor
	case *wire.Hello:
		return v.Supervisor
	case *wire.Heartbeat:
		return v.Supervisor
	}
	return ""
}
