package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"backfill/etl"
	"backfill/store"
	"backfill/wire"
)

// maxLinks bounds the links taken from one page; maxConflicts the losing
// values kept per field.
const (
	maxLinks     = 2000
	maxConflicts = 16
)

// cachedResult is what the seen store keeps of a fetched page: enough to
// apply it to a record that reaches the page later, without a second fetch.
type cachedResult struct {
	Source string       `json:"s"`
	Fields []wire.Field `json:"f,omitempty"`
	Links  []string     `json:"l,omitempty"`
}

// recState is a record's crawl state, cached for the length of a batch.
type recState struct {
	id       string
	fields   map[string]string
	targets  []string
	filled   map[string]store.Value
	complete bool
	dirty    bool
	changed  map[string]bool // fields whose value the store has not seen yet
}

func (r *recState) isTarget(name string) bool {
	for _, t := range r.targets {
		if t == name {
			return true
		}
	}
	return false
}

func (r *recState) isComplete() bool {
	for _, t := range r.targets {
		if _, ok := r.filled[t]; !ok {
			return false
		}
	}
	return true
}

// known is what the record knows of a match key for a page at depth: its
// own input value, else a value filled from a page no farther away.
func (r *recState) known(name string, depth int) string {
	if v := r.fields[name]; v != "" {
		return v
	}
	if v, ok := r.filled[name]; ok && v.Depth <= depth {
		return v.Value
	}
	return ""
}

// applyItem is a page to apply to a record at a depth.
type applyItem struct {
	rec   string
	res   *cachedResult
	depth int
}

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
	d.recCache[id] = r
	return r, nil
}

// attach records that rec reached rawURL (normalized) at depth. A URL new
// to the crawl is queued; one already crawled has its cached extraction
// applied to rec (queued as work); one queued or leased just gains rec.
func (d *Dispatcher) attach(ctx context.Context, norm, rec string, depth int) error {
	id := urlID(norm)
	var old int
	err := d.st.row(ctx, "trGet", id, rec).Scan(&old)
	if err == nil && old <= depth {
		return nil // already reached by this record, no farther away
	}
	if err != nil && !errors.Is(err, errNoRows) {
		return fmt.Errorf("dispatcher: state task_records: %w", err)
	}
	var (
		state, fdepth int
		last          int64
		class         string
		result        []byte
	)
	err = d.st.row(ctx, "urlGet", id).Scan(&state, &fdepth, &last, &class, &result)
	if err != nil && !errors.Is(err, errNoRows) {
		return fmt.Errorf("dispatcher: state url %s: %w", norm, err)
	}
	if errors.Is(err, errNoRows) {
		host, domain := hostDomain(norm)
		if host == "" {
			d.log.Debug("link without a host ignored", "url", norm, "record", rec)
			return nil
		}
		if _, err := d.st.exec(ctx, "trPut", id, rec, depth); err != nil {
			return err
		}
		matched, prio := d.cfg.Mappings.Matches(norm)
		t := &task{id: id, url: norm, host: host, domain: domain, depth: depth,
			matched: matched, priority: prio, render: d.cfg.Mappings.NeedsRender(norm)}
		d.nextSeq++
		t.seq = d.nextSeq
		if _, err := d.st.exec(ctx, "seenIns", id, norm, time.Now().UnixNano()); err != nil {
			return err
		}
		if _, err := d.st.exec(ctx, "frontIns", id, norm, host, domain, depth, b2i(matched), prio, b2i(t.render), t.seq); err != nil {
			return err
		}
		d.queuedN++
		d.w.add(t, false)
		return nil
	}
	if _, err := d.st.exec(ctx, "trPut", id, rec, depth); err != nil {
		return err
	}
	switch {
	case last > 0:
		if class == "" && len(result) > 0 {
			var res cachedResult
			if err := json.Unmarshal(result, &res); err != nil {
				return fmt.Errorf("dispatcher: state cached result of %s: %w", norm, err)
			}
			d.reused++
			d.work = append(d.work, applyItem{rec: rec, res: &res, depth: depth})
		}
	case state == stateDropped:
		// Another record wants a task that was dropped: queue it again.
		d.nextSeq++
		nd := min(depth, fdepth)
		if _, err := d.st.exec(ctx, "frontRequeue", d.nextSeq, nd, id); err != nil {
			return err
		}
		d.queuedN++
		d.w.spilled = true // re-read from SQLite with the rest
	case depth < fdepth:
		if _, err := d.st.exec(ctx, "frontDepth", depth, id, depth); err != nil {
			return err
		}
		if t := d.w.queued[id]; t != nil {
			t.depth = depth
			d.w.reprioritize(t)
		} else if t := d.w.leased[id]; t != nil {
			t.depth = depth
		}
	}
	return nil
}

