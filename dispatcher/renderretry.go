package dispatcher

import (
	"context"
	"fmt"
	"time"

	"backfill/wire"
)

// retryRender queues a page again as a render task, once, when its static
// HTML left a matching mapping empty-handed (see missedFields): that is
// what a page whose data JavaScript writes in looks like. It does so only
// while an incomplete record still wants the page, and only when a
// render-capable supervisor is a member; without one the static result
// stands and the page is counted in Summary.RenderWanted. The frontier's
// render flag remembers the retry, so a page is never retried twice.
func (d *Dispatcher) retryRender(ctx context.Context, t *task, r *wire.Result) error {
	if t.render || !d.missedFields(r) {
		return nil
	}
	var wanted int
	if err := d.st.row(ctx, "urlWanted", t.id).Scan(&wanted); err != nil {
		return fmt.Errorf("dispatcher: state: %w", err)
	}
	if wanted == 0 {
		return nil // the records it was for are complete
	}
	if !d.haveRenderer() {
		d.renderWanted++
		d.log.Debug("page may need JavaScript, but no supervisor renders", "url", t.url, "mappings", r.Mappings)
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

// missedFields reports whether a mapping that matched the page by its
// url_patterns and has fields found none of them. Generic mappings run on
// every page and say nothing about it.
func (d *Dispatcher) missedFields(r *wire.Result) bool {
	found := make(map[string]bool, len(r.Fields))
	for _, f := range r.Fields {
		if len(f.Values) > 0 {
			found[f.Mapping] = true
		}
	}
	for _, name := range r.Mappings {
		m := d.cfg.Mappings.Mapping(name)
		if m != nil && !m.Generic() && len(m.FieldNames()) > 0 && !found[name] {
			return true
		}
	}
	return false
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
