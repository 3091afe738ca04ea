package dispatcher

import (
	"backfill/backoff"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"backfill/seconds"
	"backfill/store"
)

// The outbox keeps the values found for records durably in the state until
// the store acknowledges them, so that a store outage (a MongoDB that is
// restarting, a network that drops) delays the results but loses none and
// never stops the crawl.
//
// flush writes each changed value into the outbox table, in the same state
// transaction as the record's own state, and kicks the outbox goroutine.
// The goroutine (owned by Run: started when Run starts, drained and stopped
// before it returns) pushes the oldest pending values to the store with
// Store.SetFields, a record at a time, and deletes each row the store
// acknowledged, but only if it still holds the value pushed: a newer value
// written meanwhile has a newer gen and stays to be pushed. A failed push
// is retried with back-off. A record the store does not have
// (store.ErrNotFound: the state and the store belong to different crawls)
// is marked refused and not retried until the next start, so it cannot hold
// up the others.
//
// The goroutine uses the state's one connection under the Dispatcher's
// mutex, as everything else does; its deletes may join the Run loop's open
// transaction and commit with it. A push may thus reach the store before
// the state transaction that wrote the value commits; if that transaction
// is rolled back instead, the value comes back when its result is applied
// again, and SetFields is idempotent.
//
// When Run ends, it waits up to Config.StoreDrainTimeout for the outbox to
// empty. What is left stays in state.db and is pushed when a Run starts
// again; Summary.StorePending says how many values that is.

const (
	// outboxBatch is how many rows one pass of the goroutine reads.
	outboxBatch = 256
	// Back-off between failed pushes: doubling from the first to the
	// longest pause. The store retries on its own first (see
	// store.Options.RetryFor); this paces the attempts beyond that.
	outboxBackoffFirst = 100 * time.Millisecond
	outboxBackoffMax   = 10 * time.Second
	// DefaultStoreDrainTimeout is how long Run waits for the outbox to
	// empty when Config.StoreDrainTimeout is zero.
	DefaultStoreDrainTimeout = 2 * time.Minute
	// outboxPace is the least time between two passes that found less
	// than a full batch, until Run drains the outbox: values found close
	// together go to the store in one write, however they trickle in.
	outboxPace = 250 * time.Millisecond
)

// outbox is the goroutine's side. kick and pass are of size one: a kick
// says there may be rows to push, a pass that the goroutine finished one
// pass over them (drain waits on it).
type outbox struct {
	kick chan struct{}
	pass chan struct{}
	// hurry is closed when Run drains the outbox: passes no longer wait
	// for outboxPace.
	hurry chan struct{}
	gen   int64 // last gen written; guarded by Dispatcher.mu

	written, retried, refused atomic.Int64

	// seconds is how long each push took, for operators.
	seconds prometheus.Histogram
}

// setupOutbox makes
// the rows a previous process left (refused ones included: the store may
// have the records now) pending again. Called by New.
func (d *Dispatcher) setupOutbox(ctx context.Context) error {
	s := d.st
	if _, err := s.conn.ExecContext(ctx, `UPDATE outbox SET refused = 0 WHERE refused = 1`); err != nil {
		return fmt.Errorf("dispatcher: state outbox: %w", err)
	}
	gen, err := s.scalar(ctx, `SELECT MAX(gen) FROM outbox`)
	if err != nil {
		return err
	}
	d.ob = &outbox{kick: make(chan struct{}, 1), pass: make(chan struct{}, 1), gen: gen,
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "backfill_store_write_duration_seconds",
			Help:    "Time one push to the results store took (one record's values, or a whole pass's in one write where the store takes batches), failed ones included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14), // 1ms … 8s
		})}
	if n, err := s.scalar(ctx, `SELECT COUNT(*) FROM outbox`); err == nil && n > 0 {
		d.log.Info("store writes left by an earlier run will be pushed", "pending", n)
	}
	return nil
}

// outboxRow is one value of a record on its way into the outbox.
type outboxRow struct {
	id string // the record's id
	v  store.Value
}

