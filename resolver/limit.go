package resolver

import (
	"context"
	"slices"
	"sync"
	"time"
)

// limiter bounds the queries sent to one server: at most window in flight
// (window ≤ max), and, once the server has dropped queries, no faster than
// rate. Without a pace a window is no bound on a server close by: with an
// answer in a tenth of a millisecond, a window of one is ten thousand
// queries a second, and a busy server drops what it cannot take, each drop
// costing a time-out.
//
// So a time-out cuts both: the window halves (to no less than minWindow)
// and the pace becomes what the server was seen to answer lately
// (answeredRate; at the first cut, which comes of the first burst, its
// busiest tenth of a second times ten, which the second cut corrects) or
// half the pace it had, whichever is more: after a quiet
// time the answers of the last second say how much was asked, not how
// much the server takes, and the pace remembers it. Time-outs of queries
// sent before the last cut are the same congestion and cut nothing more.
//
// A time-out is congestion only when the server loses more than it does
// at a pace it keeps up with (loss.go): a path that drops queries at
// random drops as many at any pace, and cutting for it only slows the
// crawl to a crawl. Every cut is put to that test: if the queries sent at
// the cut pace are lost about as often as before it, the cut is undone
// and the loss they show is the path's, which later time-outs are judged
// against (and lost queries asked again at once, loss.go).
//
// Answers grow them back: the window by one per answer until the first
// cut (slow start) and by one per window of answers after; the pace by one
// query a second per answer until the second cut (the first comes of the
// first burst, which measures the server poorly) and by a tenth of one
// after, about 10% a second, but never past twice what was answered
// lately (growing unused, it would forget what the server takes).
type limiter struct {
	mu       sync.Mutex
	max      float64
	window   float64
	inflight int
	queue    []*waiter // queries waiting for room, first come first
	timing   bool      // a timer will admit the queue's head when the pace allows
	rate     float64   // queries a second; 0: not paced (no time-out yet)
	next     time.Time // earliest start of the next paced query
	cut      time.Time // when the window was last cut
	cuts     int64

	// The round-trip time, smoothed, and its variation (RFC 6298), for
	// how long a first attempt waits before it is given up: a server a
	// millisecond away that dropped a query is asked again soon, not
	// after the whole time-out.
	srtt, rttvar time.Duration

	// Answers counted per tenth of a second over the last second, for
	// the pace a cut falls back to.
	tenths [10]tenth

	// Queries ended and lost, counted per tenth of a second of their
	// sending over the last three seconds, for the share lost (loss.go).
	sends [30]sendTenth
	loss  lossState // what the path loses at random (loss.go)

	// now and afterFunc are time.Now and time.AfterFunc; a test gives
	// its own clock.
	now       func() time.Time
	afterFunc func(time.Duration, func())
}

type tenth struct {
	n     int   // answers
	epoch int64 // which tenth of a second (Unix time / 100 ms)
}

// initialWindow is the window before any answer: a first burst of
// queries waits for the round trips that tell how long to wait for an
// answer, then the window doubles each round trip.
const initialWindow = 8

// minWindow is the smallest window a cut leaves: the pace, not the
// window, keeps a server that drops what comes too fast from dropping,
// and a window of a few queries is too few for a server whose answers
// are slow to come (loaded, or far).
const minWindow = 8

// minRate is the slowest pace a server is ever given: even one that
// answers nothing is asked again now and then.
const minRate = 5.0

