package supervisor

import (
	"sync"
	"time"

	"backfill/seconds"
)

// A member holds the hosts the dispatcher routes to it only while the
// dispatcher hears from it. Every Hello and Heartbeat is numbered
// (wire.Hello.Seq) and the time it was sent kept; a Welcome or Renew
// that answers one grants a lease from that time (wire.Renew). A member
// cut off from the dispatcher (its packets dropped either way, the
// dispatcher gone) stops starting requests once half its lease has run
// out unrenewed, and when the lease ends drops the tasks it holds: by
// then the dispatcher has taken it for lost and may, once the lease and
// the longest request are over, give its hosts to another member. When
// the dispatcher answers again the member takes up its work where it
// stopped, with whatever tasks the dispatcher sends it anew.
//
// The lease is counted on this machine's clock from a time this machine
// noted, and the dispatcher counts its own from when it heard the
// heartbeat, which is later: no clock is compared across machines.
//
// A dispatcher that grants no lease (Lease 0: a survey's, or one of an
// earlier build) fences nothing.

// fenceRecheck is how soon a worker looks at a host again while the
// member is not allowed to start requests.
const fenceRecheck = 100 * time.Millisecond

// fenceSent is how many sent Hellos and Heartbeats are remembered for
// their answers; one answered later than that many beats is too old to
// renew anything anyway.
const fenceSent = 64

type fenceState int

const (
	fenceOpen    fenceState = iota // renewed in time: requests may start
	fencePaused                    // half the lease gone unrenewed: no new request
	fenceExpired                   // the lease is over: the tasks held were dropped
)

// fence keeps the member's lease. Safe for concurrent use.
type fence struct {
	mu    sync.Mutex
	seq   uint64
	sent  [fenceSent]fenceSend
	lease time.Duration // 0: no lease granted, nothing fenced
	until time.Time     // the lease's end
	state fenceState
}

type fenceSend struct {
	seq uint64
	at  time.Time
}

// sending numbers a Hello or Heartbeat about to be sent and notes when.
func (f *fence) sending(now time.Time) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	f.sent[f.seq%fenceSent] = fenceSend{seq: f.seq, at: now}
	return f.seq
}

// grant takes a Welcome's or Renew's lease for the message numbered seq.
// It reports the state the member was in before, so that the caller can
// say it resumes.
func (f *fence) grant(seq uint64, lease time.Duration) (was fenceState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	was = f.state
	if lease <= 0 {
		f.lease, f.state = 0, fenceOpen
		return was
	}
	s := f.sent[seq%fenceSent]
	if s.seq != seq || seq == 0 {
		return was // unknown, or so old it was forgotten: renews nothing
	}
	f.lease = lease
	if end := s.at.Add(lease); end.After(f.until) {
		f.until = end
	}
	if time.Now().Before(f.pauseAt()) {
		f.state = fenceOpen
	}
	return was
}

// pauseAt is when requests stop without a renewal: half the lease before
// its end. Callers hold mu.
func (f *fence) pauseAt() time.Time { return f.until.Add(-f.lease / 2) }

// hold reports how long a request that would start now must wait: 0 when
// it may start (no lease granted, or renewed in time).
func (f *fence) hold(now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lease == 0 || now.Before(f.pauseAt()) {
		return 0
	}
	return fenceRecheck
}

// advance moves the state on as time passes and reports a change: to
// paused (no new request) or expired (the lease is over: the caller drops
// what it holds).
func (f *fence) advance(now time.Time) (fenceState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := f.state
	switch {
	case f.lease == 0:
		next = fenceOpen
	case !now.Before(f.until):
		next = fenceExpired
	case !now.Before(f.pauseAt()):
		next = fencePaused
	}
	changed := next != f.state && next != fenceOpen
	f.state = next
	return next, changed
}

// unheard is how long ago the latest renewed message was sent, for logs.
func (f *fence) unheard(now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lease == 0 {
		return 0
	}
	return now.Sub(f.until.Add(-f.lease))
}

// renewed takes a Welcome's or Renew's lease, and says so when requests
// resume after a cut.
func (s *Supervisor) renewed(seq uint64, lease time.Duration) {
	now := time.Now()
	unheard := s.fence.unheard(now)
	if was := s.fence.grant(seq, lease); was != fenceOpen && s.fence.hold(now) == 0 {
		s.log.Warn("the dispatcher answers again; requests resume", "dispatcher", s.cfg.Dispatcher,
			seconds.Attr("unheard", unheard))
	}
}

// fenceCheck moves the lease on: it says when requests stop for want of
// a renewal, and at the lease's end drops the tasks held (the dispatcher
// gives them, and the hosts, to another member).
func (s *Supervisor) fenceCheck(now time.Time) {
	state, changed := s.fence.advance(now)
	if !changed {
		return
	}
	unheard := s.fence.unheard(now)
	switch state {
	case fencePaused:
		s.log.Warn("cut off from the dispatcher: no new request to the hosts held until it answers",
			"dispatcher", s.cfg.Dispatcher, seconds.Attr("unheard", unheard))
	case fenceExpired:
		dropped := s.sched.abandon()
		for _, t := range dropped {
			s.hops.forget(t.ID)
			s.health.settled(t.ID)
		}
		s.abandoned.Add(int64(len(dropped)))
		s.log.Warn("lease on the hosts held is over: their tasks are dropped for another member to take",
			"dispatcher", s.cfg.Dispatcher, seconds.Attr("unheard", unheard), "tasks", len(dropped))
	}
}

// newDispatcher notes the dispatcher process that welcomed the member
// (wire.Welcome.Gen). Welcomed by a new one, the member drops the tasks
// the old one gave it that it has not started: the new one sends every
// unfinished task again, maybe to another member, and a task left here
// would have two members ask its host. Its answers sent lately stay kept
// (answers.go): a task sent again here is answered without a request.
func (s *Supervisor) newDispatcher(gen int64) {
	if gen == 0 {
		return
	}
	old := s.dispatcherGen.Swap(gen)
	if old == 0 || old == gen {
		return
	}
	dropped := s.sched.abandon()
	for _, t := range dropped {
		s.hops.forget(t.ID)
		s.health.settled(t.ID)
	}
	s.abandoned.Add(int64(len(dropped)))
	if len(dropped) > 0 {
		s.log.Info("a new dispatcher process: the tasks of the old one not started are dropped; it sends them again",
			"dispatcher", s.cfg.Dispatcher, "tasks", len(dropped))
	}
}
