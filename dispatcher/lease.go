package dispatcher

import (
	"context"
	"fmt"
	"time"

	"backfill/cluster"
)

// release ends t's lease: it frees its supervisor's and its host's slot.
func (d *Dispatcher) release(t *task) {
	delete(d.w.leased, t.key)
	d.w.hostLast[t.host] = handover{at: time.Now(), member: t.lease.Member}
	if m, ok := d.members.Get(t.lease.Member); ok {
		m.inFlight--
		d.w.wakeMember(m, d.room(m))
	}
	if n := d.w.hostInFlight[t.host] - 1; n > 0 {
		d.w.hostInFlight[t.host] = n
	} else {
		delete(d.w.hostInFlight, t.host)
		delete(d.w.hostHolder, t.host)
	}
	d.w.unparkHost(t.host)
}

// adopt takes an answer to lease p of an earlier dispatcher process, or
// to an earlier lease of this one, from the member that held it (the
// caller checked: cluster.Tokens.Judge said Late): after a restart every
// unfinished task is queued again, while the supervisors go on answering
// what they held, and an expired lease's task is queued again while its
// holder may still answer. If the task is still queued (not sent again
// yet) the holder's answer is as good as any, and taking it spares the
// site a second request for the page. The task is leased again under p
// for the moment commitResults takes to release it. nil if not queued.
func (d *Dispatcher) adopt(key int64, p cluster.Lease) *task {
	t := d.w.queued[key]
	if t == nil {
		return nil
	}
	d.w.remove(key)
	d.queuedN--
	t.lease = p
	if p.Key != "" {
		// Its registered name, if it is back; never a name it wrote.
		t.lease.Member = ""
		if m, ok := d.members.ByKey(p.Key); ok {
			t.lease.Member = m.ID
		}
	}
	d.w.leased[key] = t
	d.w.hostInFlight[t.host]++
	if m, ok := d.members.Get(t.lease.Member); ok {
		m.inFlight++
	}
	d.run.adopted++
	return t
}

// requeue puts a task whose lease ended without a result back in the
// window (expired, supervisor gone, send failed).
func (d *Dispatcher) requeue(ctx context.Context, t *task) error {
	if t.check != nil {
		d.requeueCheck(t)
		return nil
	}
	d.release(t)
	t.lease = cluster.Lease{}
	// The state still shows the task queued (leases live in memory only).
	d.queuedN++
	d.w.add(t, true)
	return nil
}

// Meta keys of the lease tokens' secret (cluster.NewSecret).
const metaTokenSecret = "token_secret"

// setupTokens reads the lease tokens' secret from the state, making it on
// a new state, and sets up this process's tokens. Callers are in resume's
// transaction.
func (d *Dispatcher) setupTokens(ctx context.Context) error {
	var secret [2]int64
	for i := range secret {
		v, err := d.st.meta(ctx, fmt.Sprintf("%s_%d", metaTokenSecret, i))
		if err != nil {
			return err
		}
		secret[i] = v
	}
	if secret == ([2]int64{}) {
		secret = cluster.NewSecret()
		for i, v := range secret {
			if err := d.st.setMeta(ctx, fmt.Sprintf("%s_%d", metaTokenSecret, i), v); err != nil {
				return err
			}
		}
	}
	d.tokens = cluster.NewTokens(secret, d.gen)
	return nil
}

// expire re-queues tasks whose lease ran out, drops silent members and
// bounds what the window and the balancers remember.
func (d *Dispatcher) expire(ctx context.Context, now time.Time) error {
	d.w.pruneHostLast(now)
	d.w.prunePaces(now)
	if max(d.domains.Assigned(), d.renderDomains.Assigned()) > cluster.AssignedCap {
		busy := d.w.busyDomains()
		d.domains.Prune(func(dom string) bool { return busy[dom] })
		d.renderDomains.Prune(func(dom string) bool { return busy[dom] })
	}
	for _, t := range d.w.leased {
		if now.After(t.lease.Deadline) {
			d.run.expired++
			d.log.Debug("lease expired; task re-queued", "url", t.url, "host", t.host, "supervisor", t.lease.Member)
			if err := d.requeue(ctx, t); err != nil {
				return err
			}
		}
	}
	return d.members.Expire(now, 3*d.cfg.Heartbeat)
}
