package dispatcher

import (
	"container/heap"
	"context"
	"time"

	"backfill/wire"
)

// dispatch leases tasks to members, walking host queues in frontier order.
// A queue that cannot go now is parked where the blocking condition will
// release it: its host's in-flight limit, its supervisor's capacity, or
// the absence of any supervisor that can take it.
func (d *Dispatcher) dispatch(ctx context.Context, now time.Time) error {
	w := d.w
	if d.members.Len() == 0 {
		return nil
	}
	w.releaseDue(now)
	d.dispatchChecks(now) // first: a check waits for its host to be free, which the host's own tasks never leave it
	for w.ready.Len() > 0 || d.wakeMembers() {
		q := heap.Pop(&w.ready).(*hostQueue)
		q.where = parkNone
		if len(q.tasks) == 0 {
			w.forget(q)
			continue
		}
		if w.hostInFlight[q.host] >= w.inFlightLimit(q.host, d.cfg.HostInFlight) || d.checks.hosts[q.host] > 0 {
			// (A host with a re-check waiting lets its requests end
			// first: see dispatchChecks.)
			q.where = parkHost
			w.hostWait[q.host] = append(w.hostWait[q.host], q)
			continue
		}
		if at := w.notBefore(q.host, now); !at.IsZero() {
			w.parkUntil(q, at)
			continue
		}
		if q.routeEpoch != d.epoch {
			q.route, q.routeEpoch = "", d.epoch
			if m := d.route(q.domain, q.render); m != nil {
				q.route = m.ID
			}
		}
		m, _ := d.members.Get(q.route)
		if m == nil {
			q.where = parkNobody
			w.nobody = append(w.nobody, q)
			continue
		}
		if holder, ok := w.hostHolder[q.host]; ok && holder != m.ID {
			// The host changed owner (a member joined or left) while
			// tasks of it are out with the old one: wait for them.
			q.where = parkHost
			w.hostWait[q.host] = append(w.hostWait[q.host], q)
			continue
		}
		if m.inFlight >= d.room(m) || len(m.out) >= cap(m.out) {
			q.where = parkMember
			m.waiting = append(m.waiting, q)
			continue
		}
		t := heap.Pop(&q.tasks).(*task)
		delete(w.queued, t.key)
		heap.Remove(&w.worst, t.widx)
		t.hq = nil
		t.lease = d.tokens.Grant(taskID(t.key), m.ID, m.Key, now.Add(d.cfg.Lease))
		w.leased[t.key] = t
		m.inFlight++
		w.hostInFlight[t.host]++
		w.hostHolder[t.host] = m.ID
		d.queuedN--
		// The lease is not written to the state: it lives in memory, and a
		// restarted dispatcher queues every unfinished task again anyway.
		// In the state the task stays queued until its result is done; its
		// holder's answer is still known by its token (adopt).
		etag, lastMod, err := d.taskValidators(ctx, t)
		if err != nil {
			return err
		}
		wt := wire.Task{ID: taskID(t.key), Lease: t.lease.Token, URL: t.url, Host: t.host, Depth: t.depth, Render: t.render,
			ETag: etag, LastModified: lastMod, Hops: t.hops}
		if ho, ok := w.hostLast[t.host]; ok && ho.member != m.ID {
			wt.HostLast = ho.at // the host moved: hand its last request over
		}
		if !m.enqueue(wire.KindTask, wt) {
			// Cannot happen (only this goroutine fills m.out, and it was
			// checked above); re-queue and end the round rather than spin.
			return d.requeue(ctx, t)
		}
		if len(q.tasks) > 0 {
			w.makeReady(q)
		} else {
			w.forget(q)
		}
	}
	return nil
}

// wakeMembers wakes queues waiting for members with room (wakeMember),
// and reports whether it woke any: a queue woken for a slot may have
// parked elsewhere instead of taking it.
func (d *Dispatcher) wakeMembers() bool {
	woke := false
	for _, m := range d.members.All() {
		if len(m.waiting) > 0 && d.w.wakeMember(m, d.room(m)) {
			woke = true
		}
	}
	return woke
}
