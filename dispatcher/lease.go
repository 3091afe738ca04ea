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
	if m := d.members[t.lease.Member]; m != nil {
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

// adopt takes an answer to lease p of an earlier dispatcher process
// (kept in the state: see leasesPut): after a restart every unfinished
// task is queued again, while the supervisors go on answering what they
// held. If the task is still queued (not sent again yet) the answer of the
// key that held it is as good as any, and taking it spares the site a
// second request for the page. The caller checked that the answer is p's
// (cluster.Lease.Answers). The task is leased again under p for the moment
// commitResults takes to release it. nil if not queued.
func (d *Dispatcher) adopt(key int64, p cluster.Lease) *task {
	t := d.w.queued[key]
	if t == nil {
		return nil
	}
	d.w.remove(key)
	d.queuedN--
	delete(d.prior, key)
	d.intake.Answered(p.Token)
	t.lease = p
	if m := d.memberByKey(p.Key); m != nil && p.Key != "" {
		t.lease.Member = m.name
	}
	d.w.leased[key] = t
	d.w.hostInFlight[t.host]++
	if m := d.members[t.lease.Member]; m != nil {
		m.inFlight++
	}
	d.run.adopted++
	return t
}

// requeue puts a task whose lease ended without a result back in the
// window (expired, supervisor gone, send failed).
func (d *Dispatcher) requeue(ctx context.Context, t *task) error {
	d.release(t)
	d.intake.Lost(taskID(t.key), t.lease)
	t.lease = cluster.Lease{}
	// The state still shows the task queued (leases live in memory only).
	d.queuedN++
	d.w.add(t, true)
	return nil
}

// grant is a lease made for the task of key, for leasesPut.
type grant struct {
	key   int64
	lease cluster.Lease
}

// leasesPut writes the leases made since the last commit into the open
// transaction, with the task (urls.lease_token, lease_key): a restarted
// dispatcher takes an answer to one only from the key that held it, under
// its token (loadPriorLeases, adopt). A lease already answered or lost is
// skipped: markDone cleared its row, or its task waits for a new one.
// Callers hold mu.
func (d *Dispatcher) leasesPut(ctx context.Context) error {
	gs := d.grants[:0]
	for _, g := range d.grants {
		if t := d.w.leased[g.key]; t != nil && t.lease.Token == g.lease.Token {
			gs = append(gs, g)
		}
	}
	d.grants = d.grants[:0]
	for _, size := range chunkSizes(len(gs), rowChunk) {
		part := gs[:size]
		gs = gs[size:]
		st, err := d.st.stmtN(ctx, "leasePutN", size, func(n int) string {
			return `UPDATE urls SET lease_token = v.column1, lease_key = v.column2
				FROM (VALUES ` + placeholders(n, "(?, ?, ?)") + `) AS v WHERE urls.key = v.column3`
		})
		if err != nil {
			return err
		}
		args := make([]any, 0, 3*size)
		for _, g := range part {
			args = append(args, g.lease.Token, g.lease.Key, g.key)
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("dispatcher: state leases: %w", err)
		}
	}
	return nil
}

// loadPriorLeases reads the leases an earlier process left on tasks still
// queued: their holders may answer them yet. Each is adoptable (adopt)
// while its task waits, and judged a late answer of its holder after that.
func (d *Dispatcher) loadPriorLeases(ctx context.Context) error {
	rows, err := d.st.conn.QueryContext(ctx, `SELECT key, lease_token, COALESCE(lease_key, '') FROM urls WHERE lease_token != 0 AND state = 0`)
	if err != nil {
		return fmt.Errorf("dispatcher: state leases: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key int64
		var l cluster.Lease
		if err := rows.Scan(&key, &l.Token, &l.Key); err != nil {
			return fmt.Errorf("dispatcher: state leases: %w", err)
		}
		d.prior[key] = l
		d.intake.Lost(taskID(key), l)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: state leases: %w", err)
	}
	return nil
}
