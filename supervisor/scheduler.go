package supervisor

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	"backfill/fetch"
	"backfill/wire"
)

// errFull is returned by scheduler.add when Capacity tasks are already held.
var errFull = errors.New("supervisor: at capacity")

// errStopped is returned once the scheduler has been stopped.
var errStopped = errors.New("supervisor: stopped")

// host is one politeness unit: everything queued for one lower-case
// host[:port]. The scheduler hands a host to at most one worker at a time;
// the fields under "owned by the holder" are touched only by that worker, and
// the scheduler's mutex orders one holder's writes before the next one's
// reads.
type host struct {
	name string

	// Guarded by scheduler.mu.
	tasks []*wire.Task // FIFO
	subs  []*subReq    // FIFO; requests of pages being rendered, served before tasks (subrequest.go)
	busy  bool         // held by a worker
	// resolving: the host's name is being looked up (names.go); it
	// joins the ready heap when the answer is in, so no worker waits on
	// DNS.
	resolving bool
	ready     time.Time // earliest time the next turn may start
	index     int       // position in the ready heap; -1 when not in it
	seq       uint64    // push order, breaks ties between equal ready times

	// Owned by the holder.
	robots *robotsRules // nil until loaded from the cache or fetched
	// robotsHop: the robots.txt request was redirected on the host; the
	// next robots.txt request goes to the chain's last URL.
	robotsHop *fetch.Chain
	last      time.Time // end of the latest request to the host known here
	// inherited: last came from the shared cache, written by another
	// supervisor (or an earlier run) and possibly behind; see nextStart.
	inherited bool
	// probeDue: a page of the host was requested before its soft-404
	// verdict was known; its next turn makes the probe (soft404.go).
	probeDue bool
	// held: the host's first page, fetched before the probe and reading
	// like a not-found, waiting for the verdict; its task is still
	// queued, first.
	held *page
}

// scheduler queues tasks per host and hands out hosts in order of readiness.
// A host is in the ready heap exactly when it is not held by a worker and has
// tasks or subrequests; its key is the time its politeness delay ends. Workers take the
// earliest host whose time has come, so one slow or delayed host never holds
// up the others, and the number of workers bounds concurrent fetches.
//
// A host with nothing queued and no worker is idle: it stays, so its robots
// rules and last request are at hand when tasks come back, but at most
// maxIdle of them do; past that the least recently released is forgotten
// (see forget). Hosts with work are bounded by capacity, so the map holds
// at most capacity + maxIdle hosts.
type scheduler struct {
	mu       sync.Mutex
	hosts    map[string]*host
	ready    hostHeap
	held     int // tasks queued or being processed; at most capacity
	capacity int
	seq      uint64
	stopped  bool
	wake     chan struct{}  // closed and replaced whenever waiters should look again
	idle     *lru[struct{}] // idle hosts by name, least recently released last
	names    nameWait       // nil: hosts need no look-up before their turn
	// heldBytes: bodies of first pages held for their host's soft-404
	// probe (host.held), at most soft404HoldTotal.
	heldBytes int
}

// nameWait is what the scheduler asks of name resolution: whether a
// host's name must be looked up before a worker may take it, and to start
// that look-up, which calls resolved when it ends.
type nameWait interface {
	needs(hostName string) bool
	start(hostName string)
}

func newScheduler(capacity, maxIdle int) *scheduler {
	s := &scheduler{
		hosts:    make(map[string]*host),
		capacity: capacity,
		wake:     make(chan struct{}),
	}
	s.idle = newLRU(maxIdle, s.forget)
	return s
}

// forget drops an idle host the idle list let go. This is safe at any
// time, even within the host's delay: the end of its last request is in
// the host cache, or on its way there (Supervisor.pendingLastCrawl), and
// so are its robots rules (but those of a host that could not be reached
// at all, which is asked again); a host that comes back reads them on its
// first turn, like a host never seen. Its trouble (back-off,
// blacklisting) is the health registry's, not the scheduler's. Callers
// hold mu.
func (s *scheduler) forget(name string, _ struct{}) {
	if h := s.hosts[name]; h != nil && h.held != nil {
		s.heldBytes -= len(h.held.resp.Body)
	}
	delete(s.hosts, name)
}

// hold keeps p on h, its holder's host, as the page held for the host's
// soft-404 probe, if its body fits within soft404HoldTotal with the
// others held, and reports whether it did.
func (s *scheduler) hold(h *host, p *page) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.heldBytes+len(p.resp.Body) > soft404HoldTotal {
		return false
	}
	s.heldBytes += len(p.resp.Body)
	h.held = p
	return true
}

// unhold lets go of the page held on h (hold), called by h's holder.
func (s *scheduler) unhold(h *host) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heldBytes -= len(h.held.resp.Body)
	h.held = nil
}

// hostLocked returns the host called name, made if new, and no longer
// idle. Callers hold mu.
func (s *scheduler) hostLocked(name string) *host {
	h := s.hosts[name]
	if h == nil {
		h = &host{name: name, index: -1}
		s.hosts[name] = h
		return h
	}
	s.idle.remove(name)
	return h
}

// notify wakes every waiting worker. Callers hold mu. Waking all of them is
// cheap (there are only Workers of them) and avoids lost wake-ups.
func (s *scheduler) notify() {
	close(s.wake)
	s.wake = make(chan struct{})
}

