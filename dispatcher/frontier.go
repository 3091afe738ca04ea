package dispatcher

import (
	"container/heap"
	"crypto/sha256"
	"encoding/binary"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/publicsuffix"

	"backfill/cluster"
)

// windowCap bounds the ready tasks held in memory; the rest of the frontier
// stays in SQLite and is read back in order as the window drains, up to
// refillChunks chunks of refillChunk tasks per step.
const (
	windowCap    = 10000
	refillChunk  = 1024
	refillChunks = 4
)

// cursorKey is a place in the frontier order (see task.before).
type cursorKey struct {
	matched  bool
	priority int
	depth    int
	seq      int64
}

// task is one URL to crawl, in the window (queued) or leased.
type task struct {
	key               int64 // urlKey(url); on the wire as its taskID
	url, host, domain string
	depth             int
	matched           bool
	priority          int
	render            bool
	seq               int64
	hops              int // redirects across hosts that led here (redirect.go)

	// while leased: to whom, under which token, until when
	lease cluster.Lease

	hq   *hostQueue // while queued in the window
	idx  int        // index in hq.tasks
	widx int        // index in window.worst
}

// place is t's place in frontier order.
func (t *task) place() cursorKey {
	return cursorKey{matched: t.matched, priority: t.priority, depth: t.depth, seq: t.seq}
}

// before is the frontier order: pages some mapping matches first (higher
// mapping priority first), then shallower, then first come first served.
func (t *task) before(u *task) bool { return t.place().before(u) }

// before reports that the place c comes before task t in frontier order.
func (c cursorKey) before(t *task) bool {
	if c.matched != t.matched {
		return c.matched
	}
	if c.priority != t.priority {
		return c.priority > t.priority
	}
	if c.depth != t.depth {
		return c.depth < t.depth
	}
	return c.seq < t.seq
}

// A fresh task's seq is its host's count of queued tasks (its rank: 1 for
// the host's first) above a counter that only grows, so that among tasks
// of equal match, priority and depth the frontier goes round-robin over
// hosts — every host's first page, then every host's second — rather
// than host by host in the order their links were found. The window
// (windowCap tasks) then holds pages of many hosts, not the whole queue
// of the few whose index came first, and hosts waiting out a Crawl-delay
// do not starve the others. Tasks queued again (requeue, render) take a
// bare counter, rank 0: they go first.
const (
	seqRankShift   = 40
	seqCounterMask = 1<<seqRankShift - 1
	seqRankMax     = 1<<(62-seqRankShift) - 1
)

func rankedSeq(rank int, counter int64) int64 {
	return int64(min(max(rank, 0), seqRankMax))<<seqRankShift | counter&seqCounterMask
}

// urlKey is the key of a normalized URL in the seen store and the
// frontier: the first 8 bytes of its SHA-256, as an integer (SQLite's
// rowid). At 64 bits two of ten million URLs share a key with a
// probability of about 3·10⁻⁶.
func urlKey(norm string) int64 {
	sum := sha256.Sum256([]byte(norm))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// taskID is a task's id on the wire: its key as 16 hex digits (what
// earlier builds used as ids, so a result of an earlier process's lease
// still names the same task).
func taskID(key int64) string {
	var b [16]byte
	const digits = "0123456789abcdef"
	u := uint64(key)
	for i := 15; i >= 0; i-- {
		b[i] = digits[u&15]
		u >>= 4
	}
	return string(b[:])
}

// parseTaskID is taskID's inverse; ok is false for anything else.
func parseTaskID(id string) (key int64, ok bool) {
	if len(id) != 16 {
		return 0, false
	}
	u, err := strconv.ParseUint(id, 16, 64)
	return int64(u), err == nil
}

// hostDomain returns the lower-case host[:port] that politeness applies to
// and the registrable domain that routing hashes.
func hostDomain(raw string) (host, domain string) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", ""
	}
	host = strings.ToLower(u.Host)
	name := strings.ToLower(u.Hostname())
	if net.ParseIP(name) != nil || !strings.Contains(name, ".") {
		return host, name
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(strings.TrimSuffix(name, "."))
	if err != nil {
		return host, name
	}
	return host, d
}

// hostQueue holds the window's tasks of one host (render and plain tasks of
// a host are kept apart because they may go to different supervisors).
// Dispatching walks host queues in the order of their best task, so one
// host with many tasks cannot hide the others behind its in-flight limit.
type hostQueue struct {
	key    string // render flag + host
	host   string
	domain string
	render bool
	tasks  taskHeap

	where   int       // where the queue is parked, see park*
	readyIx int       // index in the ready heap
	until   time.Time // parkTimed: when its host may take its next task (pace.go)

	routeEpoch int64
	route      string // member name, valid while routeEpoch matches
}

