package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"backfill/wire"
)

// Member is what a dispatcher knows of one member of its cluster: who it
// is, what its latest Hello or Heartbeat said of it, and how its task
// socket is dialled. A dispatcher's own member type embeds it (see
// Handle).
type Member struct {
	// ID is who the member is: its key's name (Admission.Name) in a
	// secured cluster, the name its Hello carries (cut by Label) in a
	// plaintext one. Routes, leases and every value's provenance name it.
	ID string
	// Label is the name its latest Hello carried, cut: what it calls
	// itself, for logs. In a secured cluster it decides nothing.
	Label    string
	Key      string // its authenticated key (wire.Peer.Key); "" in a plaintext cluster
	Endpoint string // its task socket
	Capacity int    // most tasks in flight, at least 1
	Render   bool
	Survey   bool
	Started  time.Time // its process's incarnation (wire.Hello.Started)
	Joined   time.Time
	LastSeen time.Time // its latest Hello, Heartbeat or answer
	// MaxRequest is the longest one of its requests may take
	// (wire.Hello.MaxRequest).
	MaxRequest time.Duration
	Sec        wire.Security // how its task socket is dialled (Admission.Admit)
}

// Core returns m. A type embedding Member has it, and so is a Handle.
func (m *Member) Core() *Member { return m }

// Handle is a dispatcher's own member type: a pointer to a struct that
// embeds Member, with what the dispatcher keeps of each member besides
// (its sender, its tasks).
type Handle interface {
	comparable
	Core() *Member
}

// Hooks are what a dispatcher does as members come and go.
type Hooks[M Handle] struct {
	// Check refuses, for its own reasons, a Hello that the cluster would
	// admit: a category (the Refused* constants) and why; "" takes it.
	Check func(h wire.Hello) (category, why string)
	// Join makes the dispatcher's member of core: it dials the member's
	// task socket (core.Sec) and says Welcome. An error leaves the member
	// out, refused as unreachable.
	Join func(core Member) (M, error)
	// Leave hands back what m holds, as it leaves for reason (the
	// Leave* constants): its tasks go back to be sent to others. m is
	// still in the table while Leave runs. It reports how many tasks
	// went back.
	Leave func(m M, reason string) (int, error)
}

// Why a member leaves. Append only: operators search logs for them.
const (
	LeaveRestarted   = "restarted"   // a Hello from a new process of it (Started, endpoint or render changed)
	LeaveSilent      = "silent"      // unheard for three heartbeats
	LeaveQuarantined = "quarantined" // its key sent what it was not asked for, or lied (see Quarantine)
)

// Event is what Register made of a Hello or a Heartbeat.
type Event int

const (
	// Refused: not a member (logged and counted: Refusals).
	Refused Event = iota
	// Forging: its sender claimed what was not its own (another key's
	// task socket), and its key is quarantined.
	Forging
	// Joined: a new member (or one whose process restarted, and which
	// left first): the dispatcher's Join hook welcomed it.
	Joined
	// Seen: a member heard again, as it was.
	Seen
	// Resized: a member heard again, with another capacity.
	Resized
)

// Members is one dispatcher's member table: who joined, from the Hellos
// and Heartbeats that Register admits by the cluster's rules
// (Admission), what each is (Member), who is quarantined (Quarantine)
// and who was refused (Refusals). The crawl's dispatcher and the
// survey's each keep one; what they do as members come and go is their
// Hooks.
//
// A member is its key: in a secured cluster its ID is the name the
// authorized keys give its key (or one made from the key), so a Hello
// under another member's name is only a label of its sender's own
// member, and cannot take that member's place nor get its key
// quarantined. In a plaintext cluster, which cannot tell senders apart,
// a member is the name it says.
type Members[M Handle] struct {
	admit   Admission
	log     *slog.Logger
	hooks   Hooks[M]
	quar    *Quarantine
	refused *Refusals
	all     map[string]M
}

