package dispatcher

import (
	"context"
	"fmt"
	"time"

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
	fields := d.renderFields(r)
	if len(fields) == 0 {
		return nil
	}
	need, err := d.recordsNeed(ctx, t.id, fields)
	if err != nil || !need {
		return err
	}
	if !d.haveRenderer() {
		d.renderWanted++
		d.log.Debug("page needs JavaScript, but no supervisor renders", "url", t.url, "mappings", r.Mappings)
		return nil
	}
	d.nextSeq++
	if _, err := d.st.exec(ctx, "frontRender", d.nextSeq, t.id); err != nil {
		return err
	}
	t.render, t.seq = true, d.nextSeq
	t.lease, t.member, t.deadline = 0, "", time.Time{}
	d.renderRetried++
	d.queuedN++
	d.w.add(t, true)
	d.log.Debug("page queued again to be rendered", "url", t.url, "mappings", r.Mappings)
	return nil
}

// renderFields is what a rendering of the page could add: the fields of
// the mappings that matched it by url_patterns and leave rendering to the
// dispatcher (render auto), that they did not find in its HTML. Generic
// mappings run on every page and say nothing about it; mappings whose
// render is never keep their pages as they are.
func (d *Dispatcher) renderFields(r *wire.Result) map[string]bool {
	found := make(map[[2]string]bool, len(r.Fields))
	for _, f := range r.Fields {
		if len(f.Values) > 0 {
			found[[2]string{f.Mapping, f.Name}] = true
		}
	}
	var out map[string]bool
	for _, name := range r.Mappings {
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
func (d *Dispatcher) recordsNeed(ctx context.Context, urlID string, fields map[string]bool) (bool, error) {
	rows, err := d.st.query(ctx, "urlRecords", urlID)
	if err != nil {
		return false, err
	}
	var ids []string
	for rows.Next() {
		var id string
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
	for _, m := range d.members {
		if m.render {
			return true
		}
	}
	return false
}