const (
	parkNone   = iota // not in any list
	parkReady         // in the ready heap
	parkHost          // waiting for its host's in-flight to drop
	parkMember        // waiting for its supervisor's capacity
	parkNobody        // no live supervisor can take it
	parkTimed         // its host waits out its delay (pace.go)
)

type taskHeap []*task

func (h taskHeap) Len() int           { return len(h) }
func (h taskHeap) Less(i, j int) bool { return h[i].before(h[j]) }
func (h taskHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}
func (h *taskHeap) Push(x any) {
	t := x.(*task)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.idx = -1
	return t
}

// worstHeap holds every task queued in the window, the last in frontier
// order on top: a full window gives that one up for a better newcomer.
type worstHeap []*task

func (h worstHeap) Len() int           { return len(h) }
func (h worstHeap) Less(i, j int) bool { return h[j].before(h[i]) }
func (h worstHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].widx = i
	h[j].widx = j
}
func (h *worstHeap) Push(x any) {
	t := x.(*task)
	t.widx = len(*h)
	*h = append(*h, t)
}
func (h *worstHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.widx = -1
	return t
}

type readyHeap []*hostQueue

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return h[i].tasks[0].before(h[j].tasks[0]) }
func (h readyHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].readyIx = i
	h[j].readyIx = j
}
func (h *readyHeap) Push(x any) {
	q := x.(*hostQueue)
	q.readyIx = len(*h)
	*h = append(*h, q)
}
func (h *readyHeap) Pop() any {
	old := *h
	q := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	q.readyIx = -1
	return q
}

// window is the in-memory part of the frontier: a bounded set of queued
// tasks grouped by host, and the leased tasks. It is owned by the
// Dispatcher and used under its mutex.
type window struct {
	queued  map[int64]*task // key → task in a host queue
	leased  map[int64]*task // key → task out on lease
	hosts   map[string]*hostQueue
	ready   readyHeap
	spilled bool // SQLite holds queued tasks that are not in the window
	// cursor is where the next refill reads on: every task queued in
	// SQLite up to it (in frontier order) is in the window or leased.
	// nil: from the start. A task that spills before it moves it back.
	cursor *cursorKey

	// worst orders the queued tasks from the last in frontier order: the
	// window keeps the first windowCap tasks of the frontier even when
	// better ones arrive after it filled up (a page's links come host by
	// host; see rankedSeq).
	worst worstHeap

	hostInFlight map[string]int
	hostWait     map[string][]*hostQueue // host → queues parked on its in-flight limit
	// hostPace is each host's delay and next request time, from its last
	// result; timed holds the queues parked until then (pace.go).
	hostPace map[string]pace
	timed    timedHeap
	nobody   []*hostQueue

	// hostHolder is the member a host's in-flight tasks are leased to. A
	// host whose domain moved to another member waits until they are all
	// back, so two supervisors never crawl it at once, and the new owner
	// finds the old one's last request in the host cache.
	hostHolder map[string]string

	// hostLast is, per host, when the dispatcher last got a task of it
	// back (answered, expired or its member gone) and from whom: a request
	// to the host may have ended as late as that. A task sent to another
	// member carries it (wire.Task.HostLast), so politeness moves with the
	// host even between supervisors that share no cache. Entries older
	// than handoverKeep are pruned: every delay has passed by then.
	hostLast map[string]handover
}

// handover is a host's last known request time and the member that made it.
type handover struct {
	at     time.Time
	member string
}

// handoverKeep bounds how long hostLast remembers a host: beyond the
// longest Crawl-delay supervisors honour (60 s by default).
const handoverKeep = 5 * time.Minute

// busyDomains are the domains of the window's queued and leased tasks
// (the balancers keep owners for those).
func (w *window) busyDomains() map[string]bool {
	busy := make(map[string]bool)
	for _, q := range w.hosts {
		busy[q.domain] = true
	}
	for _, t := range w.leased {
		busy[t.domain] = true
	}
	return busy
}

// hostLastCap bounds the hand-over times kept. A crawl answering
// thousands of tasks a second over millions of hosts (most of them
// refused at once) would otherwise keep every host of the last
// handoverKeep; past the cap the oldest half goes. A host whose time is
// forgotten early loses it only if it also changes owner within its
// delay, when its new owner still has the shared host cache's
// last-crawl time.
const hostLastCap = 1 << 16

// pruneHostLast drops the hand-over times no delay can still need, and
// the oldest half when more than hostLastCap are kept.
func (w *window) pruneHostLast(now time.Time) {
	for h, ho := range w.hostLast {
		if now.Sub(ho.at) > handoverKeep {
			delete(w.hostLast, h)
		}
	}
	if len(w.hostLast) <= hostLastCap {
		return
	}
	ages := make([]time.Time, 0, len(w.hostLast))
	for _, ho := range w.hostLast {
		ages = append(ages, ho.at)
	}
	slices.SortFunc(ages, time.Time.Compare)
	cut := ages[len(ages)/2]
	for h, ho := range w.hostLast {
		if ho.at.Before(cut) {
			delete(w.hostLast, h)
		}
	}
}

