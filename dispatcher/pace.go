package dispatcher

import (
	"container/heap"
	"time"

	"backfill/wire"
)

// A host waiting out its delay costs the dispatcher an entry in a
// time-ordered heap, not a lease: its supervisor says with each result
// when the host may take its next request (wire.Result.Ready) and the
// delay it keeps (Delay), and the host's next task is leased only a
// moment (readyLead) before then. So leases, and the supervisors'
// capacity, are spent on requests in flight rather than on tasks waiting
// in a supervisor for their turn, and the crawl's rate is the hosts'
// (hosts with work / their delays), not capacity / delay.
//
// A host with a delay has one task out at a time (the next one's time is
// known only from the last one's result); one whose delay is known to be
// zero may have Config.HostInFlight. A host not heard of yet counts as
// delayed until its first result says.

// readyLead is how long before a host's time its next task is leased:
// enough for the task to reach its supervisor, short enough that it
// waits there no longer than that.
const readyLead = 500 * time.Millisecond

// hostPaceCap bounds the paces kept; past it the hosts with no work in
// the window go, which only costs them their first task's pipelining.
const hostPaceCap = 1 << 16

// pace is what a host's last result said of its rhythm.
type pace struct {
	delay time.Duration // 0: the host asks no delay
	ready time.Time     // when it may take its next request
}

// notePace keeps what a result says of its host's pace. A result that
// says nothing (a supervisor of an earlier build, an answer made without
// a turn) is a host without a delay, as dispatching was before.
func (w *window) notePace(host string, r *wire.Result, now time.Time) {
	w.hostPace[host] = pace{delay: r.Delay, ready: now.Add(r.Ready)}
}

// inFlightLimit is how many tasks of host may be out at once.
func (w *window) inFlightLimit(host string, configured int) int {
	if p, ok := w.hostPace[host]; !ok || p.delay > 0 {
		return 1
	}
	return configured
}

// notBefore is when host's next task may be leased; zero when now.
func (w *window) notBefore(host string, now time.Time) time.Time {
	p, ok := w.hostPace[host]
	if !ok {
		return time.Time{}
	}
	if at := p.ready.Add(-readyLead); at.After(now) {
		return at
	}
	return time.Time{}
}

// parkUntil parks q until at, when releaseDue makes it ready again.
func (w *window) parkUntil(q *hostQueue, at time.Time) {
	q.where = parkTimed
	q.until = at
	heap.Push(&w.timed, q)
}

// releaseDue makes the queues whose time has come ready again, and
// reports when the next one is due (zero: none waits).
func (w *window) releaseDue(now time.Time) time.Time {
	for w.timed.Len() > 0 {
		q := w.timed[0]
		if q.until.After(now) {
			return q.until
		}
		heap.Pop(&w.timed)
		if q.where == parkTimed {
			w.makeReady(q)
		}
	}
	return time.Time{}
}

// prunePaces forgets paces that no longer hold a host back, when more than
// hostPaceCap are kept: those past their time of hosts with nothing in
// the window.
func (w *window) prunePaces(now time.Time) {
	if len(w.hostPace) <= hostPaceCap {
		return
	}
	busy := make(map[string]bool, len(w.hosts))
	for _, q := range w.hosts {
		busy[q.host] = true
	}
	for h, p := range w.hostPace {
		if !busy[h] && !p.ready.After(now) {
			delete(w.hostPace, h)
		}
	}
}

// timedHeap orders timed-parked host queues by their time.
type timedHeap []*hostQueue

func (h timedHeap) Len() int           { return len(h) }
func (h timedHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h timedHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timedHeap) Push(x any)        { *h = append(*h, x.(*hostQueue)) }
func (h *timedHeap) Pop() any {
	old := *h
	q := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return q
}