func newLimiter(max int) *limiter {
	return &limiter{max: float64(max), window: float64(min(max, initialWindow)), now: time.Now,
		afterFunc: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// acquire waits for room to send one query and returns when it was sent.
// Waiters are admitted in order, one at a time as room comes (admit), so
// a queue of thousands of names costs no more than the queries sent.
func (l *limiter) acquire(ctx context.Context) (time.Time, error) {
	l.mu.Lock()
	if len(l.queue) == 0 && l.room(l.now()) {
		now := l.take(l.now())
		l.mu.Unlock()
		return now, nil
	}
	w := &waiter{ready: make(chan struct{})}
	l.queue = append(l.queue, w)
	l.admit()
	l.mu.Unlock()
	select {
	case <-w.ready:
		return w.at, nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := slices.Index(l.queue, w); i >= 0 {
		l.queue = slices.Delete(l.queue, i, i+1)
		return time.Time{}, ctx.Err()
	}
	// Admitted as ctx ended: give the room back.
	l.inflight--
	l.admit()
	return time.Time{}, ctx.Err()
}

// waiter is one query waiting for room.
type waiter struct {
	ready chan struct{} // closed when admitted
	at    time.Time     // when
}

// room reports whether a query may start at now. Callers hold mu.
func (l *limiter) room(now time.Time) bool {
	return l.held() < l.window && (l.rate == 0 || !now.Before(l.next))
}

// held is how many of the queries in flight the server holds: on a path
// that loses a share of them at random (loss.go), those lost on the way
// wait out their time-out in flight without loading the server, and a
// window that counted them would slow the questions to the pace of the
// time-outs. Callers hold mu.
func (l *limiter) held() float64 {
	return float64(l.inflight) * (1 - l.loss.floor)
}

// take counts a query started at now. Callers hold mu.
func (l *limiter) take(now time.Time) time.Time {
	l.inflight++
	l.probeSend(now)
	if l.rate > 0 {
		// A timer that fired late does not lose the pace's time: the
		// next query may start where the last one's slot ended, up to
		// paceSlack back.
		l.next = maxTime(l.next, now.Add(-paceSlack)).Add(time.Duration(float64(time.Second) / l.rate))
	}
	return now
}

// paceSlack is how far behind its schedule the pace may catch up: timers
// fire late on a loaded machine, and a pace that restarted from each late
// firing would send fewer queries than it says.
const paceSlack = 20 * time.Millisecond

// admit lets waiters in, first come first, while there is room; when the
// pace alone holds the next one back, a timer comes back for it. Callers
// hold mu.
func (l *limiter) admit() {
	for len(l.queue) > 0 {
		now := l.now()
		if !l.room(now) {
			if l.held() < l.window && !l.timing {
				// Only the pace is in the way: come back when it allows.
				l.timing = true
				l.afterFunc(l.next.Sub(now), func() {
					l.mu.Lock()
					l.timing = false
					l.admit()
					l.mu.Unlock()
				})
			}
			return
		}
		w := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		w.at = l.take(now)
		close(w.ready)
	}
}

// release ends a query sent at sent; timedOut says the server never
// answered it.
func (l *limiter) release(sent time.Time, timedOut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.inflight--
	if !timedOut {
		l.count(now)
	}
	l.tallySend(sent, timedOut)
	l.refine(now)
	l.probeEnd(now, sent, timedOut)
	switch {
	case timedOut && sent.After(l.cut) && !l.loss.probing && l.congested(now):
		l.startProbe()
		l.cut = now
		l.cuts++
		l.window = max(min(l.max, minWindow), l.window/2)
		sum, peak := l.answered(now)
		if l.cuts == 1 {
			// The first burst: only its busiest tenth of a second says
			// anything of the server (the second cut corrects it).
			l.rate = max(minRate, peak*10)
		} else {
			// What the server answered, and so took, was sent
			// 1/(1-floor) times over on a lossy path.
			l.rate = max(minRate, sum/(1-l.loss.floor), peak*10/2, l.rate/2)
		}
		l.next = now
	case timedOut:
	default:
		l.sample(now.Sub(sent))
		if l.cuts == 0 {
			l.window = min(l.max, l.window+1)
		} else {
			l.window = min(l.max, l.window+1/l.window)
		}
		switch {
		case l.rate == 0 || l.rate > 2*l.answeredRate(now):
			// Not paced, or paced far above what the server is asked
			// for: growing would only forget what it takes.
		case l.cuts < 2:
			l.rate++
		default:
			l.rate += 0.1
		}
	}
	l.admit()
}

// count notes one answer at now.
func (l *limiter) count(now time.Time) {
	e := now.UnixNano() / int64(100*time.Millisecond)
	t := &l.tenths[e%int64(len(l.tenths))]
	if t.epoch != e {
		*t = tenth{epoch: e}
	}
	t.n++
}

// answeredRate is what the server was seen to answer a second: the
// answers of the last second, or, when more, half those of its busiest
// tenth of a second times ten. The first is right once queries were sent
// faster than the server answers for a second; the second early on (the
// first burst, or right after a stall), where the busiest tenth also
// holds what the server keeps for bursts.
func (l *limiter) answeredRate(now time.Time) float64 {
	sum, peak := l.answered(now)
	return max(sum, peak*10/2)
}

// answered is the answers of the last second, and of its busiest tenth.
func (l *limiter) answered(now time.Time) (sum, peak float64) {
	e := now.UnixNano() / int64(100*time.Millisecond)
	for _, t := range l.tenths {
		if e-t.epoch < int64(len(l.tenths)) {
			sum += float64(t.n)
			peak = max(peak, float64(t.n))
		}
	}
	return sum, peak
}

// sample takes one round-trip time into the smoothed estimate.
func (l *limiter) sample(rtt time.Duration) {
	if l.srtt == 0 {
		l.srtt, l.rttvar = rtt, rtt/2
		return
	}
	d := l.srtt - rtt
	if d < 0 {
		d = -d
	}
	l.rttvar = (3*l.rttvar + d) / 4
	l.srtt = (7*l.srtt + rtt) / 8
}

// minRTO is the shortest wait for an answer: below it, a server that is
// only slow for a moment would be asked twice.
const minRTO = 200 * time.Millisecond

// initialRTO is the retransmission time-out before any round trip was
// seen (RFC 6298's).
const initialRTO = time.Second

// timeout is how long attempt (0 the first) of attempts waits for its
// answer: the retransmission time-out from the round trips seen, doubled
// with each attempt, and the whole of limit for the last one, so a slow
// server has its full time-out once.
//
// On a path that loses queries at random while the server goes on
// answering, a lost query is no sign of a server in trouble: it is asked
// again after one retransmission time-out (with a lower floor), not a
// doubled one.
func (l *limiter) timeout(attempt, attempts int, limit time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if attempt >= attempts-1 {
		return limit
	}
	rto, lossy := l.rto(l.now())
	if lossy {
		return min(rto, limit)
	}
	return min(rto<<attempt, limit)
}

// rto is the retransmission time-out in force at now, and whether the
// path is lossy with the server answering (loss.go), where it is shorter
// and not doubled. Callers hold mu.
func (l *limiter) rto(now time.Time) (time.Duration, bool) {
	if l.srtt == 0 {
		return initialRTO, false
	}
	floor := minRTO
	lossy := false
	if l.loss.floor > 0 {
		if sum, _ := l.answered(now); sum > 0 {
			floor, lossy = lossyMinRTO, true
		}
	}
	return max(floor, l.srtt+4*l.rttvar), lossy
}

// limiterState is a limiter's state for Stats.
type limiterState struct {
	window, rate      float64 // rate 0: not paced
	inflight, waiting int
	cuts, undone      int64
	loss              float64 // the path's loss (loss.go)
}

func (l *limiter) state() limiterState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return limiterState{l.window, l.rate, l.inflight, len(l.queue), l.cuts, l.loss.undone, l.loss.floor}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