// enqueue writes values into the outbox in the order given (their gen
// numbers follow it), rowChunk rows a statement. Callers hold mu, inside
// the state transaction.
func (d *Dispatcher) enqueue(ctx context.Context, rows []outboxRow) error {
	for _, size := range chunkSizes(len(rows), rowChunk) {
		part := rows[:size]
		rows = rows[size:]
		st, err := d.st.stmtN(ctx, "obPutN", size, func(n int) string {
			return `INSERT INTO outbox(record_id, field, value, gen) VALUES ` + placeholders(n, "(?, ?, ?, ?)") + `
				ON CONFLICT(record_id, field) DO UPDATE SET value = excluded.value, gen = excluded.gen, refused = 0`
		})
		if err != nil {
			return err
		}
		args := make([]any, 0, 4*size)
		for _, row := range part {
			v := row.v
			if m := d.cfg.Mappings.Mapping(v.Mapping); m != nil {
				v.Type = m.FieldType(v.Field) // for export: a number is written as one
			}
			b, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("dispatcher: record %q field %q: %w", row.id, v.Field, err)
			}
			d.ob.gen++
			args = append(args, row.id, v.Field, b, d.ob.gen)
		}
		if _, err := exec(ctx, st, args...); err != nil {
			return err
		}
	}
	return nil
}

// kickOutbox tells the goroutine there is work, without waiting.
func (d *Dispatcher) kickOutbox() {
	select {
	case d.ob.kick <- struct{}{}:
	default:
	}
}

// pending is one outbox row.
type pending struct {
	rec, field string
	gen        int64
	val        store.Value
}

// outboxNext reads the oldest pending rows, grouped by record in the order
// each record first appears. ok is false when the Dispatcher is closed.
func (d *Dispatcher) outboxNext(ctx context.Context) (groups [][]pending, ok bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, false, nil
	}
	rows, err := query(ctx, d.st.q.obNext, outboxBatch)
	if err != nil {
		return nil, true, err
	}
	defer rows.Close()
	at := map[string]int{}
	bad := 0
	for rows.Next() {
		var p pending
		var blob []byte
		if err := rows.Scan(&p.rec, &p.field, &blob, &p.gen); err != nil {
			return nil, true, fmt.Errorf("dispatcher: state outbox: %w", err)
		}
		if err := json.Unmarshal(blob, &p.val); err != nil || p.val.Field != p.field {
			// Not ours to fix by guessing: leave it, refused, for a
			// person to look at, and go on with the rest.
			bad++
			d.log.Error("malformed value in the state's outbox left aside", "record", p.rec, "field", p.field, "error", err)
			if _, err := exec(ctx, d.st.q.obRefuse, p.rec, p.gen); err != nil {
				return nil, true, err
			}
			continue
		}
		i, seen := at[p.rec]
		if !seen {
			i = len(groups)
			at[p.rec] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], p)
	}
	if err := rows.Err(); err != nil {
		return nil, true, fmt.Errorf("dispatcher: state outbox: %w", err)
	}
	d.ob.refused.Add(int64(bad))
	return groups, true, nil
}

// outboxDone deletes the rows the store acknowledged (if unchanged since),
// or marks a refused record's rows.
func (d *Dispatcher) outboxDone(ctx context.Context, group []pending, refused bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	return d.outboxDoneLocked(ctx, group, refused)
}

func (d *Dispatcher) outboxDoneLocked(ctx context.Context, group []pending, refused bool) error {
	if refused {
		maxGen := int64(0)
		for _, p := range group {
			maxGen = max(maxGen, p.gen)
		}
		_, err := exec(ctx, d.st.q.obRefuse, group[0].rec, maxGen)
		return err
	}
	for _, p := range group {
		if _, err := exec(ctx, d.st.q.obAck, p.rec, p.field, p.gen); err != nil {
			return err
		}
	}
	return nil
}

