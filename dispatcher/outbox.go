package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
const outboxSchema = `
CREATE TABLE IF NOT EXISTS outbox (
	record_id TEXT NOT NULL,
	field     TEXT NOT NULL,
	value     BLOB NOT NULL,              -- JSON of the store.Value
	gen       INTEGER NOT NULL,           -- grows with every write of the row
	refused   INTEGER NOT NULL DEFAULT 0, -- the store has no such record (this process)
	PRIMARY KEY (record_id, field)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS outbox_ready ON outbox(refused, gen);
`

var outboxStatements = map[string]string{
	"obPut": `INSERT INTO outbox(record_id, field, value, gen) VALUES(?, ?, ?, ?)
		ON CONFLICT(record_id, field) DO UPDATE SET value = excluded.value, gen = excluded.gen, refused = 0`,
	"obNext":   `SELECT record_id, field, value, gen FROM outbox WHERE refused = 0 ORDER BY gen LIMIT ?`,
	"obAck":    `DELETE FROM outbox WHERE record_id = ? AND field = ? AND gen = ?`,
	"obRefuse": `UPDATE outbox SET refused = 1 WHERE record_id = ? AND gen <= ?`,
	"obCount":  `SELECT COALESCE(SUM(refused = 0), 0), COALESCE(SUM(refused = 1), 0) FROM outbox`,
}

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
)

// outbox is the goroutine's side. kick and pass are of size one: a kick
// says there may be rows to push, a pass that the goroutine finished one
// pass over them (drain waits on it).
type outbox struct {
	kick chan struct{}
	pass chan struct{}
	gen  int64 // last gen written; guarded by Dispatcher.mu

	written, retried, refused atomic.Int64

	// seconds is how long each push took, for operators.
	seconds prometheus.Histogram
}

// setupOutbox creates the outbox table, prepares its statements and makes
// the rows a previous process left (refused ones included: the store may
// have the records now) pending again. Called by New.
func (d *Dispatcher) setupOutbox(ctx context.Context) error {
	s := d.st
	if _, err := s.conn.ExecContext(ctx, outboxSchema); err != nil {
		return fmt.Errorf("dispatcher: state outbox schema: %w", err)
	}
	for name, q := range outboxStatements {
		st, err := s.conn.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("dispatcher: prepare %s: %w", name, err)
		}
		s.st[name] = st
	}
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
			Help:    "Time one push of a record's values to the results store took, failed ones included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14), // 1ms … 8s
		})}
	if n, err := s.scalar(ctx, `SELECT COUNT(*) FROM outbox`); err == nil && n > 0 {
		d.log.Info("store writes left by an earlier run will be pushed", "pending", n)
	}
	return nil
}

// enqueueValues writes a record's changed values into the outbox. Callers
// hold mu, inside the state transaction.
func (d *Dispatcher) enqueueValues(ctx context.Context, id string, vals []store.Value) error {
	for _, v := range vals {
		if m := d.cfg.Mappings.Mapping(v.Mapping); m != nil {
			v.Type = m.FieldType(v.Field) // for export: a number is written as one
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("dispatcher: record %q field %q: %w", id, v.Field, err)
		}
		d.ob.gen++
		if _, err := d.st.exec(ctx, "obPut", id, v.Field, b, d.ob.gen); err != nil {
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
	rows, err := d.st.query(ctx, "obNext", outboxBatch)
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
			if _, err := d.st.exec(ctx, "obRefuse", p.rec, p.gen); err != nil {
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
	if refused {
		maxGen := int64(0)
		for _, p := range group {
			maxGen = max(maxGen, p.gen)
		}
		_, err := d.st.exec(ctx, "obRefuse", group[0].rec, maxGen)
		return err
	}
	for _, p := range group {
		if _, err := d.st.exec(ctx, "obAck", p.rec, p.field, p.gen); err != nil {
			return err
		}
	}
	return nil
}

// runOutbox pushes pending values until ctx is done. It never returns an
// error: a failure of the state (which the Run loop will meet too) or of
// the store is logged and retried after a pause. Its state statements run
// under a context that is never cancelled, as the Run loop's do: they are
// short, and an acknowledgement cut off by the end of the Run would be
// logged as a failure and the value pushed again for nothing.
func (d *Dispatcher) runOutbox(ctx context.Context) {
	sctx := context.WithoutCancel(ctx)
	pause := outboxBackoffFirst
	failing := false
	wait := func(dur time.Duration) bool {
		t := time.NewTimer(dur)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for ctx.Err() == nil {
		groups, ok, err := d.outboxNext(sctx)
		if !ok {
			return
		}
		if err != nil {
			d.log.Error("outbox: reading the state failed; will retry", "error", err)
			if !wait(pause) {
				return
			}
			pause = min(2*pause, outboxBackoffMax)
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
		backoff := false
		for _, g := range groups {
			vals := make([]store.Value, len(g))
			for i, p := range g {
				vals[i] = p.val
			}
			sort.Slice(vals, func(i, j int) bool { return vals[i].Field < vals[j].Field })
			pushStart := time.Now()
			err := d.cfg.Store.SetFields(ctx, g[0].rec, vals)
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
				pause = outboxBackoffFirst
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
				d.log.Debug("store write failed again", "record", g[0].rec, "error", err, "pause", pause)
			}
			backoff = true
			break
		}
		d.signalPass()
		if backoff {
			if !wait(pause) {
				return
			}
			pause = min(2*pause, outboxBackoffMax)
		}
	}
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
	err = d.st.row(ctx, "obCount").Scan(&pendingN, &refusedN)
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
			"waited", time.Since(started).Round(time.Millisecond))
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
