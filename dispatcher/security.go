package dispatcher

import (
	"slices"

	"backfill/wire"
)

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