// NewMembers returns an empty table admitting by admit, logging to log.
func NewMembers[M Handle](admit Admission, log *slog.Logger, hooks Hooks[M]) *Members[M] {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Members[M]{admit: admit, log: log, hooks: hooks, quar: NewQuarantine(log), refused: NewRefusals(log),
		all: make(map[string]M)}
}

// Register handles a Hello or Heartbeat h from the sender from, at now:
// a member unknown, or known as another process (Started, endpoint or
// render changed), joins (the old one leaves first); a known one is
// heard again. It returns the member, nil when refused or forged. A
// sender that advertises another key's task socket is quarantined.
// Callers refuse a quarantined key's frames before (Quarantined).
func (ms *Members[M]) Register(h wire.Hello, from wire.Peer, now time.Time) (M, Event, error) {
	var none M
	label := Label(h.Supervisor)
	switch {
	case h.Supervisor == "" || h.Endpoint == "":
		ms.refuse(RefusedIncomplete, from, h, "a registration without a name or an endpoint", now)
		return none, Refused, nil
	case len(h.Endpoint) > maxEndpointLen:
		ms.refuse(RefusedIncomplete, from, h, fmt.Sprintf("its endpoint is %d bytes long, over %d", len(h.Endpoint), maxEndpointLen), now)
		return none, Refused, nil
	}
	if ms.hooks.Check != nil {
		if category, why := ms.hooks.Check(h); category != "" {
			ms.refuse(category, from, h, why, now)
			return none, Refused, nil
		}
	}
	sec, err := ms.admit.Admit(h, from)
	if err != nil {
		ms.refuse(RefusedSecurity, from, h, err.Error(), now)
		if errors.Is(err, ErrKeyNotSender) {
			_, err := ms.Forged(from, label, err.Error(), now)
			return none, Forging, err
		}
		return none, Refused, nil
	}
	id := label
	if from.Key != "" {
		id = ms.admit.Name(from.Key)
	}
	capacity := max(h.Capacity, 1)
	if m, ok := ms.all[id]; ok {
		c := m.Core()
		if c.Key == from.Key && c.Started.Equal(h.Started) && c.Endpoint == h.Endpoint && c.Render == h.Render &&
			c.Survey == h.Survey && c.Sec.ServerKey == sec.ServerKey {
			c.LastSeen, c.Label, c.MaxRequest = now, label, h.MaxRequest
			if c.Capacity != capacity {
				c.Capacity = capacity
				return m, Resized, nil
			}
			return m, Seen, nil
		}
		if err := ms.Drop(m, LeaveRestarted); err != nil {
			return none, Refused, err
		}
	}
	core := Member{ID: id, Label: label, Key: from.Key, Endpoint: h.Endpoint, Capacity: capacity, Render: h.Render,
		Survey: h.Survey, Started: h.Started, Joined: now, LastSeen: now, MaxRequest: h.MaxRequest, Sec: sec}
	m, err := ms.hooks.Join(core)
	if err != nil {
		ms.refuse(RefusedUnreachable, from, h, "its task socket cannot be dialled: "+err.Error(), now)
		return none, Refused, nil
	}
	ms.all[id] = m
	args := []any{"supervisor", id, "endpoint", h.Endpoint, "capacity", capacity, "render", h.Render, "members", len(ms.all)}
	if label != id {
		args = append(args, "says", label)
	}
	if from.Key != "" {
		args = append(args, "key", from.Key)
	}
	ms.log.Info("supervisor joined", args...)
	return m, Joined, nil
}

// refuse notes a refused registration (Refusals).
func (ms *Members[M]) refuse(category string, from wire.Peer, h wire.Hello, why string, now time.Time) {
	ms.refused.Note(category, from, h.Supervisor, h.Endpoint, why, now)
}

// Malformed notes a frame from from that did not decode (Refusals): it
// is counted, and logged at most once a minute per sender.
func (ms *Members[M]) Malformed(from wire.Peer, err error, now time.Time) {
	ms.refused.Note(RefusedMalformed, from, "", "", err.Error(), now)
}

