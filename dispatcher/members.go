package dispatcher

import (
	"context"
	"sync"
	"time"

	"backfill/wire"
)

// sendTimeout bounds one send to a supervisor. A send that times out is
// reported back to the Run loop, which re-queues the task at once.
const sendTimeout = 5 * time.Second

// member is one registered supervisor.
type member struct {
	name     string
	key      string // its authenticated key (wire.Peer.Key); "" in a plaintext cluster
	endpoint string
	capacity int
	render   bool
	started  time.Time
	lastSeen time.Time
	inFlight int
	waiting  []*hostQueue  // host queues parked because the member is full
	sec      wire.Security // how its task socket is dialled (see memberSecurity)
	// maxRequest is the longest one of its requests may take (its Hello
	// says): its hosts wait it out after its lease (fenceEnd).
	maxRequest time.Duration

	// For the status (see status.go): when it joined, and its own
	// counters from its last heartbeat.
	joined           time.Time
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
	s, err := wire.DialSecure(m.endpoint, m.sec)
	if err != nil {
		return err
	}
	m.sender = s
	ctx, m.cancel = context.WithCancel(ctx)
	m.out = make(chan outFrame, m.capacity+8)
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
// and a request it started just before may take m.maxRequest more. A
// member of an earlier build says nothing of its requests: a minute is
// allowed for them.
func (d *Dispatcher) fenceEnd(m *member) time.Time {
	req := m.maxRequest
	if req <= 0 {
		req = time.Minute
	}
	return m.lastSeen.Add(d.cfg.MemberLease + req)
}

// heldElsewhere notes the hosts a joining member says it has a request in
// flight to (wire.Hello.Busy): after this process started (or the member
// was taken for lost) they may have been routed elsewhere, and another
// member asks them only once that request is surely over. Callers hold
// mu.
func (d *Dispatcher) heldElsewhere(m *member, busy []string, now time.Time) {
	req := m.maxRequest
	if req <= 0 {
		req = time.Minute
	}
	for _, h := range busy[:min(len(busy), maxBusyHosts)] {
		if ho, ok := d.w.hostLast[h]; !ok || ho.at.Before(now.Add(req)) {
			d.w.hostLast[h] = handover{at: now.Add(req), member: m.name}
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
	for _, m := range d.members {
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
	return d.members[b.Route(domain)]
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
	for _, m := range d.members {
		told[m.endpoint] = true
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
		quarantined := d.quar.Has(f.from.Key)
		d.mu.Unlock()
		if quarantined || h.Mappings != d.digest || told[h.Endpoint] {
			continue
		}
		sec, err := d.admit.Admit(h, f.from)
		if err != nil {
			continue
		}
		told[h.Endpoint] = true
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