// drainWork applies queued (page, record) pairs until none is left. Applying
// a page may attach new links, which may queue more work.
func (d *Dispatcher) drainWork(ctx context.Context) error {
	for len(d.work) > 0 {
		it := d.work[0]
		d.work[0] = applyItem{}
		d.work = d.work[1:]
		if err := d.apply(ctx, it); err != nil {
			return err
		}
	}
	d.work = nil
	return nil
}

// apply merges one page into one record: attribution, conflict
// resolution, completion, and the page's links for an incomplete record.
func (d *Dispatcher) apply(ctx context.Context, it applyItem) error {
	r, err := d.loadRec(ctx, it.rec)
	if err != nil {
		return err
	}
	if !attributable(r, it.res, it.depth) {
		return nil // the page describes someone else: neither values nor links
	}
	wasPartial := !r.complete && len(r.filled) > 0
	merge(r, it.res, it.depth, time.Now().UTC())
	if r.complete {
		return nil // a late page may still improve provenance, nothing more
	}
	if r.isComplete() {
		r.complete = true
		r.dirty = true
		d.nComplete++
		if wasPartial {
			d.nPartial--
		}
		if err := d.putRec(ctx, r); err != nil {
			return err
		}
		return d.dropTasks(ctx, r.id)
	}
	if !wasPartial && len(r.filled) > 0 {
		d.nPartial++
	}
	if it.depth+1 > d.cfg.Depth {
		return nil
	}
	for _, l := range it.res.Links {
		if err := d.attach(ctx, l, r.id, it.depth+1); err != nil {
			return err
		}
	}
	return nil
}

// attributable decides whether a page's values may go to a record. For
// every match key the page yields a value for, the record's own value (if
// it knows one) must agree after etl.MatchKey normalization. A page that
// yields no value for a match key cannot contradict the record and is
// accepted: many pages that carry the wanted field (a contact page, an
// "about" page) never repeat the person's name, and refusing them would
// lose true values; a decoy, on the other hand, names someone else.
func attributable(r *recState, res *cachedResult, depth int) bool {
	for _, f := range res.Fields {
		if !f.Match || len(f.Values) == 0 {
			continue
		}
		known := r.known(f.Name, depth)
		if known == "" {
			continue
		}
		want := etl.MatchKey(known)
		agree := false
		for _, v := range f.Values {
			if etl.MatchKey(v) == want {
				agree = true
				break
			}
		}
		if !agree {
			return false
		}
	}
	return true
}

