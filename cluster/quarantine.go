package cluster

import (
	"log/slog"
	"sort"
	"time"

	"backfill/wire"
)

// quarantineLogEvery is how often one quarantined member is logged again
// while it keeps sending.
const quarantineLogEvery = time.Minute

// Quarantined is a member whose key sent what it was not asked for, or
// whose answers other members' fetches contradicted.
type Quarantined struct {
	Key     string    `json:"key"`
	Address string    `json:"address,omitempty"` // where its latest refused frame came from
	Member  string    `json:"member,omitempty"`  // who it is (its key's name), or the name its frames carried, cut
	Why     string    `json:"why"`               // what it did first
	First   time.Time `json:"first"`
	Last    time.Time `json:"last"`
	Count   int64     `json:"count"` // frames refused since, the first included

	logged time.Time
	at     int64 // Count when last logged
}

// Quarantine holds the quarantined keys. A quarantined key gets no work and
// its frames are refused, until Lift or a new dispatcher process started
// with the key authorized again.
type Quarantine struct {
	log     *slog.Logger
	keys    map[string]*Quarantined
	plain   map[string]*Quarantined // plaintext senders, by address: logged, never quarantined
	refused int64
}

// NewQuarantine returns an empty Quarantine that logs to log.
func NewQuarantine(log *slog.Logger) *Quarantine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Quarantine{log: log, keys: make(map[string]*Quarantined), plain: make(map[string]*Quarantined)}
}

// Add quarantines from's key for why, or counts one more refused frame of
// a key already in. It logs the key and address when the key is first
// quarantined, then at most every quarantineLogEvery while it keeps
// sending. A plaintext sender (no key) cannot be told apart from the
// others on its address: it is logged the same way but not quarantined.
// fresh reports a key newly quarantined.
func (q *Quarantine) Add(from wire.Peer, member, why string, now time.Time) (fresh bool) {
	q.refused++
	table, id := q.keys, from.Key
	if from.Key == "" {
		table, id = q.plain, from.Address
		if len(q.plain) > 256 {
			clear(q.plain) // a bound for the log's rate limit, not a history
		}
	}
	e := table[id]
	if e == nil {
		e = &Quarantined{Key: from.Key, First: now, Why: cut(why, maxRefusalDetailLen)}
		table[id] = e
		fresh = from.Key != ""
	}
	e.Address, e.Last = from.Address, now
	if member != "" {
		e.Member = Label(member)
	}
	e.Count++
	if e.Count == 1 || (now.Sub(e.logged) >= quarantineLogEvery && e.Count != e.at) {
		e.logged, e.at = now, e.Count
		args := []any{"key", from.Key, "address", from.Address, "member", e.Member, "why", cut(why, maxRefusalDetailLen), "refused", e.Count, "since", e.First}
		if from.Key == "" {
			q.log.Error("forged answer refused; a plaintext cluster cannot tell who sent it, so no member is quarantined", args...)
		} else {
			q.log.Error("member quarantined: "+e.Why+"; it gets no more tasks and its frames are refused "+
				"until the dispatcher restarts with its key authorized (take the key out of the authorized keys to keep it out)", args...)
		}
	}
	return fresh
}

// Has reports whether key is quarantined. The empty key (plaintext) never is.
func (q *Quarantine) Has(key string) bool { return key != "" && q.keys[key] != nil }

// Lift takes key out of quarantine; false when it was not in.
func (q *Quarantine) Lift(key string) bool {
	if q.keys[key] == nil {
		return false
	}
	delete(q.keys, key)
	q.log.Warn("member quarantine lifted", "key", key)
	return true
}

// Len is how many keys are quarantined.
func (q *Quarantine) Len() int { return len(q.keys) }

// Refused counts the frames refused as forged or quarantined, plaintext
// ones included.
func (q *Quarantine) Refused() int64 { return q.refused }

// List returns the quarantined members, first quarantined first.
func (q *Quarantine) List() []Quarantined {
	out := make([]Quarantined, 0, len(q.keys))
	for _, e := range q.keys {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].First.Before(out[j].First) })
	return out
}
