package resolver

import (
	"context"
	"sync"
	"time"
)

// limiter bounds the queries sent to one server: at most window in flight
// (window ≤ max), and, once the server has dropped queries, no faster than
// rate. Without a pace a window is no bound on a server close by: with an
// answer in a tenth of a millisecond, a window of one is ten thousand
// queries a second, and a busy server drops what it cannot take, each drop
// costing a time-out. So a time-out cuts both: the window halves and the
// pace becomes what the server was seen to answer at best in the last
// second (its busiest tenth of a second, times ten), less a tenth.
// Answers grow them back: the window by one per answer until the first cut
// (slow start) and by one per window of answers after; the pace by one
// query a second per answer until the second cut (the first comes of the
// first burst, which measures the server poorly) and by a twentieth of
// one after, about 5% a second. Time-outs of queries sent before the last
// cut are the same congestion and cut nothing more.
type limiter struct {
	mu       sync.Mutex
	max      float64
	window   float64
	inflight int
	rate     float64   // queries a second; 0: not paced (no time-out yet)
	next     time.Time // earliest start of the next paced query
	cut      time.Time // when the window was last cut
	cuts     int64
	wake     chan struct{}

	// The round-trip time, smoothed, and its variation (RFC 6298), for
	// how long a first attempt waits before it is given up: a server a
	// millisecond away that dropped a query is asked again soon, not
	// after the whole time-out.
	srtt, rttvar time.Duration

	// Answers counted per tenth of a second over the last second, for
	// the pace a cut falls back to.
	tenths [10]tenth
}

type tenth struct {
	n     int   // answers
	epoch int64 // which tenth of a second (Unix time / 100 ms)
}

// initialWindow is the window before any answer: a first burst of
// queries waits for the round trips that tell how long to wait for an
// answer, then the window doubles each round trip.
const initialWindow = 8

// minRate is the slowest pace a server is ever given: even one that
// answers nothing is asked again now and then.
const minRate = 5.0

func newLimiter(max int) *limiter {
	return &limiter{max: float64(max), window: float64(min(max, initialWindow)), wake: make(chan struct{})}
}

// acquire waits for room to send one query and returns when it was sent.
func (l *limiter) acquire(ctx context.Context) (time.Time, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		l.mu.Lock()
		now := time.Now()
		var wait time.Duration = -1
		if float64(l.inflight) < l.window {
			if l.rate == 0 || !now.Before(l.next) {
				l.inflight++
				if l.rate > 0 {
					l.next = maxTime(l.next, now).Add(time.Duration(float64(time.Second) / l.rate))
				}
				l.mu.Unlock()
				return now, nil
			}
			wait = l.next.Sub(now)
		}
		wake := l.wake
		l.mu.Unlock()
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
			return time.Time{}, ctx.Err()
		case <-wake:
		case <-fire:
		}
	}
}

// release ends a query sent at sent; timedOut says the server never
// answered it.
func (l *limiter) release(sent time.Time, timedOut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.inflight--
	switch {
	case timedOut && sent.After(l.cut):
		l.cut = now
		l.cuts++
		l.window = max(1, l.window/2)
		l.rate = max(minRate, 0.9*l.peakRate(now))
		l.next = now
	case timedOut:
	default:
		l.count(now)
		l.sample(now.Sub(sent))
		if l.cuts == 0 {
			l.window = min(l.max, l.window+1)
		} else {
			l.window = min(l.max, l.window+1/l.window)
		}
		switch {
		case l.rate == 0:
		case l.cuts < 2:
			l.rate++
		default:
			l.rate += 0.05
		}
	}
	close(l.wake)
	l.wake = make(chan struct{})
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

// peakRate is the answers a second of the busiest tenth of a second in
// the last second.
func (l *limiter) peakRate(now time.Time) float64 {
	e := now.UnixNano() / int64(100*time.Millisecond)
	peak := 0
	for _, t := range l.tenths {
		if e-t.epoch < int64(len(l.tenths)) {
			peak = max(peak, t.n)
		}
	}
	return float64(peak) * 10
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
func (l *limiter) timeout(attempt, attempts int, limit time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if attempt >= attempts-1 {
		return limit
	}
	rto := initialRTO
	if l.srtt > 0 {
		rto = max(minRTO, l.srtt+4*l.rttvar)
	}
	return min(rto<<attempt, limit)
}

// state reports the window, the pace (0: none) and the queries in flight.
func (l *limiter) state() (window, rate float64, inflight int, cuts int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.window, l.rate, l.inflight, l.cuts
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