// merge writes the page's values for the record's target fields. Per
// field, the value from the page nearest the record's own links wins, ties
// going to the lexicographically smaller source URL, so the outcome does
// not depend on the order results arrive in. Losing values that differ
// from the winner are kept as conflicts.
func merge(r *recState, res *cachedResult, depth int, now time.Time) {
	done := make(map[string]bool)
	for _, f := range res.Fields {
		if done[f.Name] || !r.isTarget(f.Name) {
			continue
		}
		val := joinValues(f.Values)
		if val == "" {
			continue
		}
		done[f.Name] = true
		cand := store.Value{Field: f.Name, Value: val, Source: res.Source, Mapping: f.Mapping, Depth: depth, At: now}
		old, ok := r.filled[f.Name]
		switch {
		case !ok:
		case old.Source == cand.Source && old.Value == cand.Value:
			continue // the same page again: idempotent
		case wins(cand, old):
			cand.Conflicts = addConflict(old.Conflicts, cand.Value, store.Conflict{Value: old.Value, Source: old.Source, Depth: old.Depth})
		default:
			cs := addConflict(old.Conflicts, old.Value, store.Conflict{Value: cand.Value, Source: cand.Source, Depth: cand.Depth})
			if len(cs) == len(old.Conflicts) {
				continue
			}
			old.Conflicts = cs
			cand = old
		}
		r.filled[f.Name] = cand
		r.changed[f.Name] = true
		r.dirty = true
	}
}

func wins(a, b store.Value) bool {
	if a.Depth != b.Depth {
		return a.Depth < b.Depth
	}
	return a.Source < b.Source
}

// addConflict returns cs without entries equal to the winning value, plus
// c unless it equals the winner or is already there, in a stable order.
func addConflict(cs []store.Conflict, winner string, c store.Conflict) []store.Conflict {
	out := make([]store.Conflict, 0, len(cs)+1)
	have := false
	for _, x := range cs {
		if x.Value == winner {
			continue
		}
		if x == c {
			have = true
		}
		out = append(out, x)
	}
	if !have && c.Value != winner {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Depth != out[j].Depth {
			return out[i].Depth < out[j].Depth
		}
		if out[i].Source != out[j].Source {
			return out[i].Source < out[j].Source
		}
		return out[i].Value < out[j].Value
	})
	if len(out) > maxConflicts {
		out = out[:maxConflicts]
	}
	return out
}

