package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"backfill/store"
)

func (d *Dispatcher) loadRec(ctx context.Context, id string) (*recState, error) {
	if r := d.recCache[id]; r != nil {
		return r, nil
	}
	var fields, targets, filled []byte
	var complete int
	if err := d.st.row(ctx, "recGet", id).Scan(&fields, &targets, &filled, &complete); err != nil {
		return nil, fmt.Errorf("dispatcher: state record %q: %w", id, err)
	}
	r := &recState{id: id, complete: complete == 1, changed: make(map[string]bool)}
	if err := errors.Join(json.Unmarshal(fields, &r.fields), json.Unmarshal(targets, &r.targets), json.Unmarshal(filled, &r.filled)); err != nil {
		return nil, fmt.Errorf("dispatcher: state record %q: %w", id, err)
	}
	if r.filled == nil {
		r.filled = make(map[string]store.Value)
	}
	if d.refreshOpen > 0 {
		if err := d.loadPrior(ctx, r); err != nil {
			return nil, err
		}
	}
	d.recCache[id] = r
	return r, nil
}

func (d *Dispatcher) putRec(ctx context.Context, r *recState) error {
	filled, err := json.Marshal(r.filled)
	if err != nil {
		return fmt.Errorf("dispatcher: record %q: %w", r.id, err)
	}
	_, err = d.st.exec(ctx, "recPut", filled, len(r.filled), b2i(r.complete), r.id)
	return err
}

// flush writes the changed records to the state and their new values to
// the outbox, in the same state transaction, and kicks the outbox
// goroutine, which pushes them to the store (see outbox.go): a store that
// is slow or down never holds up or stops the crawl, and nothing is lost.
// The records stay cached (up to recCacheCap of them) for the next
// batches: a record is usually reached by many pages in a row, and
// reading and decoding it again for each was much of a result's cost.
func (d *Dispatcher) flush(ctx context.Context) error {
	ids := make([]string, 0, len(d.recCache))
	for id, r := range d.recCache {
		if r.dirty {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	queued := false
	for _, id := range ids {
		r := d.recCache[id]
		if err := d.putRec(ctx, r); err != nil {
			return err
		}
		if len(r.changed) == 0 {
			continue
		}
		vals := make([]store.Value, 0, len(r.changed))
		for f := range r.changed {
			vals = append(vals, r.filled[f])
		}
		sort.Slice(vals, func(i, j int) bool { return vals[i].Field < vals[j].Field })
		if err := d.enqueueValues(ctx, id, vals); err != nil {
			return err
		}
		queued = true
	}
	if queued {
		d.kickOutbox()
	}
	for _, id := range ids {
		r := d.recCache[id]
		r.dirty = false
		clear(r.changed)
	}
	if len(d.recCache) > recCacheCap {
		clear(d.recCache) // every entry is clean now: nothing is lost
	}
	return nil
}

// dropTasks takes a completed record's queued tasks out of the frontier,
// unless another incomplete record still wants them.
func (d *Dispatcher) dropTasks(ctx context.Context, rec string) error {
	rows, err := d.st.query(ctx, "recordTasks", rec)
	if err != nil {
		return err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("dispatcher: state: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: state: %w", err)
	}
	for _, id := range ids {
		if d.w.leased[id] != nil {
			continue // out on lease: its result is taken when it comes
		}
		var wanted int
		if err := d.st.row(ctx, "urlWanted", id).Scan(&wanted); err != nil {
			return fmt.Errorf("dispatcher: state: %w", err)
		}
		if wanted == 1 {
			continue
		}
		if _, err := d.st.exec(ctx, "frontState", stateDropped, 0, 0, "", id); err != nil {
			return err
		}
		d.queuedN--
		d.w.remove(id)
	}
	return nil
}
