package dispatcher

import (
	"slices"
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

// memberSecurity decides whether the supervisor a Hello or Heartbeat
// describes may have tasks, and how its task socket is dialled.
//
// Trust runs both ways. A secured dispatcher (Config.Keys) hears only
// supervisors whose key is in Config.Authorized, as its intake refuses
// every other CURVE handshake; it dials a supervisor's task socket as a
// CURVE client with its own key pair, expecting the server key the Hello
// advertises, so tasks reach only the holder of that key's secret. The key
// is checked against Config.Authorized again here: an authorized supervisor
// cannot point the dispatcher at a socket keyed by someone unlisted. A
// plaintext dispatcher dials only loopback task endpoints unless
// Config.Insecure. Callers hold mu.
func (d *Dispatcher) memberSecurity(h wire.Hello) (wire.Security, bool) {
	refuse := func(why string) (wire.Security, bool) {
		d.run.refused++
		key := "security\x00" + h.Supervisor + "\x00" + h.Key + "\x00" + h.Endpoint
		if !d.refused[key] {
			d.refused[key] = true
			d.log.Error("supervisor refused: "+why, "supervisor", h.Supervisor, "endpoint", h.Endpoint, "key", h.Key)
		}
		return wire.Security{}, false
	}
	if d.cfg.Keys.IsZero() {
		if !d.cfg.Insecure && !wire.Loopback(h.Endpoint) {
			return refuse("plaintext to a task endpoint that is not loopback (secure the cluster with keys, or allow insecure)")
		}
		return wire.Security{Insecure: d.cfg.Insecure}, true
	}
	if h.Key == "" {
		return refuse("it advertises no key, and this dispatcher sends tasks only to CURVE task sockets")
	}
	if !slices.Contains(d.cfg.Authorized, h.Key) {
		return refuse("its task socket's key is not among the authorized keys")
	}
	return wire.Security{Keys: d.cfg.Keys, ServerKey: h.Key}, true
}
