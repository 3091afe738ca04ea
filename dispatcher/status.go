package dispatcher

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"backfill/cluster"
	"backfill/wire"
)

// StatusFile is the name, inside Config.StateDir, of the snapshot a running
// dispatcher rewrites every StatusEvery for `backfill status` to read. A
// file rather than a socket: it needs no port, no keys and no answer from
// a dispatcher that is busy or gone, and what it says last stays readable
// after a crash.
const StatusFile = "status.json"

// StatusEvery is how often Run rewrites the status file.
const StatusEvery = time.Second

// Run states in Status.State.
const (
	StateLoading  = "loading" // Run has not started
	StateRunning  = "running"
	StateFinished = "finished" // Run returned with no work left
	StateStopped  = "stopped"  // Run returned early: cancelled or failed
)

// Status is a snapshot of a dispatcher for operators.
type Status struct {
	Dispatcher string    `json:"dispatcher"`
	Run        string    `json:"run"`
	Endpoint   string    `json:"endpoint"` // "" in process (shownEndpoint)
	State      string    `json:"state"`
	Started    time.Time `json:"started"`
	Updated    time.Time `json:"updated"`

	// Mappings is the digest of the mapping set the crawl runs with
	// (etl.Set.Digest): the report checks mappings given to it against it.
	Mappings string `json:"mappings,omitempty"`

	Records  int `json:"records"`
	Complete int `json:"complete"`
	Partial  int `json:"partial"`

	Queued        int `json:"queued"`         // tasks in the frontier, not yet sent
	InFlight      int `json:"in_flight"`      // tasks leased to supervisors
	WaitingRender int `json:"waiting_render"` // render tasks no member can take

	// The crawl's, over every dispatcher process it took (see totals.go):
	// Restarts is how many processes came before this one.
	Restarts       int              `json:"restarts"`
	Pages          int64            `json:"pages"` // pages fetched and extracted
	PagesPerSec    float64          `json:"pages_per_sec"`
	ElapsedSeconds float64          `json:"elapsed_seconds"` // working time
	Errors         map[string]int64 `json:"errors,omitempty"`
	Expired        int64            `json:"expired"` // leases that ran out and were re-sent
	Late           int64            `json:"late"`    // late results ignored
	// Forged counts the frames refused as forged (see Summary.Forged);
	// Quarantined are the keys that sent them, refused until lifted.
	Forged      int64                 `json:"forged"`
	Quarantined []cluster.Quarantined `json:"quarantined,omitempty"`

	Members []MemberStatus `json:"members"`
	Left    []MemberStatus `json:"left,omitempty"` // members dropped during this Run, latest last
	// Refused are the handshakes the intake refused (a CURVE intake
	// only), by reason and peer, the most recent first.
	Refused []wire.Refusal `json:"refused_peers,omitempty"`

	// For operators (see ledger.go). Robots counts the supervisors'
	// robots.txt requests by outcome. SlowHosts are the
	// hosts slowest to answer (by mean), Backoff the hosts whose requests
	// wait because they are in trouble, both as the live members last
	// reported them. Recent are the latest failures, newest first.
	// Timeline is the crawl's progress over time; only Dispatcher.Status
	// has it, not the status file, which is rewritten every second.
	Robots    map[string]int64   `json:"robots,omitempty"`
	SlowHosts []wire.HostPace    `json:"slow_hosts,omitempty"`
	Backoff   []wire.HostBackoff `json:"backoff,omitempty"`
	Recent    []ErrorNote        `json:"recent_errors,omitempty"`
	// DNS sums the supervisors' name resolution, each resolver (process)
	// once, as last reported.
	DNS      *wire.DNSStats `json:"dns,omitempty"`
	Timeline []Sample       `json:"timeline,omitempty"`
	// Politeness: redirects by outcome, the most requests in flight to
	// one host, requests repeated (see Politeness).
	Politeness
}

