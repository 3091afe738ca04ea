package cluster

import (
	"log/slog"
	"sort"
	"time"

	"backfill/wire"
)

// Refusals of members, by category. Append only: operators search logs
// and summaries for them.
const (
	RefusedMappings    = "mappings"    // its mapping set differs from the dispatcher's
	RefusedSecurity    = "security"    // the cluster's admission rules (Admission.Admit)
	RefusedIncomplete  = "incomplete"  // a Hello without a name or an endpoint, or with one too long
	RefusedUnreachable = "unreachable" // its task socket cannot be dialled
	RefusedMalformed   = "malformed"   // a frame that does not decode
	RefusedNoSurvey    = "no-survey"   // it does not run surveys (a survey's members)
)

const (
	refusalLogEvery     = time.Minute  // how often one sender's refusals are logged again
	maxRefusedKept      = 64           // senders the table keeps, the latest refused
	maxEndpointLen      = 1024         // a task endpoint longer than this is refused
	maxRefusalDetailLen = 4 * MaxLabel // a refusal's reason as kept and logged
)

// RefusedMember is one sender refused for one reason, as Refusals keeps
// it: its latest name and endpoint (labels, cut), when it was first and
// last refused and how often.
type RefusedMember struct {
	Category string    `json:"category"`
	Key      string    `json:"key,omitempty"`
	Address  string    `json:"address,omitempty"`
	Member   string    `json:"member,omitempty"`
	Endpoint string    `json:"endpoint,omitempty"`
	Why      string    `json:"why"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	Count    int64     `json:"count"`

	logged time.Time
	at     int64 // Count when last logged
}

// Refusals keeps the members refused, a bounded table: one entry per
// sender (its key, or its address in a plaintext cluster) and category,
// the maxRefusedKept latest. Each entry is logged at Warn when first
// refused, then at most every refusalLogEvery while it keeps trying, with
// how often it was refused since. Whatever a sender puts in its frames
// (a name of megabytes, a new name each time) costs one entry and one
// line a minute.
type Refusals struct {
	log   *slog.Logger
	m     map[string]*RefusedMember
	count map[string]int64 // by category, every refusal
}

// NewRefusals returns an empty table that logs to log.
func NewRefusals(log *slog.Logger) *Refusals {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Refusals{log: log, m: make(map[string]*RefusedMember), count: make(map[string]int64)}
}

// Note counts one refusal of the sender from, which calls itself member
// and whose task socket is endpoint (both as its frame says; cut here),
// in category for why. It reports whether it logged it.
func (r *Refusals) Note(category string, from wire.Peer, member, endpoint, why string, now time.Time) bool {
	r.count[category]++
	id := category + "\x00" + from.Key
	if from.Key == "" {
		id += "\x00" + from.Address
	}
	e := r.m[id]
	if e == nil {
		if len(r.m) >= maxRefusedKept {
			r.evict()
		}
		e = &RefusedMember{Category: category, Key: from.Key, First: now}
		r.m[id] = e
	}
	e.Address, e.Member, e.Endpoint, e.Why, e.Last = from.Address, Label(member), cutEndpoint(endpoint), cut(why, maxRefusalDetailLen), now
	e.Count++
	if e.Count != 1 && (now.Sub(e.logged) < refusalLogEvery || e.Count == e.at) {
		return false
	}
	e.logged, e.at = now, e.Count
	msg := "supervisor refused: "
	if category == RefusedMalformed {
		msg = "frame refused: "
	}
	r.log.Warn(msg+e.Why, "category", category, "supervisor", e.Member, "endpoint", e.Endpoint,
		"key", from.Key, "address", from.Address, "refused", e.Count, "since", e.First)
	return true
}

// evict drops the entry refused longest ago.
func (r *Refusals) evict() {
	var oldest string
	var at time.Time
	for id, e := range r.m {
		if oldest == "" || e.Last.Before(at) {
			oldest, at = id, e.Last
		}
	}
	delete(r.m, oldest)
}

// Count is how many refusals of category were noted; every category's
// when category is "".
func (r *Refusals) Count(category string) int64 {
	if category != "" {
		return r.count[category]
	}
	var n int64
	for _, c := range r.count {
		n += c
	}
	return n
}

// Counts are the refusals noted by category.
func (r *Refusals) Counts() map[string]int64 {
	out := make(map[string]int64, len(r.count))
	for c, n := range r.count {
		out[c] = n
	}
	return out
}

// List returns the senders kept, the latest refused first.
func (r *Refusals) List() []RefusedMember {
	out := make([]RefusedMember, 0, len(r.m))
	for _, e := range r.m {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Last.After(out[j].Last) })
	return out
}

// cut is s cut to n bytes, as Label cuts names.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n
	for end > 0 && s[end]&0xc0 == 0x80 {
		end--
	}
	return s[:end] + "…"
}

// cutEndpoint is an endpoint as kept for a refusal.
func cutEndpoint(s string) string { return cut(s, 4*MaxLabel) }
