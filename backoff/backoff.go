// Package backoff owns how backfill waits between attempts of something
// that failed for want of a peer (a busy SQLite file, a MongoDB server
// that is away, a store that refuses writes, a dispatcher that does not
// answer): a pause that doubles from First up to Max, with jitter, so that
// processes that failed together do not retry together.
//
// It is not politeness: how long a supervisor leaves a failing web host
// alone is the supervisor's own rule (its host health), which follows the
// host's crawl delay and answers, not a jittered timer.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is the pause schedule of one run of attempts. The zero value is
// not usable; make one with New. It is not safe for concurrent use: each
// loop that retries owns its own.
type Backoff struct {
	first, max time.Duration
	step       time.Duration // the pause the next Next centres on
}

// New returns a schedule whose pauses centre on first, then double up to
// max. first <= 0 is taken as a millisecond; max below first as first.
func New(first, max time.Duration) *Backoff {
	if first <= 0 {
		first = time.Millisecond
	}
	if max < first {
		max = first
	}
	return &Backoff{first: first, max: max, step: first}
}

// Next returns the pause before the next attempt and doubles the step for
// the one after. The pause is drawn uniformly from [step/2, step×3/2): on
// average the step, never less than half of it, and never more than one
// and a half times Max.
func (b *Backoff) Next() time.Duration {
	d := b.step
	b.step = min(2*b.step, b.max)
	return d/2 + rand.N(d)
}

// Peek returns the step the next pause centres on, for messages ("retrying
// in about 400ms").
func (b *Backoff) Peek() time.Duration { return b.step }

// Reset starts the schedule again from First, after a success.
func (b *Backoff) Reset() { b.step = b.first }

// Wait sleeps for Next() or until ctx is done, and reports whether the
// full pause passed (false: ctx ended first).
func (b *Backoff) Wait(ctx context.Context) bool {
	return Sleep(ctx, b.Next())
}

// Sleep waits d or until ctx is done, and reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