func newWindow() *window {
	return &window{
		queued:       make(map[int64]*task),
		leased:       make(map[int64]*task),
		hosts:        make(map[string]*hostQueue),
		hostInFlight: make(map[string]int),
		hostHolder:   make(map[string]string),
		hostLast:     make(map[string]handover),
		hostWait:     make(map[string][]*hostQueue),
		hostPace:     make(map[string]pace),
	}
}

// add puts a task in the window (force: even when the window is full, for
// tasks coming back from a lease).
func (w *window) add(t *task, force bool) bool {
	if _, ok := w.queued[t.key]; ok {
		return true
	}
	if _, ok := w.leased[t.key]; ok {
		return true
	}
	if !force && len(w.queued) >= windowCap {
		w.spilled = true
		out := t
		if worst := w.worst[0]; t.before(worst) {
			// t belongs in the window more than its last task does: that
			// one goes back to SQLite only (it is there already).
			out = worst
			w.remove(worst.key)
		}
		if c := w.cursor; c != nil && !c.before(out) {
			// Read it with the next refill: the cursor goes to just
			// before it (seq is unique, so nothing between is skipped).
			k := out.place()
			k.seq--
			w.cursor = &k
		}
		if out == t {
			return false
		}
	}
	key := t.host
	if t.render {
		key = "r|" + t.host
	}
	q := w.hosts[key]
	if q == nil {
		q = &hostQueue{key: key, host: t.host, domain: t.domain, render: t.render, readyIx: -1, routeEpoch: -1}
		w.hosts[key] = q
	}
	t.hq = q
	heap.Push(&q.tasks, t)
	heap.Push(&w.worst, t)
	w.queued[t.key] = t
	switch q.where {
	case parkNone:
		w.makeReady(q)
	case parkReady:
		heap.Fix(&w.ready, q.readyIx)
	}
	return true
}

// remove takes a queued task out of the window (its record completed).
func (w *window) remove(key int64) {
	t := w.queued[key]
	if t == nil {
		return
	}
	delete(w.queued, key)
	heap.Remove(&w.worst, t.widx)
	q := t.hq
	heap.Remove(&q.tasks, t.idx)
	t.hq = nil
	if q.where == parkReady {
		if len(q.tasks) == 0 {
			heap.Remove(&w.ready, q.readyIx)
			q.where = parkNone
		} else {
			heap.Fix(&w.ready, q.readyIx)
		}
	}
	w.forget(q)
}

// reprioritize restores heap order after t's depth changed.
func (w *window) reprioritize(t *task) {
	if t.hq == nil {
		return
	}
	heap.Fix(&t.hq.tasks, t.idx)
	heap.Fix(&w.worst, t.widx)
	if t.hq.where == parkReady {
		heap.Fix(&w.ready, t.hq.readyIx)
	}
}

func (w *window) makeReady(q *hostQueue) {
	if len(q.tasks) == 0 {
		q.where = parkNone
		w.forget(q)
		return
	}
	q.where = parkReady
	heap.Push(&w.ready, q)
}

// forget drops an empty, unparked host queue so the map stays bounded.
func (w *window) forget(q *hostQueue) {
	if len(q.tasks) == 0 && q.where == parkNone {
		delete(w.hosts, q.key)
	}
}

// unparkHost makes the queues waiting on host's in-flight limit ready.
func (w *window) unparkHost(host string) {
	qs := w.hostWait[host]
	delete(w.hostWait, host)
	for _, q := range qs {
		if q.where == parkHost {
			w.makeReady(q)
		}
	}
}

// unparkAll makes every parked queue ready again (membership changed).
func (w *window) unparkAll(members map[string]*member) {
	for host := range w.hostWait {
		w.unparkHost(host)
	}
	for _, q := range w.nobody {
		if q.where == parkNobody {
			w.makeReady(q)
		}
	}
	w.nobody = nil
	for _, m := range members {
		w.unparkMember(m)
	}
}

func (w *window) unparkMember(m *member) {
	qs := m.waiting
	m.waiting = nil
	for _, q := range qs {
		if q.where == parkMember {
			w.makeReady(q)
		}
	}
}

// waitingRender counts queued render tasks no live supervisor can take.
func (w *window) waitingRender() int {
	n := 0
	for _, q := range w.nobody {
		if q.where == parkNobody && q.render {
			n += len(q.tasks)
		}
	}
	return n
}