// joinValues makes one field value of a page's values: the single value,
// or every distinct non-empty value joined by "; " for a field that keeps
// all values.
func joinValues(vs []string) string {
	var out []string
	seen := make(map[string]bool)
	for _, v := range vs {
		v = strings.TrimSpace(v)
		if v == "" || seen[v] {
			continue
		}
		seen[v] = true
		out = append(out, v)
	}
	return strings.Join(out, "; ")
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

func (d *Dispatcher) putRec(ctx context.Context, r *recState) error {
	filled, err := json.Marshal(r.filled)
	if err != nil {
		return fmt.Errorf("dispatcher: record %q: %w", r.id, err)
	}
	_, err = d.st.exec(ctx, "recPut", filled, len(r.filled), b2i(r.complete), r.id)
	return err
}

// flush writes the batch's changed records to the state and their new
// values to the store, then forgets the batch cache. The store is written
// before the state commits: a crash in between re-applies the results
// (their leases are re-queued), and SetFields is idempotent.
func (d *Dispatcher) flush(ctx context.Context) error {
	ids := make([]string, 0, len(d.recCache))
	for id, r := range d.recCache {
		if r.dirty {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
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
		if err := d.cfg.Store.SetFields(ctx, id, vals); err != nil {
			return fmt.Errorf("dispatcher: store values of record %q: %w", id, err)
		}
	}
	clear(d.recCache)
	return nil
}

// commitResult applies one Result if it answers the current lease of its
// task; anything else is late (or a duplicate) and only counted.
func (d *Dispatcher) commitResult(ctx context.Context, r *wire.Result, now time.Time) error {
	t := d.w.leased[r.TaskID]
	if t == nil || t.lease != r.Lease {
		d.late++
		return nil
	}
	d.release(t)
	res := &cachedResult{Source: t.url}
	if r.FinalURL != "" {
		if n, err := etl.NormalizeURL(r.FinalURL); err == nil {
			res.Source = n
		}
	}
	if r.Class == "" {
		d.pages++
		for _, f := range r.Fields {
			if f.Name == "" || len(f.Values) == 0 {
				continue
			}
			res.Fields = append(res.Fields, f)
		}
		seen := make(map[string]bool)
		for _, l := range r.Links {
			if len(res.Links) >= maxLinks {
				break
			}
			if !looksLikeURL(l.URL) {
				continue
			}
			n, err := etl.NormalizeURL(l.URL)
			if err != nil || seen[n] {
				continue
			}
			seen[n] = true
			res.Links = append(res.Links, n)
		}
	} else {
		d.errs[r.Class]++
		d.log.Debug("task failed", "url", t.url, "class", r.Class, "error", r.Error, "supervisor", r.Supervisor)
	}
	if len(r.FieldErrs) > 0 {
		d.fieldErrs += int64(len(r.FieldErrs))
		d.log.Debug("extraction errors", "url", t.url, "errors", r.FieldErrs)
	}
	var blob []byte
	if r.Class == "" {
		var err error
		if blob, err = json.Marshal(res); err != nil {
			return fmt.Errorf("dispatcher: result of %s: %w", t.url, err)
		}
	}
	at := r.FetchedAt
	if at.IsZero() {
		at = now
	}
	if _, err := d.st.exec(ctx, "seenDone", at.UnixNano(), r.Class, r.Status, blob, t.id); err != nil {
		return err
	}
	if _, err := d.st.exec(ctx, "frontState", stateDone, t.lease, 0, t.member, t.id); err != nil {
		return err
	}
	if r.Class != "" {
		return nil
	}
	rows, err := d.st.query(ctx, "urlRecords", t.id)
	if err != nil {
		return err
	}
	for rows.Next() {
		var it applyItem
		if err := rows.Scan(&it.rec, &it.depth); err != nil {
			rows.Close()
			return fmt.Errorf("dispatcher: state: %w", err)
		}
		it.res = res
		d.work = append(d.work, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: state: %w", err)
	}
	return d.drainWork(ctx)
}

// release ends t's lease: it frees its supervisor's and its host's slot.
func (d *Dispatcher) release(t *task) {
	delete(d.w.leased, t.id)
	if m := d.members[t.member]; m != nil {
		m.inFlight--
		d.w.unparkMember(m)
	}
	if n := d.w.hostInFlight[t.host] - 1; n > 0 {
		d.w.hostInFlight[t.host] = n
	} else {
		delete(d.w.hostInFlight, t.host)
	}
	d.w.unparkHost(t.host)
}

// requeue puts a task whose lease ended without a result back in the
// window (expired, supervisor gone, send failed).
func (d *Dispatcher) requeue(ctx context.Context, t *task) error {
	d.release(t)
	t.lease, t.member, t.deadline = 0, "", time.Time{}
	if _, err := d.st.exec(ctx, "frontState", stateQueued, 0, 0, "", t.id); err != nil {
		return err
	}
	d.queuedN++
	d.w.add(t, true)
	return nil
}

// refill tops the window up from SQLite when it has drained below half and
// SQLite holds queued tasks the window does not.
func (d *Dispatcher) refill(ctx context.Context) error {
	if !d.w.spilled || len(d.w.queued) >= windowCap/2 {
		return nil
	}
	limit := windowCap + len(d.w.queued)
	rows, err := d.st.query(ctx, "refill", limit)
	if err != nil {
		return err
	}
	defer rows.Close()
	n := 0
	full := false
	for rows.Next() {
		n++
		t := &task{}
		var matched, render int
		if err := rows.Scan(&t.id, &t.url, &t.host, &t.domain, &t.depth, &matched, &t.priority, &render, &t.seq); err != nil {
			return fmt.Errorf("dispatcher: state refill: %w", err)
		}
		t.matched, t.render = matched == 1, render == 1
		if d.w.queued[t.id] != nil || d.w.leased[t.id] != nil {
			continue
		}
		if len(d.w.queued) >= windowCap {
			full = true
			break
		}
		d.w.add(t, true)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: state refill: %w", err)
	}
	d.w.spilled = full || n == limit
	return nil
}
