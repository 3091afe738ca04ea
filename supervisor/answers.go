package supervisor

import (
	"context"
	"slices"
	"sync"
	"time"

	"backfill/wire"
)

// answers keeps the supervisor's recent good answers, by task, so that a
// dispatcher killed after a result reached it and before it committed it
// does not make the page fetched again. Its successor knows the task only
// as queued. So each answer kept is sent again when a dispatcher welcomes
// the supervisor (sent): the restarted one adopts those whose tasks still
// wait, under their old leases, and counts the others late. A task it
// leases again all the same (same task ID and URL, new lease token) is
// answered from here (answer). A failure is not kept: the dispatcher may
// retry it, and the retry deserves a request.
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

// sent returns the unexpired answers, under the leases they were sent
// with, least recently kept or used first.
func (a *answers) sent() []wire.Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	var list []wire.Result
	now := a.now()
	a.kept.each(func(_ string, k keptAnswer) bool {
		if now.Sub(k.at) <= a.ttl {
			list = append(list, k.res)
		}
		return true
	})
	slices.Reverse(list)
	return list
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

// resendAnswers sends the answers kept again, under their own leases, to
// a dispatcher that just welcomed the supervisor: if it is a new process,
// its predecessor may have died before committing them, and it adopts
// those whose tasks it has queued again (see answers). To a dispatcher
// that had them, they are late and only counted. It stops at the first
// answer that cannot be sent at once: the dispatcher is not taking them,
// and their tasks are answered when they come back (answer).
func (s *Supervisor) resendAnswers(ctx context.Context) {
	list := s.answers.sent()
	for i := range list {
		// Counted before the send, so that whoever got the answer finds
		// it counted; taken back if it did not go.
		s.resent.Add(1)
		if err := s.send(ctx, wire.KindResult, fitFrame(&list[i]), sendSlice); err != nil {
			s.resent.Add(-1)
			s.log.Debug("answers not all sent again", "sent", i, "kept", len(list), "error", err)
			return
		}
	}
	if len(list) > 0 {
		s.log.Info("answers sent again to the dispatcher that welcomed us", "answers", len(list))
	}
}
