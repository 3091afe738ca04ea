package cluster

import (
	"errors"
	"slices"

	"backfill/wire"
)

// Admission says who may join a cluster: its dispatcher's key pair (zero:
// plaintext), the members' public keys it authorizes, and whether
// plaintext may leave loopback.
type Admission struct {
	Keys       wire.Keys
	Authorized []string
	Insecure   bool
}

// Secured reports whether the cluster authenticates its members (CURVE).
func (a Admission) Secured() bool { return !a.Keys.IsZero() }

// Warning is what a dispatcher whose intake listens at intake logs at
// start about the cluster's security: PlaintextWarning for a plaintext
// cluster whose members may be on other machines, "" for a secured one
// or one on this machine alone (loopback or in-process endpoints, as
// `backfill run` has), whose members are the dispatcher's own.
func (a Admission) Warning(intake string) string {
	if a.Secured() || wire.Loopback(intake) {
		return ""
	}
	return PlaintextWarning
}

// Listen is how the dispatcher's intake listens: a CURVE server accepting
// only the authorized keys, or plaintext.
func (a Admission) Listen() wire.Security {
	return wire.Security{Keys: a.Keys, Authorized: a.Authorized, Insecure: a.Insecure}
}

// Refusals of Admit, which callers log with the member's name, endpoint
// and key. Append only: operators search logs for them.
var (
	// ErrPlaintextRemote is wire.ErrPlaintext: one refusal, one text,
	// whichever end refuses.
	ErrPlaintextRemote = wire.ErrPlaintext
	ErrNoKey           = errors.New("it advertises no key, and this dispatcher sends tasks only to CURVE task sockets")
	ErrKeyNotListed    = errors.New("its task socket's key is not among the authorized keys")
	// ErrKeyNotSender: a member advertises a task socket keyed by another
	// key than the one it talks with. Honest supervisors use one pair for
	// both; this is one member pointing the dispatcher at another's
	// socket, and it is quarantined.
	ErrKeyNotSender = errors.New("its task socket's key is not the key it sent the hello with")
)

// Admit decides whether the member a Hello (or Heartbeat) from describes
// may have tasks, and how its task socket is dialled.
//
// Trust runs both ways. A secured dispatcher hears only members whose key
// is authorized (its intake refuses every other CURVE handshake); it dials
// a member's task socket as a CURVE client with its own key pair,
// expecting the server key the Hello advertises, so tasks reach only the
// holder of that key's secret. That key must be authorized too, and be the
// sender's own: an authorized member cannot point the dispatcher at a
// socket keyed by someone unlisted, nor at another member's. A plaintext
// dispatcher dials only loopback task endpoints unless Insecure.
func (a Admission) Admit(h wire.Hello, from wire.Peer) (wire.Security, error) {
	if !a.Secured() {
		if !a.Insecure && !wire.Loopback(h.Endpoint) {
			return wire.Security{}, ErrPlaintextRemote
		}
		return wire.Security{Insecure: a.Insecure}, nil
	}
	if h.Key == "" {
		return wire.Security{}, ErrNoKey
	}
	if !slices.Contains(a.Authorized, h.Key) {
		return wire.Security{}, ErrKeyNotListed
	}
	if h.Key != from.Key {
		return wire.Security{}, ErrKeyNotSender
	}
	return wire.Security{Keys: a.Keys, ServerKey: h.Key}, nil
}

// PlaintextWarning is what a dispatcher logs at start when its cluster is
// plaintext: why it cannot bind answers to their senders.
const PlaintextWarning = "plaintext cluster: members are not authenticated, so an answer cannot be bound to its sender; " +
	"results are still refused without the current lease token, but a member that forges cannot be told apart " +
	"and quarantined (secure the cluster with keys)"
