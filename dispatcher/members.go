package dispatcher

import (
	"context"
	"hash/fnv"
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
	endpoint string
	capacity int
	render   bool
	started  time.Time
	lastSeen time.Time
	inFlight int
	waiting  []*hostQueue // host queues parked because the member is full

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
	s, err := wire.Dial(m.endpoint)
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

// route picks the member that owns domain among the live members (only
// render-capable ones when render is set) by rendezvous hashing: every
// member scores the domain, the highest score wins, so the choice depends
// only on the set of members, and a join or leave moves only the domains
// the changed member wins or owned.
func route(members map[string]*member, domain string, render bool) *member {
	var best *member
	var bestScore uint64
	for _, m := range members {
		if render && !m.render {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(m.name))
		h.Write([]byte{0})
		h.Write([]byte(domain))
		score := mix64(h.Sum64())
		if best == nil || score > bestScore || (score == bestScore && m.name < best.name) {
			best, bestScore = m, score
		}
	}
	return best
}

// mix64 spreads FNV's output over all bits (a finalizer from splitmix64).
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