// MemberStatus is one supervisor as the dispatcher sees it. Fetched,
// Failed and RSS are the supervisor's own counters from its last
// heartbeat; Rate is its pages (fetched or failed) per second between its
// last heartbeats.
type MemberStatus struct {
	Name     string    `json:"name"`
	Endpoint string    `json:"endpoint"` // "" in process (shownEndpoint)
	Render   bool      `json:"render,omitempty"`
	Capacity int       `json:"capacity"`
	InFlight int       `json:"in_flight"`
	Parked   int       `json:"parked"` // host queues waiting for it to free capacity
	Fetched  int64     `json:"fetched"`
	Failed   int64     `json:"failed"`
	Rendered int64     `json:"rendered,omitempty"`
	Rate     float64   `json:"rate"`
	RSS      uint64    `json:"rss,omitempty"`
	Joined   time.Time `json:"joined"`
	LastSeen time.Time `json:"last_seen"`
	Left     time.Time `json:"left,omitzero"`
	Reason   string    `json:"reason,omitempty"` // why it left
}

// maxLeft bounds Status.Left: a flapping member must not grow the file.
const maxLeft = 32

// beat records a heartbeat's counters on its member and updates its rate.
// The rate is smoothed over heartbeats, so one slow interval does not
// make a member look stalled. Callers hold mu.
func (m *member) beat(h *wire.Heartbeat) {
	m.rendered, m.hosts, m.backoff = h.Rendered, h.Hosts, h.Backoff
	if m.beatAt.IsZero() || !h.At.After(m.beatAt) {
		m.fetched, m.failedN, m.rss, m.beatAt = h.Fetched, h.Failed, h.RSS, h.At
		return
	}
	dt := h.At.Sub(m.beatAt).Seconds()
	done := float64(h.Fetched + h.Failed - m.fetched - m.failedN)
	if done < 0 { // counters restarted with the process
		done = float64(h.Fetched + h.Failed)
	}
	r := done / dt
	if m.rate == 0 {
		m.rate = r
	} else {
		m.rate = 0.5*m.rate + 0.5*r
	}
	m.fetched, m.failedN, m.rss, m.beatAt = h.Fetched, h.Failed, h.RSS, h.At
}

// shownEndpoint is endpoint as the status shows it: "" for an in-process
// one (`backfill run`'s), an address that means nothing outside the
// process.
func shownEndpoint(endpoint string) string {
	if wire.InProcess(endpoint) {
		return ""
	}
	return endpoint
}

func (m *member) status() MemberStatus {
	return MemberStatus{
		Name: m.name, Endpoint: shownEndpoint(m.endpoint), Render: m.render, Capacity: m.capacity,
		InFlight: m.inFlight, Parked: len(m.waiting), Fetched: m.fetched, Failed: m.failedN,
		Rate: m.rate, RSS: m.rss, Joined: m.joined, LastSeen: m.lastSeen, Rendered: m.rendered,
	}
}

// noteLeft keeps a dropped member for the status. Callers hold mu.
func (d *Dispatcher) noteLeft(m *member, reason string, now time.Time) {
	s := m.status()
	s.InFlight, s.Parked, s.Left, s.Reason = 0, 0, now, reason
	d.left = append(d.left, s)
	if len(d.left) > maxLeft {
		d.left = append(d.left[:0], d.left[len(d.left)-maxLeft:]...)
	}
}

