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
// pace becomes what the server was seen to answer lately; answers grow them
// back (the window by one per window of answers, the pace by a few per
// cent a second). Time-outs of queries sent before the last cut are the
// same congestion and cut nothing more.
type limiter struct {
	mu       sync.Mutex
	max      float64
	window   float64
	inflight int
	rate     float64   // queries a second; 0: not paced (no time-out yet)
	next     time.Time // earliest start of the next paced query
	cut      time.Time // when the window was last cut
	slow     bool      // slow start: until the second cut
	wake     chan struct{}

	// Answers counted per second, for the pace a cut falls back to.
	bucket    time.Time
	cur, prev int
	cuts      int64
}

// paceStep is how much the pace grows a second, in queries a second,
// once it has been measured.
const paceStep = 5.0

// minRate is the slowest pace a server is ever given: even one that
// answers nothing is asked again now and then.
const minRate = 5.0

func newLimiter(max int) *limiter {
	return &limiter{max: float64(max), window: float64(max), slow: true, wake: make(chan struct{})}
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
	if timedOut {
		if sent.After(l.cut) {
			if l.cuts > 0 {
				l.slow = false
			}
			l.cut = now
			l.cuts++
			l.window = max(1, l.window/2)
			l.rate = max(minRate, 0.9*l.answeredRate(now))
			l.next = now
		}
	} else {
		l.count(now)
		l.window = min(l.max, l.window+1/l.window)
		switch {
		case l.rate == 0:
		case l.slow:
			l.rate++
		default:
			l.rate += paceStep / l.rate
		}
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// count notes one answer at now.
func (l *limiter) count(now time.Time) {
	sec := now.Truncate(time.Second)
	switch {
	case sec.Equal(l.bucket):
	case sec.Sub(l.bucket) == time.Second:
		l.prev, l.cur = l.cur, 0
	default:
		l.prev, l.cur = 0, 0
	}
	l.bucket = sec
	l.cur++
}

// answeredRate is the answers a second of the last second or two.
func (l *limiter) answeredRate(now time.Time) float64 {
	l.count(now)
	l.cur-- // count added one that is no answer
	span := 1 + now.Sub(l.bucket).Seconds()
	return float64(l.prev+l.cur) / span
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
