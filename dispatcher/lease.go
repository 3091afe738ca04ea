package dispatcher

import (
	"context"
	"time"

	"backfill/wire"
)

// release ends t's lease: it frees its supervisor's and its host's slot.
func (d *Dispatcher) release(t *task) {
	delete(d.w.leased, t.key)
	d.w.hostLast[t.host] = handover{at: time.Now(), member: t.member}
	if m := d.members[t.member]; m != nil {
		m.inFlight--
		d.w.unparkMember(m)
	}
	if n := d.w.hostInFlight[t.host] - 1; n > 0 {
		d.w.hostInFlight[t.host] = n
	} else {
		delete(d.w.hostInFlight, t.host)
		delete(d.w.hostHolder, t.host)
	}
	d.w.unparkHost(t.host)
}

// adopt takes a result for a lease of an earlier dispatcher process: after
// a restart every unfinished task is queued again, while the supervisors
// go on answering what they held. If the task is still queued (not sent
// again yet) the answer is as good as any, and taking it spares the site a
// second request for the page. The task is leased to the result's sender
// for the moment commitResults takes to release it. nil if not queued.
func (d *Dispatcher) adopt(key int64, r *wire.Result) *task {
	t := d.w.queued[key]
	if t == nil {
		return nil
	}
	d.w.remove(key)
	d.queuedN--
	t.lease, t.member = r.Lease, r.Supervisor
	d.w.leased[key] = t
	d.w.hostInFlight[t.host]++
	if m := d.members[t.member]; m != nil {
		m.inFlight++
	}
	d.run.adopted++
	return t
}

// requeue puts a task whose lease ended without a result back in the
// window (expired, supervisor gone, send failed).
func (d *Dispatcher) requeue(ctx context.Context, t *task) error {
	d.release(t)
	t.lease, t.member, t.deadline = 0, "", time.Time{}
	// The state still shows the task queued (leases live in memory only).
	d.queuedN++
	d.w.add(t, true)
	return nil
}