// status takes a snapshot. Callers hold mu.
func (d *Dispatcher) status(state string, start, now time.Time) Status {
	s := Status{
		Dispatcher: d.name, Run: d.runID, Endpoint: shownEndpoint(d.recv.Endpoint()), State: state,
		Started: start, Updated: now, Mappings: d.digest,
		Records: d.nRecords, Complete: d.nComplete, Partial: d.nPartial,
		Queued: d.queuedN, InFlight: len(d.w.leased), WaitingRender: d.w.waitingRender(),
		Restarts: int(d.base.starts - 1), Pages: d.total(&d.run.pages), Errors: sumMaps(d.base.errs, d.run.errs),
		Expired: d.total(&d.run.expired), Late: d.total(&d.run.late),
		Forged: d.total(&d.run.forged), Quarantined: d.quar.List(),
		Members: make([]MemberStatus, 0, len(d.members)),
		Left:    append([]MemberStatus(nil), d.left...),
		Refused: d.recv.Refusals(),
	}
	el := d.elapsed()
	s.ElapsedSeconds = el.Seconds()
	if el > 0 {
		s.PagesPerSec = float64(s.Pages) / el.Seconds()
	}
	for _, m := range d.members {
		s.Members = append(s.Members, m.status())
	}
	sort.Slice(s.Members, func(i, j int) bool { return s.Members[i].Name < s.Members[j].Name })
	s.Robots = maps.Clone(d.led.h.Robots)
	s.Recent = d.led.recentErrors()
	s.SlowHosts, s.Backoff = d.memberHosts()
	s.DNS = d.dnsTotal()
	s.Politeness = d.politeness()
	return s
}

// noteDNS keeps a heartbeat's DNS counters, by resolver. Callers hold mu.
func (d *Dispatcher) noteDNS(h *wire.Heartbeat) {
	if h.DNS == nil {
		return
	}
	if d.dns == nil {
		d.dns = make(map[string]wire.DNSStats)
	}
	src := h.DNS.Source
	if src == "" {
		src = h.Supervisor
	}
	d.dns[src] = *h.DNS
}

// dnsTotal sums the resolvers' latest counters; nil when none reported.
// Callers hold mu.
func (d *Dispatcher) dnsTotal() *wire.DNSStats {
	if len(d.dns) == 0 {
		return nil
	}
	var t wire.DNSStats
	for _, s := range d.dns {
		t.Add(s)
	}
	return &t
}

// memberHosts merges the live members' latest accounts: the hosts
// slowest to answer (by mean) and the hosts in back-off, latest to end
// first, statusHosts of each. Callers hold mu.
func (d *Dispatcher) memberHosts() ([]wire.HostPace, []wire.HostBackoff) {
	var slow []wire.HostPace
	var back []wire.HostBackoff
	for _, m := range d.members {
		slow = append(slow, m.hosts...)
		back = append(back, m.backoff...)
	}
	mean := func(p wire.HostPace) float64 { return p.Seconds / float64(max(p.Requests, 1)) }
	slices.SortFunc(slow, func(a, b wire.HostPace) int {
		return cmp.Or(cmp.Compare(mean(b), mean(a)), cmp.Compare(a.Host, b.Host))
	})
	slices.SortFunc(back, func(a, b wire.HostBackoff) int {
		return cmp.Or(b.Until.Compare(a.Until), cmp.Compare(a.Host, b.Host))
	})
	return slow[:min(len(slow), statusHosts)], back[:min(len(back), statusHosts)]
}

// Status is a snapshot of the dispatcher for operators, with the
// timeline: what the status page and `backfill status --from` read while
// the crawl runs. Safe for concurrent use with Load and Run.
func (d *Dispatcher) Status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	state, start := d.runState, d.runBegan
	if state == "" {
		state, start = StateLoading, d.started
	}
	s := d.status(state, start, time.Now())
	s.Timeline = slices.Clone(d.led.h.Timeline)
	return s
}

// writeStatus replaces the status file in one rename, so a reader never
// sees half of it. It runs outside mu: the snapshot is a copy.
func writeStatus(dir string, s Status) error {
	if err := writeJSONFile(dir, StatusFile, s); err != nil {
		return fmt.Errorf("dispatcher: status: %w", err)
	}
	return nil
}

// putStatus writes the status file; a failure is logged once and
// otherwise ignored, as the crawl does not depend on it. Only Run calls it.
func (d *Dispatcher) putStatus(s Status) {
	if err := writeStatus(d.cfg.StateDir, s); err != nil && !d.statusWarn {
		d.statusWarn = true
		d.log.Warn("status file not written", "error", err)
	}
}

// ReadStatus reads the status file of the dispatcher whose state is in dir.
func ReadStatus(dir string) (Status, error) {
	var s Status
	return s, readJSONFile(dir, StatusFile, "status", &s)
}
