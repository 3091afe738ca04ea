package dispatcher

import (
	"context"
	"maps"
	"sync"
	"time"

	"backfill/cluster"
	"backfill/wire"
)

// sendTimeout bounds one send to a supervisor. A send that times out is
// reported back to the Run loop, which re-queues the task at once.
const sendTimeout = 5 * time.Second

// member is one registered supervisor: the cluster's account of it
// (cluster.Member: who it is, its capacity, how it is dialled) and the
// crawl's.
type member struct {
	cluster.Member
	inFlight int
	waiting  []*hostQueue // host queues parked because the member is full
	// delay and workers are its default delay and how many requests it
	// makes at once, as its Hello says (workers 0: it does not say); for
	// the ETA (eta.go).
	delay   time.Duration
	workers int

	// For the status (see status.go): its own counters from its last
	// heartbeat.
	fetched, failedN int64
	rss              uint64
	beatAt           time.Time
	rate             float64
	rendered         int64
	hosts            []wire.HostPace    // its latest account of its busiest, slowest and tightest hosts
	backoff          []wire.HostBackoff // its hosts in back-off at its last heartbeat

	sender *wire.Sender
	out    chan outFrame
	cancel context.CancelFunc
	done   chan struct{}
}

// outFrame is one frame for a member's sender goroutine.
type outFrame struct {
	kind wire.Kind
	v    any
}

// sendFail reports a task frame that could not be sent.
type sendFail struct {
	taskID string
	lease  int64
}