// pushBatch pushes every group with one write of a store that takes
// batches (store.FieldBatcher), then acknowledges them, and marks the
// records the store does not have, under one hold of the mutex. It
// reports the store's error, if the write failed.
func (d *Dispatcher) pushBatch(ctx, sctx context.Context, fb store.FieldBatcher, groups [][]pending) error {
	batch := make([]store.RecordValues, len(groups))
	n := 0
	for i, g := range groups {
		batch[i] = store.RecordValues{ID: g[0].rec, Values: groupValues(g)}
		n += len(g)
	}
	pushStart := time.Now()
	missing, err := fb.SetFieldsBatch(ctx, batch)
	d.ob.seconds.Observe(time.Since(pushStart).Seconds())
	if err != nil {
		return err
	}
	gone := make(map[string]bool, len(missing))
	for _, id := range missing {
		gone[id] = true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	var acked []pending
	for _, g := range groups {
		if !gone[g[0].rec] {
			acked = append(acked, g...)
			continue
		}
		n -= len(g)
		d.ob.refused.Add(int64(len(g)))
		d.log.Error("store has no such record; its values stay in the state and are tried again on the next start",
			"record", g[0].rec, "values", len(g))
		if err := d.outboxDoneLocked(sctx, g, true); err != nil {
			d.log.Error("outbox: marking a refused record failed", "record", g[0].rec, "error", err)
		}
	}
	if err := d.ackMany(sctx, acked); err != nil {
		d.log.Error("outbox: acknowledging in the state failed; the values will be pushed again", "values", len(acked), "error", err)
	}
	d.ob.written.Add(int64(n))
	return nil
}

// ackMany deletes the rows the store acknowledged (if unchanged since), a
// few hundred a statement. Callers hold mu.
func (d *Dispatcher) ackMany(ctx context.Context, ps []pending) error {
	for _, size := range chunkSizes(len(ps), rowChunk/2) {
		part := ps[:size]
		ps = ps[size:]
		st, err := d.st.stmtN(ctx, "obAckN", size, func(n int) string {
			return `DELETE FROM outbox WHERE (record_id, field, gen) IN (VALUES ` + placeholders(n, "(?, ?, ?)") + `)`
		})
		if err != nil {
			return err
		}
		args := make([]any, 0, 3*size)
		for _, p := range part {
			args = append(args, p.rec, p.field, p.gen)
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("dispatcher: state outbox: %w", err)
		}
	}
	return nil
}

// groupValues are one record's pending values, sorted by field.
func groupValues(g []pending) []store.Value {
	vals := make([]store.Value, len(g))
	for i, p := range g {
		vals[i] = p.val
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i].Field < vals[j].Field })
	return vals
}

// runOutbox pushes pending values until ctx is done. It never returns an
// error: a failure of the state (which the Run loop will meet too) or of
// the store is logged and retried after a pause. Its state statements run
// under a context that is never cancelled, as the Run loop's do: they are
// short, and an acknowledgement cut off by the end of the Run would be
// logged as a failure and the value pushed again for nothing.
func (d *Dispatcher) runOutbox(ctx context.Context) {
	sctx := context.WithoutCancel(ctx)
	pause := backoff.New(outboxBackoffFirst, outboxBackoffMax)
	failing := false
	for ctx.Err() == nil {
		groups, ok, err := d.outboxNext(sctx)
		if !ok {
			return
		}
		rows := 0
		for _, g := range groups {
			rows += len(g)
		}
		if err != nil {
			d.log.Error("outbox: reading the state failed; will retry", "error", err)
			if !pause.Wait(ctx) {
				return
			}
			continue
		}
		if len(groups) == 0 {
			d.signalPass()
			select {
			case <-ctx.Done():
				return
			case <-d.ob.kick:
			}
			continue
		}
		failed := false
		if fb, ok := d.cfg.Store.(store.FieldBatcher); ok {
			// One write for the whole pass: a store that takes batches
			// (the SQLite file) commits once, not once per record.
			err := d.pushBatch(ctx, sctx, fb, groups)
			switch {
			case err == nil:
				if failing {
					failing = false
					d.log.Info("store accepts writes again", "written", d.ob.written.Load(), "retried", d.ob.retried.Load())
				}
				pause.Reset()
			case ctx.Err() != nil:
				return
			default:
				d.ob.retried.Add(1)
				if !failing {
					failing = true
					d.log.Warn("store write failed; values kept in the state and retried with back-off", "records", len(groups), "error", err)
				}
				failed = true
			}
			groups = nil
		}
		for _, g := range groups {
			pushStart := time.Now()
			err := d.cfg.Store.SetFields(ctx, g[0].rec, groupValues(g))
			d.ob.seconds.Observe(time.Since(pushStart).Seconds())
			switch {
			case err == nil:
				if err := d.outboxDone(sctx, g, false); err != nil {
					d.log.Error("outbox: acknowledging in the state failed; the values will be pushed again", "record", g[0].rec, "error", err)
				}
				d.ob.written.Add(int64(len(g)))
				if failing {
					failing = false
					d.log.Info("store accepts writes again", "written", d.ob.written.Load(), "retried", d.ob.retried.Load())
				}
				pause.Reset()
				continue
			case ctx.Err() != nil:
				return
			case errors.Is(err, store.ErrNotFound):
				d.ob.refused.Add(int64(len(g)))
				d.log.Error("store has no such record; its values stay in the state and are tried again on the next start",
					"record", g[0].rec, "values", len(g), "error", err)
				if err := d.outboxDone(sctx, g, true); err != nil {
					d.log.Error("outbox: marking a refused record failed", "record", g[0].rec, "error", err)
				}
				continue
			}
			d.ob.retried.Add(1)
			if !failing {
				failing = true
				d.log.Warn("store write failed; values kept in the state and retried with back-off",
					"record", g[0].rec, "error", err)
			} else {
				d.log.Debug("store write failed again", "record", g[0].rec, "error", err, seconds.Attr("pause", pause.Peek()))
			}
			failed = true
			break
		}
		d.signalPass()
		if failed {
			if !pause.Wait(ctx) {
				return
			}
			continue
		}
		if rows < outboxBatch && !d.paceOutbox(ctx) {
			return
		}
	}
}