// Forged quarantines from's key for why (see Quarantine): it claimed
// what it was not given, in a frame where it called itself label. The
// member it is leaves, so its tasks go to the others. A plaintext
// sender cannot be told apart, and is only logged. fresh reports a key
// newly quarantined.
func (ms *Members[M]) Forged(from wire.Peer, label, why string, now time.Time) (fresh bool, err error) {
	if !ms.quar.Add(from, ms.who(from, label), why, now) {
		return false, nil
	}
	if m, ok := ms.ByKey(from.Key); ok {
		return true, ms.Drop(m, LeaveQuarantined)
	}
	return true, nil
}

// Quarantined reports whether from's frames are refused: its key is
// quarantined. Each such frame should be counted (Refuse).
func (ms *Members[M]) Quarantined(from wire.Peer) bool { return ms.quar.Has(from.Key) }

// Refuse counts one frame of a quarantined key, which called itself
// label.
func (ms *Members[M]) Refuse(from wire.Peer, label string, now time.Time) {
	ms.quar.Add(from, ms.who(from, label), "a frame from a quarantined key", now)
}

// who is the name of the sender of a frame from from that calls itself
// label: its key's name, or in a plaintext cluster the label.
func (ms *Members[M]) who(from wire.Peer, label string) string {
	if from.Key != "" {
		return ms.admit.Name(from.Key)
	}
	return label
}

// Drop makes m leave for reason: the Leave hook hands back what it holds,
// and the table forgets it.
func (ms *Members[M]) Drop(m M, reason string) error {
	c := m.Core()
	if cur, ok := ms.all[c.ID]; !ok || cur != m {
		return nil
	}
	n, err := ms.hooks.Leave(m, reason)
	delete(ms.all, c.ID)
	ms.log.Info("supervisor left", "supervisor", c.ID, "reason", reason, "requeued", n, "members", len(ms.all))
	return err
}

// Expire drops the members unheard for longer than silent (three
// heartbeats), in ID order.
func (ms *Members[M]) Expire(now time.Time, silent time.Duration) error {
	for _, id := range slices.Sorted(maps.Keys(ms.all)) {
		if m := ms.all[id]; now.Sub(m.Core().LastSeen) > silent {
			if err := ms.Drop(m, LeaveSilent); err != nil {
				return err
			}
		}
	}
	return nil
}

// Get is the member id; ok is false when there is none.
func (ms *Members[M]) Get(id string) (M, bool) {
	m, ok := ms.all[id]
	return m, ok
}

// ByKey is the member whose authenticated key is key; ok is false when
// none is (or in a plaintext cluster, where no member has one).
func (ms *Members[M]) ByKey(key string) (M, bool) {
	if key == "" {
		var none M
		return none, false
	}
	if m, ok := ms.all[ms.admit.Name(key)]; ok && m.Core().Key == key {
		return m, true
	}
	var none M
	return none, false
}

// Of is the member that sent a frame from from, calling itself label:
// the member of from's key in a secured cluster, of that name in a
// plaintext one.
func (ms *Members[M]) Of(from wire.Peer, label string) (M, bool) {
	if from.Key != "" {
		return ms.ByKey(from.Key)
	}
	return ms.Get(Label(label))
}

// All is the table, by ID. Callers read it, never change it.
func (ms *Members[M]) All() map[string]M { return ms.all }

// Len is how many members there are.
func (ms *Members[M]) Len() int { return len(ms.all) }

// Name is who the sender of key is (Admission.Name).
func (ms *Members[M]) Name(key string) string { return ms.admit.Name(key) }

// Quarantine is the table's quarantine: the keys refused.
func (ms *Members[M]) Quarantine() *Quarantine { return ms.quar }

// Refusals is the table's refusals: who was refused, bounded.
func (ms *Members[M]) Refusals() *Refusals { return ms.refused }
