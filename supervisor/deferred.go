package supervisor

import (
	"time"

	"backfill/wire"
)

// A task whose host cannot take it for longer than deferAfter is handed
// back to the dispatcher unfetched (a Result of class wire.ClassDeferred
// with the host's pace), not held until its time. The dispatcher sends a
// host's task only just before the host is ready, as the host's results
// tell it; what it cannot know is a host not heard of yet: its first
// task goes out at once, the supervisor reads robots.txt, and the page
// must then wait the host's delay from there (and the page after a
// host's first, once more, after the host's soft-404 probe). Held, such
// tasks would
// fill the supervisor's capacity with hosts waiting (at 15 s, a slot
// makes two requests in 15 s) and cap a crawl of many new hosts far below
// what the hosts allow; handed back, each waits as an entry of the
// dispatcher's time-ordered queue. A redirect followed on the host is
// never handed back: its chain lives here (redirect.go).
//
// deferAfter is well above the dispatcher's lead on a host's time (half
// a second), so a task sent in time is never handed back.
const deferAfter = 2 * time.Second

// handBack is the deferred answer to the task first on h's queue when h
// may take its next request only at at, more than deferAfter from now;
// nil when the task is to wait here (a short wait, a redirect followed on
// the host, a page held for the soft-404 verdict, or no task).
func (s *Supervisor) handBack(h *host, popped **wire.Task, at, now time.Time) *page {
	if at.Sub(now) <= deferAfter || h.held != nil {
		return nil
	}
	first := s.sched.peek(h)
	if first == nil || s.hops.url(first) != first.URL {
		return nil
	}
	t := s.popInto(h, popped)
	return &page{task: t, res: s.answer(t, wire.ClassDeferred, "its host is not ready: its delay runs")}
}
