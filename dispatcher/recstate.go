package dispatcher

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"backfill/store"
)

// loadRec returns the record seq's state, from the cache or the state.
func (d *Dispatcher) loadRec(ctx context.Context, seq int64) (*recState, error) {
	if r := d.recCache[seq]; r != nil {
		return r, nil
	}
	var own, filled []byte
	var targets, queued int64
	var complete int
	r := &recState{seq: seq, changed: make(map[string]bool), dirtied: &d.dirtyRecs}
	if err := d.st.q.recGet.QueryRowContext(ctx, seq).Scan(&r.id, &own, &targets, &filled, &complete, &queued); err != nil {
		return nil, fmt.Errorf("dispatcher: state record %d: %w", seq, err)
	}
	r.complete, r.queued = complete == 1, countOf(d.gen, queued)
	r.targets = d.targetNames[targets]
	if len(own) > 0 {
		if err := json.Unmarshal(own, &r.fields); err != nil {
			return nil, fmt.Errorf("dispatcher: state record %q: %w", r.id, err)
		}
	}
	if len(filled) > 0 {
		if err := json.Unmarshal(filled, &r.filled); err != nil {
			return nil, fmt.Errorf("dispatcher: state record %q: %w", r.id, err)
		}
	}
	if r.filled == nil {
		r.filled = make(map[string]store.Value)
	}
	if d.refreshOpen > 0 {
		if err := d.loadPrior(ctx, r); err != nil {
			return nil, err
		}
	}
	d.recCache[seq] = r
	return r, nil
}

// putRec writes one record's state now (see putRecs).
func (d *Dispatcher) putRec(ctx context.Context, r *recState) error {
	return d.putRecs(ctx, []*recState{r})
}

// putRecs writes the records' state, rowChunk records a statement: a
// batch's records in one round trip instead of one each.
func (d *Dispatcher) putRecs(ctx context.Context, rs []*recState) error {
	for _, size := range chunkSizes(len(rs), rowChunk) {
		part := rs[:size]
		rs = rs[size:]
		st, err := d.st.stmtN(ctx, "recPutN", size, func(n int) string {
			return `UPDATE records SET filled = v.column1, nfilled = v.column2, complete = v.column3, queued = v.column4
				FROM (VALUES ` + placeholders(n, "(?, ?, ?, ?, ?)") + `) AS v WHERE records.seq = v.column5`
		})
		if err != nil {
			return err
		}
		args := make([]any, 0, 5*size)
		for _, r := range part {
			var filled []byte
			if len(r.filled) > 0 {
				if filled, err = json.Marshal(r.filled); err != nil {
					return fmt.Errorf("dispatcher: record %q: %w", r.id, err)
				}
			}
			args = append(args, filled, len(r.filled), b2i(r.complete), genCount(d.gen, r.queued), r.seq)
		}
		if _, err := exec(ctx, st, args...); err != nil {
			return err
		}
	}
	return nil
}

// flush writes the changed records to the state and their new values to
// the outbox, in the same state transaction, and kicks the outbox
// goroutine, which pushes them to the store (see outbox.go): a store that
// is slow or down never holds up or stops the crawl, and nothing is lost.
// The records stay cached (up to recCacheCap of them) for the next
// batches: a record is usually reached by many pages in a row, and
// reading and decoding it again for each was much of a result's cost.
func (d *Dispatcher) flush(ctx context.Context) error {
	rs := d.dirtyRecs
	slices.SortFunc(rs, func(a, b *recState) int { return cmp.Compare(a.seq, b.seq) })
	var rows []outboxRow
	for _, r := range rs {
		start := len(rows)
		for f := range r.changed {
			v, ok := r.filled[f]
			if !ok {
				v = store.Value{Field: f} // taken away (purge.go): the store forgets it
			}
			rows = append(rows, outboxRow{id: r.id, v: v})
		}
		added := rows[start:]
		sort.Slice(added, func(i, j int) bool { return added[i].v.Field < added[j].v.Field })
	}
	if err := d.putRecs(ctx, rs); err != nil {
		return err
	}
	if err := d.enqueue(ctx, rows); err != nil {
		return err
	}
	if len(rows) > 0 {
		d.kickOutbox()
	}
	for _, r := range rs {
		r.dirty = false
		clear(r.changed)
	}
	clear(d.dirtyRecs)
	d.dirtyRecs = d.dirtyRecs[:0]
	if err := d.flushHosts(ctx); err != nil {
		return err
	}
	if len(d.recCache) > recCacheCap {
		clear(d.recCache) // every entry is clean now: nothing is lost
	}
	return nil
}

// dropTasks takes a completed record's queued tasks out of the frontier,
// unless another incomplete record still wants them.
func (d *Dispatcher) dropTasks(ctx context.Context, rec int64) error {
	type queued struct {
		id    int64
		url   string
		depth int
	}
	var ids []queued
	rows, err := d.st.q.recordTasks.QueryContext(ctx, rec)
	if err != nil {
		return fmt.Errorf("dispatcher: state: %w", err)
	}
	for rows.Next() {
		var q queued
		var u sql.NullString
		if err := rows.Scan(&q.id, &u, &q.depth); err != nil {
			rows.Close()
			return fmt.Errorf("dispatcher: state: %w", err)
		}
		q.url = u.String
		ids = append(ids, q)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: state: %w", err)
	}
	for _, q := range ids {
		id := q.id
		if d.w.leased[id] != nil {
			continue // out on lease: its result is taken when it comes
		}
		var wanted int
		if err := d.st.q.urlWanted.QueryRowContext(ctx, id).Scan(&wanted); err != nil {
			return fmt.Errorf("dispatcher: state: %w", err)
		}
		if wanted == 1 {
			if t := d.w.queued[id]; t != nil {
				if err := d.dropCue(ctx, t, rec); err != nil {
					return err
				}
			}
			continue
		}
		if _, err := exec(ctx, d.st.q.urlDrop, id); err != nil {
			return err
		}
		d.queuedN--
		d.pagesLeft.add(linkHost(q.url), q.depth, -1)
		d.kidsN--
		d.w.remove(id)
	}
	return nil
}
