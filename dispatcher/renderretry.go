package dispatcher

import (
	"context"
	"fmt"

	"backfill/cluster"
	"backfill/etl"
	"backfill/wire"
)

// retryRender queues a page again as a render task, once, when it needs a
// browser (see renderFields and recordsNeed): its HTML looks like a shell
// that JavaScript fills in, and a record that wants it still lacks a field
// that a matching mapping could find there once rendered. It does so only
// when a render-capable supervisor is a member; without one the static
// result stands and the page is counted in Summary.RenderWanted. The
// frontier's render flag remembers the retry, so a page is never retried
// twice.
//
// A page a mapping filled from its HTML is not rendered because other
// mappings sharing its URL pattern found nothing there: that is what a
// page of another layout looks like, not a page that needs a browser.
func (d *Dispatcher) retryRender(ctx context.Context, t *task, r *wire.Result) error {
	if t.render || !r.JSOnly {
		return nil
	}
	if need, err := d.renderNeeded(ctx, t.key, t.url, r.Mappings, r.Fields); err != nil || !need {
		return err
	}
	d.nextSeq++
	if _, err := exec(ctx, d.st.q.urlRender, d.nextSeq, t.url, t.key); err != nil {
		return err
	}
	t.render, t.seq = true, d.nextSeq
	t.lease = cluster.Lease{}
	d.run.renderRetried++
	d.queuedN++
	d.pagesLeft.add(t.host, t.depth, 1)
	d.w.add(t, true)
	d.log.Debug("page queued again to be rendered", "url", t.url, "host", t.host, "mappings", r.Mappings)
	return nil
}

// renderLate is retryRender for a record that reached a shell after its
// page was fetched for others, and got its cached static result (a
// rendered page's result replaces it): when the page was not worth a
// render then, or its render task was dropped because the records that
// wanted it completed, but the page is worth one now, it is queued again,
// from the state, as a render task.
func (d *Dispatcher) renderLate(ctx context.Context, key int64, res *cachedResult) error {
	var state int
	if err := d.st.q.urlState.QueryRowContext(ctx, key).Scan(&state); err != nil {
		return fmt.Errorf("dispatcher: state: %w", err)
	}
	if state != stateDone && state != stateDropped {
		return nil // queued or on its way: its answer goes to every record that reached it
	}
	if d.members.Len() == 0 {
		// Records are loaded before supervisors join: whether one
		// renders is not known yet. Decided when a render-capable one
		// joins (renderPending); without one, counted as wanted.
		if need, err := d.recordsNeed(ctx, key, d.renderFields(res.Mappings, res.Fields)); err != nil || !need {
			return err
		}
		for _, l := range d.lateRenders {
			if l.key == key {
				return nil
			}
		}
		d.lateRenders = append(d.lateRenders, lateRender{key, res})
		return nil
	}
	if need, err := d.renderNeeded(ctx, key, res.Source, res.Mappings, res.Fields); err != nil || !need {
		return err
	}
	// A fetched page keeps no URL text in the state: the render task
	// goes to the page's source (its URL, or where it redirected).
	d.nextSeq++
	if _, err := exec(ctx, d.st.q.urlRender, d.nextSeq, res.Source, key); err != nil {
		return err
	}
	d.run.renderRetried++
	d.queuedN++
	d.pagesLeft.add(linkHost(res.Source), d.cfg.Depth, 1) // its links were followed from its static result
	d.w.spilled, d.w.cursor = true, nil                   // refill takes it from the state
	d.log.Debug("page queued again to be rendered", "url", res.Source, "mappings", res.Mappings)
	return nil
}

// lateRender is a cached shell that a record reached before any
// supervisor joined, and that may need rendering for it.
type lateRender struct {
	key int64
	res *cachedResult
}

// renderPending decides the late renders put off until a supervisor
// joined, now that a render-capable one has.
func (d *Dispatcher) renderPending(ctx context.Context) error {
	pending := d.lateRenders
	d.lateRenders = nil
	for _, l := range pending {
		if err := d.renderLate(ctx, l.key, l.res); err != nil {
			return err
		}
	}
	return nil
}

// renderWantedTotal is Summary.RenderWanted: the pages that needed a
// render no supervisor could give, those put off until one joined
// included.
func (d *Dispatcher) renderWantedTotal() int64 {
	n := d.run.renderWanted
	for _, l := range d.lateRenders {
		if !d.run.wantedRender[l.key] {
			n++
		}
	}
	return n
}

// renderNeeded reports whether a page whose HTML was a shell is worth a
// render: a record that wants it still lacks a field that a rendering
// could give (renderFields). Without a render-capable supervisor the
// answer is no, and the page is counted in Summary.RenderWanted.
func (d *Dispatcher) renderNeeded(ctx context.Context, key int64, pageURL string, mappings []string, found []wire.Field) (bool, error) {
	fields := d.renderFields(mappings, found)
	if len(fields) == 0 {
		return false, nil
	}
	need, err := d.recordsNeed(ctx, key, fields)
	if err != nil || !need {
		return false, err
	}
	if !d.haveRenderer() {
		if d.run.wantedRender == nil {
			d.run.wantedRender = make(map[int64]bool)
		}
		if !d.run.wantedRender[key] { // counted once, however many records reach it
			d.run.wantedRender[key] = true
			d.run.renderWanted++
		}
		d.log.Debug("page needs JavaScript, but no supervisor renders", "url", pageURL, "mappings", mappings)
		return false, nil
	}
	return true, nil
}

// renderFields is what a rendering of the page could add: the fields of
// the mappings that matched it by url_patterns and leave rendering to the
// dispatcher (render auto), that they did not find in its HTML. Generic
// mappings run on every page and say nothing about it; mappings whose
// render is never keep their pages as they are.
func (d *Dispatcher) renderFields(mappings []string, fields []wire.Field) map[string]bool {
	found := make(map[[2]string]bool, len(fields))
	for _, f := range fields {
		if len(f.Values) > 0 {
			found[[2]string{f.Mapping, f.Name}] = true
		}
	}
	var out map[string]bool
	for _, name := range mappings {
		m := d.cfg.Mappings.Mapping(name)
		if m == nil || m.Generic() || m.Render != etl.RenderAuto {
			continue
		}
		for _, f := range m.FieldNames() {
			if found[[2]string{name, f}] {
				continue
			}
			if out == nil {
				out = make(map[string]bool)
			}
			out[f] = true
		}
	}
	return out
}

// recordsNeed reports whether an incomplete record that wants the page
// still lacks one of fields, after the page's static result was applied.
func (d *Dispatcher) recordsNeed(ctx context.Context, key int64, fields map[string]bool) (bool, error) {
	rows, err := query(ctx, d.st.q.urlRecords, key)
	if err != nil {
		return false, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		var depth int
		if err := rows.Scan(&id, &depth); err != nil {
			rows.Close()
			return false, fmt.Errorf("dispatcher: state: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("dispatcher: state: %w", err)
	}
	for _, id := range ids {
		rec, err := d.loadRec(ctx, id)
		if err != nil {
			return false, err
		}
		if rec.complete {
			continue
		}
		for _, f := range rec.targets {
			if _, ok := rec.filled[f]; !ok && fields[f] {
				return true, nil
			}
		}
	}
	return false, nil
}

// haveRenderer reports whether a render-capable supervisor is a member.
func (d *Dispatcher) haveRenderer() bool {
	for _, m := range d.members.All() {
		if m.Render {
			return true
		}
	}
	return false
}