// paceOutbox waits outboxPace before the next pass, unless Run drains the
// outbox meanwhile; false when ctx is done.
func (d *Dispatcher) paceOutbox(ctx context.Context) bool {
	t := time.NewTimer(outboxPace)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-d.ob.hurry:
	case <-t.C:
	}
	return true
}

func (d *Dispatcher) signalPass() {
	select {
	case d.ob.pass <- struct{}{}:
	default:
	}
}

// outboxCounts reads how many rows are pending and refused.
func (d *Dispatcher) outboxCounts(ctx context.Context) (pendingN, refusedN int, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return 0, 0, errors.New("dispatcher closed")
	}
	err = d.st.q.obCount.QueryRowContext(ctx).Scan(&pendingN, &refusedN)
	if err != nil {
		return 0, 0, fmt.Errorf("dispatcher: state outbox: %w", err)
	}
	return pendingN, refusedN, nil
}

// outboxRun is one Run's outbox goroutine.
type outboxRun struct {
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// startOutbox starts the goroutine for a Run; ctx is Run's.
func (d *Dispatcher) startOutbox(ctx context.Context) *outboxRun {
	octx, stop := context.WithCancel(ctx)
	r := &outboxRun{stop: stop}
	d.ob.written.Store(0)
	d.ob.retried.Store(0)
	d.ob.refused.Store(0)
	d.ob.hurry = make(chan struct{})
	r.wg.Go(func() { d.runOutbox(octx) })
	d.kickOutbox() // rows an earlier run left
	return r
}

// drainOutbox waits, up to the drain timeout, until nothing is pending but
// refused rows, then stops the goroutine and returns its counters.
// With ctx done (the run was stopped) it does not wait. It reports clearly
// what is left: those values stay in the state for the next start.
func (d *Dispatcher) drainOutbox(ctx context.Context, r *outboxRun) storeCounts {
	timeout := d.cfg.StoreDrainTimeout
	if timeout <= 0 {
		timeout = DefaultStoreDrainTimeout
	}
	qctx := context.WithoutCancel(ctx)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	started := time.Now()
	close(d.ob.hurry)
	pendingN, refusedN, err := 0, 0, error(nil)
wait:
	for ctx.Err() == nil {
		d.kickOutbox()
		if pendingN, refusedN, err = d.outboxCounts(qctx); err != nil || pendingN == 0 {
			break
		}
		select {
		case <-d.ob.pass:
		case <-deadline.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	r.stop()
	r.wg.Wait()
	if p, f, err2 := d.outboxCounts(qctx); err2 == nil {
		pendingN, refusedN = p, f
	} else if err == nil {
		err = err2
	}
	s := storeCounts{written: d.ob.written.Load(), retried: d.ob.retried.Load(), pending: pendingN, refused: refusedN}
	switch {
	case err != nil:
		d.log.Error("outbox: could not count the pending store writes", "error", err)
	case pendingN+refusedN > 0:
		d.log.Warn("store writes left pending in state.db; they are pushed when the dispatcher starts again",
			"pending", pendingN, "refused", refusedN, "written", s.written, "retried", s.retried,
			seconds.Attr("waited", time.Since(started).Round(time.Millisecond)))
	default:
		d.log.Info("store writes done", "written", s.written, "retried", s.retried)
	}
	return s
}

// storeCounts are what the outbox did in one Run, for the Summary.
type storeCounts struct {
	written, retried int64
	pending, refused int
}

func (c storeCounts) fill(s *Summary) {
	s.StoreWritten, s.StoreRetried = c.written, c.retried
	s.StorePending, s.StoreRefused = c.pending, c.refused
}