// add queues t under hostName. A task whose ID is already queued (a lease
// that expired and was re-sent) replaces the queued one instead of being
// fetched twice, and reports replaced.
func (s *scheduler) add(hostName string, t *wire.Task) (replaced bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false, errStopped
	}
	h := s.hosts[hostName]
	if h != nil {
		for i, q := range h.tasks {
			if q.ID == t.ID {
				h.tasks[i] = t
				return true, nil
			}
		}
	}
	if s.held >= s.capacity {
		return false, errFull
	}
	h = s.hostLocked(hostName)
	h.tasks = append(h.tasks, t)
	s.held++
	if !h.busy && h.index < 0 {
		s.wantTurn(h)
	}
	return false, nil
}

// wantTurn puts a host with work that is neither held nor in line in line
// for a worker: into the ready heap, or first into a look-up of its name
// when that is not at hand. Callers hold mu.
func (s *scheduler) wantTurn(h *host) {
	if h.resolving {
		return
	}
	if s.names != nil && s.names.needs(h.name) {
		h.resolving = true
		s.names.start(h.name)
		return
	}
	s.push(h)
	s.notify()
}

// resolved ends the look-up of hostName's name: the host joins the ready
// heap if it has work. Its answer, good or bad, is in the resolver's
// cache, where the worker's fetch finds it.
func (s *scheduler) resolved(hostName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hosts[hostName]
	if h == nil || !h.resolving {
		return
	}
	h.resolving = false
	if s.stopped || h.busy || h.index >= 0 || (len(h.tasks) == 0 && len(h.subs) == 0) {
		return
	}
	s.push(h)
	s.notify()
}

// push puts h in the ready heap. Callers hold mu.
func (s *scheduler) push(h *host) {
	s.seq++
	h.seq = s.seq
	heap.Push(&s.ready, h)
}

// take blocks until a host is ready and hands it to the caller, who must
// give it back with release. It fails when ctx is done or the scheduler
// stopped.
func (s *scheduler) take(ctx context.Context) (*host, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			return nil, errStopped
		}
		var wait time.Duration = -1
		if len(s.ready) > 0 {
			top := s.ready[0]
			wait = time.Until(top.ready)
			if wait <= 0 {
				heap.Pop(&s.ready)
				top.busy = true
				s.mu.Unlock()
				return top, nil
			}
		}
		wake := s.wake
		s.mu.Unlock()

		var fire <-chan time.Time
		if wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		case <-fire:
		}
	}
}

// peek returns the first queued task of a held host, or nil.
func (s *scheduler) peek(h *host) *wire.Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(h.tasks) == 0 {
		return nil
	}
	return h.tasks[0]
}

// pop removes and returns the first queued task of a held host, or nil. The
// task still counts against capacity until done is called for it.
func (s *scheduler) pop(h *host) *wire.Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(h.tasks) == 0 {
		return nil
	}
	t := h.tasks[0]
	h.tasks[0] = nil
	h.tasks = h.tasks[1:]
	if len(h.tasks) == 0 {
		h.tasks = nil // let the backing array go
	}
	return t
}

// done releases the capacity a popped task held.
func (s *scheduler) done() {
	s.mu.Lock()
	s.held--
	s.mu.Unlock()
}

// release gives a held host back; its next turn starts no earlier than
// ready. A host without tasks leaves the heap and becomes idle.
func (s *scheduler) release(h *host, ready time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h.busy = false
	h.ready = ready
	if s.stopped {
		return
	}
	if len(h.tasks) > 0 || len(h.subs) > 0 {
		s.wantTurn(h)
		return
	}
	s.idle.put(h.name, struct{}{})
}

// stop wakes every waiter and refuses further work; queued tasks are
// dropped (their leases bring them back to another attempt).
func (s *scheduler) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	s.notify()
}

// abandon drops every queued task (not those being processed) and gives
// their capacity back: the member lost its hold on its hosts (fence.go).
// The hosts stay, with their rules and times.
func (s *scheduler) abandon() []*wire.Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*wire.Task
	for _, h := range s.hosts {
		out = append(out, h.tasks...)
		s.held -= len(h.tasks)
		h.tasks = nil
		if h.held != nil && !h.busy {
			// No holder to see that its task is gone (a busy host's
			// holder lets go of it on the next turn).
			s.heldBytes -= len(h.held.resp.Body)
			h.held = nil
		}
	}
	return out
}

// counts reports tasks held (queued or in progress) and hosts known.
func (s *scheduler) counts() (held, hosts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held, len(s.hosts)
}

// states counts the hosts with tasks: ready for a turn now, waiting for
// their delay (or a back-off) to end or for their name's look-up, and held
// by a worker.
func (s *scheduler) states(now time.Time) (ready, waiting, busy int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.ready {
		if h.ready.After(now) {
			waiting++
		} else {
			ready++
		}
	}
	for _, h := range s.hosts {
		switch {
		case h.busy:
			busy++
		case h.resolving:
			waiting++
		}
	}
	return ready, waiting, busy
}

// hostHeap orders hosts by ready time, then by push order.
type hostHeap []*host

func (q hostHeap) Len() int { return len(q) }
func (q hostHeap) Less(i, j int) bool {
	if !q[i].ready.Equal(q[j].ready) {
		return q[i].ready.Before(q[j].ready)
	}
	return q[i].seq < q[j].seq
}
func (q hostHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}
func (q *hostHeap) Push(x any) {
	h := x.(*host)
	h.index = len(*q)
	*q = append(*q, h)
}
func (q *hostHeap) Pop() any {
	old := *q
	n := len(old)
	h := old[n-1]
	old[n-1] = nil
	h.index = -1
	*q = old[:n-1]
	return h
}