// start dials the member and runs its sender goroutine: the Run loop never
// blocks on a slow or unreachable peer. The goroutine ends when ctx is
// cancelled (the member was dropped or the dispatcher closes).
func (m *member) start(ctx context.Context, wg *sync.WaitGroup, failed chan<- sendFail) error {
	s, err := wire.DialSecure(m.Endpoint, m.Sec)
	if err != nil {
		return err
	}
	m.sender = s
	ctx, m.cancel = context.WithCancel(ctx)
	m.out = make(chan outFrame, m.Capacity+8)
	m.done = make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(m.done)
		defer s.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case f := <-m.out:
				err := s.Send(f.kind, f.v, sendTimeout)
				if err == nil || f.kind != wire.KindTask {
					continue
				}
				t := f.v.(wire.Task)
				select {
				case failed <- sendFail{taskID: t.ID, lease: t.Lease}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return nil
}

// enqueue hands a frame to the sender goroutine without blocking; false
// when its queue is full.
func (m *member) enqueue(kind wire.Kind, v any) bool {
	select {
	case m.out <- outFrame{kind, v}:
		return true
	default:
		return false
	}
}

// stop ends the sender goroutine and waits for it.
func (m *member) stop() {
	if m.cancel != nil {
		m.cancel()
		<-m.done
	}
}

// DefaultMemberLease is Config.MemberLease's default: five default
// heartbeats. A member lost is dropped after three heartbeats unheard;
// its hosts wait its lease and its longest request (the fetch deadline,
// 30 s by default) before another member asks them anything.
const DefaultMemberLease = 10 * time.Second

// fenceEnd is the latest time member m, lost, may still be in a request
// to a host it held: its lease runs out MemberLease after the heartbeat
// last heard (it counts from when it sent that one, which is earlier),
// and a request it started just before may take m.MaxRequest more. A
// member of an earlier build says nothing of its requests: a minute is
// allowed for them.
func (d *Dispatcher) fenceEnd(m *member) time.Time {
	req := m.MaxRequest
	if req <= 0 {
		req = time.Minute
	}
	return m.LastSeen.Add(d.cfg.MemberLease + req)
}

// heldElsewhere notes the hosts a joining member says it has a request in
// flight to (wire.Hello.Busy): after this process started (or the member
// was taken for lost) they may have been routed elsewhere, and another
// member asks them only once that request is surely over. Callers hold
// mu.
func (d *Dispatcher) heldElsewhere(m *member, busy []string, now time.Time) {
	req := m.MaxRequest
	if req <= 0 {
		req = time.Minute
	}
	for _, h := range busy[:min(len(busy), maxBusyHosts)] {
		if ho, ok := d.w.hostLast[h]; !ok || ho.at.Before(now.Add(req)) {
			d.w.hostLast[h] = handover{at: now.Add(req), member: m.ID}
		}
	}
}

// maxBusyHosts bounds the busy hosts taken from one Hello.
const maxBusyHosts = 4096

// byeWait bounds the send of one member's Bye.
const byeWait = 250 * time.Millisecond

// farewell tells every member that the run is finished, with a Bye: a
// supervisor started to exit when done does, the others wait quietly for
// the next run instead of heart-beating at a dispatcher that is gone. The
// sends go straight to each member's socket (safe beside its sender
// goroutine), outside mu.
func (d *Dispatcher) farewell() {
	d.mu.Lock()
	var senders []*wire.Sender
	for _, m := range d.members.All() {
		if m.sender != nil {
			senders = append(senders, m.sender)
		}
	}
	bye := wire.Bye{Dispatcher: d.name, Run: d.runID}
	d.mu.Unlock()
	for _, s := range senders {
		if err := s.Send(wire.KindBye, bye, byeWait); err != nil {
			d.log.Debug("bye not sent", "supervisor", s.Endpoint(), "error", err)
		}
	}
}

// route returns the live member that owns domain: its owner among the
// render-capable members for a render task, among all members otherwise
// (cluster.Balancer); nil while there is none (the task waits). Callers hold mu.
func (d *Dispatcher) route(domain string, render bool) *member {
	b := d.domains
	if render {
		b = d.renderDomains
	}
	m, _ := d.members.Get(b.Route(domain))
	return m
}

// tellLateJoiners answers, until until (or ctx ends), every supervisor
// that says Hello to a finished run, and that the cluster admits, with a
// Bye on its task socket: a supervisor restarted in the run's last moments
// joins after the farewell, and would otherwise wait for a run that is
// over (forever, when it was started to exit when done). Members the
// farewell told already are not told again. It runs on its own goroutine
// while Run ends, reading the frames the intake reader still decodes.
func (d *Dispatcher) tellLateJoiners(ctx context.Context, intake <-chan frame, until time.Time) {
	told := make(map[string]bool)
	d.mu.Lock()
	for _, m := range d.members.All() {
		told[m.Endpoint] = true
	}
	d.mu.Unlock()
	bye := wire.Bye{Dispatcher: d.name, Run: d.runID}
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	for {
		var f frame
		select {
		case f = <-intake:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
		var h wire.Hello
		switch v := f.v.(type) {
		case *wire.Hello:
			h = *v
		case *wire.Heartbeat:
			h = v.Hello
		default:
			continue
		}
		d.mu.Lock()
		quarantined := d.members.Quarantined(f.from)
		d.mu.Unlock()
		if quarantined || h.Mappings != d.digest || told[h.Endpoint] {
			continue
		}
		sec, err := d.admit.Admit(h, f.from)
		if err != nil {
			continue
		}
		told[h.Endpoint] = true
		h.Supervisor = cluster.Label(h.Supervisor)
		s, err := wire.DialSecure(h.Endpoint, sec)
		if err != nil {
			continue
		}
		if err := s.Send(wire.KindBye, bye, byeWait); err != nil {
			d.log.Debug("bye not sent", "supervisor", h.Supervisor, "endpoint", h.Endpoint, "error", err)
		} else {
			d.log.Info("supervisor joined a finished run: told it is over", "supervisor", h.Supervisor, "endpoint", h.Endpoint)
		}
		s.Close()
	}
}

// newMembers is the crawl's member table (cluster.Members): a member
// must run the dispatcher's mappings; joining dials its task socket
// (join) and leaving hands its tasks and hosts back (leave).
func (d *Dispatcher) newMembers() *cluster.Members[*member] {
	return cluster.NewMembers(d.admit, d.log, cluster.Hooks[*member]{
		Check: func(h wire.Hello) (string, string) {
			if h.Mappings != d.digest {
				return cluster.RefusedMappings, "its mappings differ from the dispatcher's (its digest " +
					cluster.Label(h.Mappings) + ", ours " + d.digest + ")"
			}
			return "", ""
		},
		Join:  d.join,
		Leave: d.leave,
	})
}

// join starts a member's sender (see member.start).
func (d *Dispatcher) join(core cluster.Member) (*member, error) {
	m := &member{Member: core}
	if err := m.start(d.ctx, &d.wg, d.failed); err != nil {
		return nil, err
	}
	return m, nil
}

// register handles a Hello or Heartbeat from the sender from
// (cluster.Members.Register): a member new, or of a new process, joins
// and is welcomed; one known is answered, a Hello by its Welcome (lost,
// or it has not connected yet), a Heartbeat by a Renew of its lease. It
// returns the member, nil when refused. Callers hold mu.
func (d *Dispatcher) register(ctx context.Context, h wire.Hello, from wire.Peer, hello bool, now time.Time) (*member, error) {
	m, ev, err := d.members.Register(h, from, now)
	if m != nil {
		m.delay, m.workers = h.DefaultDelay, h.Workers
	}
	switch ev {
	case cluster.Refused:
		d.run.refused++
		return nil, err
	case cluster.Forging:
		d.run.forged++
		return nil, err
	case cluster.Joined:
		d.domains.Join(m.ID, m.Capacity)
		if m.Render {
			d.renderDomains.Join(m.ID, m.Capacity)
		}
		d.lastJoin = now
		d.led.joined++
		if !hello {
			d.joinedByBeat = true
		}
		d.heldElsewhere(m, h.Busy, now)
		d.epoch++
		d.w.unparkAll(d.members.All())
		m.enqueue(wire.KindWelcome, d.welcome(h, m))
		if m.Render {
			return m, d.renderPending(ctx)
		}
		return m, nil
	case cluster.Resized:
		d.domains.Join(m.ID, m.Capacity) // a new weight; nothing moves
		if m.Render {
			d.renderDomains.Join(m.ID, m.Capacity)
		}
		d.w.unparkMember(m)
	}
	if hello {
		m.enqueue(wire.KindWelcome, d.welcome(h, m))
	} else {
		m.enqueue(wire.KindRenew, wire.Renew{Seq: h.Seq, Lease: d.cfg.MemberLease})
	}
	return m, err
}

// welcome is the Welcome that answers h from m, granting it its lease.
func (d *Dispatcher) welcome(h wire.Hello, m *member) wire.Welcome {
	return wire.Welcome{Dispatcher: d.name, Run: d.runID, Seq: h.Seq, Lease: d.cfg.MemberLease, Member: m.ID, Gen: d.gen}
}

// leave hands back what member m held as it leaves for reason: its
// domains go to the others, its tasks back to the queue, and its hosts
// wait out its lease and longest request (fenceEnd) before another
// member asks them anything. Callers hold mu.
func (d *Dispatcher) leave(m *member, reason string) (int, error) {
	m.stop()
	d.noteLeft(m, reason, time.Now())
	d.led.lost[reason]++
	d.domains.Leave(m.ID)
	d.renderDomains.Leave(m.ID)
	d.epoch++
	n := 0
	fenced := d.fenceEnd(m)
	for _, t := range maps.Clone(d.w.leased) {
		if t.lease.Member == m.ID {
			if err := d.requeue(context.Background(), t); err != nil {
				return n, err
			}
			d.w.hostLast[t.host] = handover{at: fenced, member: m.ID}
			n++
		}
	}
	d.w.unparkMember(m)
	d.w.unparkAll(d.members.All())
	return n, nil
}
