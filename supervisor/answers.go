package supervisor

import (
	"context"
	"sync"
	"time"

	"backfill/wire"
)

// answers keeps the supervisor's recent good answers, by task, so that a
// task sent again under a new lease is answered without asking its host
// for the page a second time. That happens when the dispatcher is killed
// after a result reached it and before it committed it: the restarted
// dispatcher knows the task only as leased, leases it again (same task ID
// and URL, new lease token), and its answer is here. A failure is not
// kept: the dispatcher may retry it, and the retry deserves a request.
//
// A kept answer serves only a task that asks the same question: the same
// ID, URL, render flag and validators (a conditional request is not a
// plain one). It is kept for a TTL that covers a dispatcher restart, and
// the whole is bounded in entries and in bytes, least recently kept or
// used dropped first. Safe for concurrent use.
type answers struct {
	maxBytes int64
	ttl      time.Duration
	now      func() time.Time // time.Now; tests move it

	mu    sync.Mutex
	kept  *lru[keptAnswer] // by task ID
	bytes int64
}

type keptAnswer struct {
	question wire.Task // what of the task its answer depends on (see question)
	res      wire.Result
	size     int64
	at       time.Time
}

// Bounds of answers: a dispatcher restarts in seconds, so two minutes
// covers the tasks it leases again; the count is the supervisor's
// capacity (about what it answers while a dispatcher restarts), and the
// bytes bound what pages' fields and links may cost at worst.
const (
	answersTTL   = 2 * time.Minute
	answersBytes = 32 << 20
)

func newAnswers(maxN int, maxBytes int64, ttl time.Duration) *answers {
	a := &answers{maxBytes: maxBytes, ttl: ttl, now: time.Now}
	a.kept = newLRU(max(maxN, 1), func(_ string, k keptAnswer) { a.bytes -= k.size })
	return a
}

// keep remembers res as the answer to t, when it is a good one.
func (a *answers) keep(t *wire.Task, res *wire.Result) {
	if res == nil || res.Class != "" || t.ID == "" {
		return
	}
	// The Result's bulk (fields, links, errors) plus its fixed part.
	size := int64(approxSize(res)+len(t.ID)+len(t.ETag)+len(t.LastModified)+len(res.ETag)+len(res.LastModified)) + 256
	if size > a.maxBytes {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.forgetLocked(t.ID)
	a.kept.put(t.ID, keptAnswer{question: question(t), res: *res, size: size, at: a.now()})
	a.bytes += size
	for a.bytes > a.maxBytes {
		id, _, ok := a.kept.oldest()
		if !ok {
			break
		}
		a.forgetLocked(id)
	}
}

// question is what of a task its answer depends on.
func question(t *wire.Task) wire.Task {
	return wire.Task{ID: t.ID, URL: t.URL, Render: t.Render, ETag: t.ETag, LastModified: t.LastModified}
}

// answer returns the kept answer to t, under t's lease, or nil when none
// is kept for the same question or it is older than the TTL.
func (a *answers) answer(t *wire.Task) *wire.Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	k, ok := a.kept.get(t.ID)
	if !ok || k.question != question(t) {
		return nil
	}
	if a.now().Sub(k.at) > a.ttl {
		a.forgetLocked(t.ID)
		return nil
	}
	res := k.res
	res.Lease = t.Lease
	return &res
}

// clear forgets every answer: the run they belong to is over.
func (a *answers) clear() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.kept = newLRU(a.kept.max, a.kept.evicted)
	a.bytes = 0
}

// size is the number of answers kept and their bytes.
func (a *answers) size() (int, int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.kept.len(), a.bytes
}

// forgetLocked drops id's answer. Callers hold mu.
func (a *answers) forgetLocked(id string) {
	if k, ok := a.kept.get(id); ok {
		a.bytes -= k.size
		a.kept.remove(id)
	}
}

// reanswer sends a kept answer again, under the lease of the task that
// asked for it (answer set it).
func (s *Supervisor) reanswer(ctx context.Context, res *wire.Result) {
	s.reanswered.Add(1)
	s.log.Debug("task answered again from the answer already sent", "task", res.TaskID, "url", res.URL)
	s.sendResult(ctx, fitFrame(res))
}
