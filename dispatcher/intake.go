package dispatcher

import (
	"cmp"
	"context"
	"database/sql"
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

// recCacheCap bounds the records kept decoded in memory between batches.
const recCacheCap = 4096

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
	changed  map[string]bool   // fields whose value the store has not seen yet
	keys     map[string]string // etl.MatchKey of known values, see matchKey
	// prior holds, for each field a refresh is re-checking, the value it
	// had before (see refresh.go): the value found now is measured
	// against it for the field's History.
	prior map[string]store.Value
}

// matchKey is etl.MatchKey of one of the record's own values, memoized: a
// record is checked against every page it reaches, and the normalization
// (Unicode decomposition) is not cheap.
func (r *recState) matchKey(v string) string {
	if k, ok := r.keys[v]; ok {
		return k
	}
	if r.keys == nil {
		r.keys = make(map[string]string)
	}
	k := etl.MatchKey(v)
	if len(r.keys) < 16 { // a record has a few match keys; bound it anyway
		r.keys[v] = k
	}
	return k
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
	if d.refreshOpen > 0 {
		if err := d.loadPrior(ctx, r); err != nil {
			return nil, err
		}
	}
	d.recCache[id] = r
	return r, nil
}

// attachChunk is how many URLs attachLinks looks up, or inserts, with one
// statement. Links come by the hundred from index pages, and one
// statement per link and table was most of a result's cost.
const attachChunk = 64

// knownURL is what the state knows of a URL already in the frontier, and
// of one record's link to it.
type knownURL struct {
	state, depth int
	last         int64
	class        string
	result       []byte
	recDepth     sql.NullInt64 // depth at which the record reached the URL before
}

// attachLinks records that rec reached each of links (normalized URLs) at
// depth. A URL new to the crawl is queued; one already crawled has its
// cached extraction applied to rec (queued as work); one queued or leased
// just gains rec.
func (d *Dispatcher) attachLinks(ctx context.Context, links []string, rec string, depth int) error {
	links = d.keepLinks(links, depth)
	for len(links) > 0 {
		n := min(len(links), attachChunk)
		if err := d.attachSome(ctx, links[:n], rec, depth); err != nil {
			return err
		}
		links = links[n:]
	}
	return nil
}

// attachSome attaches at most attachChunk links: one lookup for all of
// them, then one insert per table for the new ones.
func (d *Dispatcher) attachSome(ctx context.Context, links []string, rec string, depth int) error {
	ids := make([]string, 0, len(links))
	norms := make([]string, 0, len(links))
	dup := make(map[string]bool, len(links))
	for _, norm := range links {
		id := urlID(norm)
		if dup[id] {
			continue
		}
		dup[id] = true
		ids = append(ids, id)
		norms = append(norms, norm)
	}
	known, err := d.lookupURLs(ctx, ids, rec)
	if err != nil {
		return err
	}
	var fresh []*task
	for i, id := range ids {
		norm := norms[i]
		if k, ok := known[id]; ok {
			if err := d.attachKnown(ctx, id, norm, rec, depth, k); err != nil {
				return err
			}
			continue
		}
		host, domain := hostDomain(norm)
		if host == "" {
			d.log.Debug("link without a host ignored", "url", norm, "record", rec)
			continue
		}
		if why := d.filter.budget(host, rec, depth); why != "" {
			d.filtered[why]++
			continue
		}
		matched, prio := d.cfg.Mappings.Matches(norm)
		t := &task{id: id, url: norm, host: host, domain: domain, depth: depth,
			matched: matched, priority: prio, render: d.cfg.Mappings.NeedsRender(norm)}
		d.nextSeq++
		t.seq = rankedSeq(d.filter.hostN[host], d.nextSeq)
		fresh = append(fresh, t)
	}
	if len(fresh) == 0 {
		return nil
	}
	if err := d.insertTasks(ctx, fresh, rec, depth); err != nil {
		return err
	}
	for _, t := range fresh {
		d.queuedN++
		d.w.add(t, false)
	}
	return nil
}

// lookupURLs returns what the state knows of the URLs among ids that are
// in the frontier. A URL has task_records rows only once it is in the
// frontier, so one missing here is new to the crawl.
func (d *Dispatcher) lookupURLs(ctx context.Context, ids []string, rec string) (map[string]knownURL, error) {
	st, err := d.st.stmtN(ctx, "urlGet", len(ids), func(n int) string {
		return `SELECT f.id, f.state, f.depth, s.last_crawled, s.class, s.result,
			(SELECT depth FROM task_records WHERE url_id = f.id AND record_id = ?)
			FROM frontier f JOIN seen s ON s.id = f.id WHERE f.id IN (` + placeholders(n, "?") + `)`
	})
	if err != nil {
		return nil, err
	}
	args := make([]any, 0, len(ids)+1)
	args = append(args, rec)
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: state urls: %w", err)
	}
	defer rows.Close()
	known := make(map[string]knownURL)
	for rows.Next() {
		var id string
		var k knownURL
		if err := rows.Scan(&id, &k.state, &k.depth, &k.last, &k.class, &k.result, &k.recDepth); err != nil {
			return nil, fmt.Errorf("dispatcher: state urls: %w", err)
		}
		known[id] = k
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dispatcher: state urls: %w", err)
	}
	return known, nil
}

// insertTasks puts new URLs in the state: rec's link to each, the seen
// entry and the queued task, one statement per table.
func (d *Dispatcher) insertTasks(ctx context.Context, ts []*task, rec string, depth int) error {
	now := time.Now().UnixNano()
	n := len(ts)
	inserts := []struct {
		name, head, row, tail string
		args                  func(t *task) []any
	}{
		{"trIns", `INSERT INTO task_records(url_id, record_id, depth) VALUES `, "(?, ?, ?)",
			` ON CONFLICT(url_id, record_id) DO UPDATE SET depth = excluded.depth WHERE excluded.depth < task_records.depth`,
			func(t *task) []any { return []any{t.id, rec, depth} }},
		{"seenInsN", `INSERT INTO seen(id, url, first_seen) VALUES `, "(?, ?, ?)", ` ON CONFLICT(id) DO NOTHING`,
			func(t *task) []any { return []any{t.id, t.url, now} }},
		{"frontInsN", `INSERT INTO frontier(id, url, host, domain, depth, matched, priority, render, seq, state) VALUES `,
			"(?, ?, ?, ?, ?, ?, ?, ?, ?, 0)", ``,
			func(t *task) []any {
				return []any{t.id, t.url, t.host, t.domain, t.depth, b2i(t.matched), t.priority, b2i(t.render), t.seq}
			}},
	}
	for _, in := range inserts {
		st, err := d.st.stmtN(ctx, in.name, n, func(n int) string { return in.head + placeholders(n, in.row) + in.tail })
		if err != nil {
			return err
		}
		args := make([]any, 0, n*10)
		for _, t := range ts {
			args = append(args, in.args(t)...)
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("dispatcher: state %s: %w", in.name, err)
		}
	}
	return nil
}

// placeholders is n copies of one, comma-separated.
func placeholders(n int, one string) string {
	var b strings.Builder
	b.Grow(n * (len(one) + 2))
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(one)
	}
	return b.String()
}

// attachKnown attaches rec to a URL the frontier already holds.
func (d *Dispatcher) attachKnown(ctx context.Context, id, norm, rec string, depth int, k knownURL) error {
	if k.recDepth.Valid && int(k.recDepth.Int64) <= depth {
		return nil // already reached by this record, no farther away
	}
	if _, err := d.st.exec(ctx, "trPut", id, rec, depth); err != nil {
		return err
	}
	return d.revisit(ctx, id, norm, rec, depth, k)
}

// revisit gives rec, which reached a URL the frontier holds, what the URL
// has: its cached extraction while that is fresh (see stale), else the
// URL is queued again if it is done or dropped (a queued or leased task
// will answer every record that reached it).
func (d *Dispatcher) revisit(ctx context.Context, id, norm, rec string, depth int, k knownURL) error {
	switch {
	case k.last > 0 && !d.stale(k.last):
		if k.class == "" && len(k.result) > 0 {
			var res cachedResult
			if err := json.Unmarshal(k.result, &res); err != nil {
				return fmt.Errorf("dispatcher: state cached result of %s: %w", norm, err)
			}
			d.reused++
			d.work = append(d.work, applyItem{rec: rec, res: &res, depth: depth})
		}
	case k.state == stateDropped || k.state == stateDone:
		// Another record wants a task that was dropped, or one whose page
		// is older than the recrawl age: queue it again.
		if k.last > 0 {
			d.recrawled++
		}
		d.nextSeq++
		nd := min(depth, k.depth)
		if _, err := d.st.exec(ctx, "frontRequeue", d.nextSeq, nd, id); err != nil {
			return err
		}
		d.queuedN++
		// Re-read from SQLite with the rest; its place in the order is
		// not known here, so from the start.
		d.w.spilled, d.w.cursor = true, nil
	case depth < k.depth:
		if _, err := d.st.exec(ctx, "frontDepth", depth, id, depth); err != nil {
			return err
		}
		if t := d.w.queued[id]; t != nil {
			t.depth = depth
			d.w.reprioritize(t)
		} else if t := d.w.leased[id]; t != nil {
			t.depth = depth
		} else if k.state == stateQueued {
			// Queued in SQLite only: it moved up in the order, maybe
			// before the cursor.
			d.w.cursor = nil
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
		d.filter.forget(r.id)
		return d.dropTasks(ctx, r.id)
	}
	if !wasPartial && len(r.filled) > 0 {
		d.nPartial++
	}
	if it.depth+1 > d.cfg.Depth {
		return nil
	}
	return d.attachLinks(ctx, it.res.Links, r.id, it.depth+1)
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
		want := r.matchKey(known)
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
		kept := false // the old value stays, with one more conflict
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
			cand, kept = old, true
		}
		if p, refreshing := r.prior[f.Name]; refreshing && !kept {
			cand.History = historyOf(p, cand, now)
		} else if ok && !kept {
			cand.History = old.History // the field keeps its history whichever page holds it
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

// commitResult applies one Result if it answers the current lease of its
// task; anything else is late (or a duplicate) and only counted.
func (d *Dispatcher) commitResult(ctx context.Context, r *wire.Result, now time.Time) error {
	t := d.w.leased[r.TaskID]
	if t == nil && r.Lease < d.firstLease {
		t = d.adopt(r)
	}
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
	notModified := false
	var etag, lastMod string
	if r.Class == "" && r.NotModified {
		cached, err := d.notModified304(ctx, t, r)
		if err != nil {
			return err
		}
		if cached != nil {
			res, notModified = cached.res, true
			etag, lastMod = cached.etag, cached.lastModified
		}
	}
	if r.Class == "" && !notModified {
		d.pages++
		for _, f := range r.Fields {
			if f.Name == "" || len(f.Values) == 0 {
				continue
			}
			res.Fields = append(res.Fields, f)
		}
		res.Links = d.pageLinks(t.url, r.Links)
		dup, err := d.contentSeen(ctx, t, r)
		if err != nil {
			return err
		}
		if dup {
			// Its values still go to the records (pages on one template
			// can look alike and still name different people), but the
			// links were expanded from the first page already. The cached
			// result keeps none, so a record reaching this URL later does
			// not expand them either.
			res.Links = nil
		}
	} else if r.Class != "" {
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
	if r.Class == "" {
		// The validators of this answer (a 304 need not repeat them).
		etag, lastMod = cmp.Or(validator(r.ETag), etag), cmp.Or(validator(r.LastModified), lastMod)
	} else {
		etag, lastMod = "", "" // no cached extraction for a 304 to stand for
	}
	if _, err := d.st.exec(ctx, "seenDone", at.UnixNano(), r.Class, r.Status, blob, etag, lastMod, t.id); err != nil {
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
	if err := d.drainWork(ctx); err != nil {
		return err
	}
	return d.retryRender(ctx, t, r)
}

// contentSeen runs the content-seen test on a fetched page and records
// its fingerprint in the state, so a dispatcher that resumes knows it (see
// loadFingerprints). It reports whether the page is an exact or near
// duplicate of an earlier page at another URL. A page without a usable
// fingerprint (too few words, or a supervisor that sent none) is not
// tested and not recorded.
func (d *Dispatcher) contentSeen(ctx context.Context, t *task, r *wire.Result) (bool, error) {
	if len(r.TextHash) != 16 || r.Words < contentSeenMinWords {
		return false, nil
	}
	exact := [16]byte(r.TextHash)
	first, kind, dist := d.seen.check(t.url, r.Words, exact, r.Simhash)
	if kind != seenNew {
		// Only a copy on the same host is a duplicate whose links need not
		// be followed (URL variants, session ids, mirrors within a site).
		// Pages of one template on different sites read alike but link to
		// different places: their links must be followed.
		if host, _ := hostDomain(first); host != t.host {
			kind, first = seenNew, ""
		}
	}
	if _, err := d.st.exec(ctx, "fpIns", t.id, exact[:], int64(r.Simhash), r.Words, first); err != nil {
		return false, err
	}
	if kind == seenNew {
		return false, nil
	}
	d.duplicates++
	d.log.Debug("duplicate of "+first, "url", t.url, "first", first, "match", kind.String(), "distance", dist)
	return true, nil
}

// loadFingerprints sets up the content-seen test and replays the
// fingerprints the state holds, in the order they were first checked,
// which rebuilds the index a previous process had (see contentSeen).
func (d *Dispatcher) loadFingerprints(ctx context.Context) error {
	d.seen = newContentSeen()
	rows, err := d.st.conn.QueryContext(ctx, `SELECT s.url, f.exact, f.sim, f.words FROM fingerprints f JOIN seen s ON s.id = f.url_id ORDER BY f.seq`)
	if err != nil {
		return fmt.Errorf("dispatcher: state fingerprints: %w", err)
	}
	defer rows.Close()
	bad := 0
	for rows.Next() {
		var u string
		var exact []byte
		var sim int64
		var words int
		if err := rows.Scan(&u, &exact, &sim, &words); err != nil {
			return fmt.Errorf("dispatcher: state fingerprints: %w", err)
		}
		if len(exact) != 16 {
			bad++
			continue
		}
		d.seen.check(u, words, [16]byte(exact), uint64(sim))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: state fingerprints: %w", err)
	}
	if bad > 0 {
		d.log.Warn("malformed fingerprints in the state skipped", "count", bad)
	}
	return nil
}

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

// release ends t's lease: it frees its supervisor's and its host's slot.
func (d *Dispatcher) release(t *task) {
	delete(d.w.leased, t.id)
	d.w.hostLast[t.host] = handover{at: time.Now(), member: t.member}
	if m := d.members[t.member]; m != nil {
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

// adopt takes a result for a lease of an earlier dispatcher process: after
// a restart every unfinished task is queued again, while the supervisors
// go on answering what they held. If the task is still queued (not sent
// again yet) the answer is as good as any, and taking it spares the site a
// second request for the page. The task is leased to the result's sender
// for the moment commitResult takes to release it. nil if not queued.
func (d *Dispatcher) adopt(r *wire.Result) *task {
	t := d.w.queued[r.TaskID]
	if t == nil {
		return nil
	}
	d.w.remove(t.id)
	d.queuedN--
	t.lease, t.member = r.Lease, r.Supervisor
	d.w.leased[t.id] = t
	d.w.hostInFlight[t.host]++
	if m := d.members[t.member]; m != nil {
		m.inFlight++
	}
	d.adopted++
	return t
}

// requeue puts a task whose lease ended without a result back in the
// window (expired, supervisor gone, send failed).
func (d *Dispatcher) requeue(ctx context.Context, t *task) error {
	d.release(t)
	t.lease, t.member, t.deadline = 0, "", time.Time{}
	// The state still shows the task queued (leases live in memory only).
	d.queuedN++
	d.w.add(t, true)
	return nil
}

// refill tops the window up from SQLite when it has room for a chunk
// and SQLite holds queued tasks the window does not. It reads on from the
// window's cursor (see window.cursor), a chunk at a time and at most
// refillChunks chunks per call, so a refill costs about what it adds: it
// used to read the whole window again each time, and the Run loop
// dispatched nothing for the 200ms that took.
func (d *Dispatcher) refill(ctx context.Context) error {
	if !d.w.spilled || len(d.w.queued) > windowCap-refillChunk {
		return nil
	}
	for range refillChunks {
		n, full, err := d.refillChunk(ctx)
		if err != nil {
			return err
		}
		if full {
			d.w.spilled = true
			return nil
		}
		if n < refillChunk {
			d.w.spilled = false // read to the end
			return nil
		}
		if len(d.w.queued) > windowCap-refillChunk {
			return nil
		}
	}
	return nil
}

// refillChunk reads up to refillChunk queued tasks after the cursor into
// the window. n is the rows read; full reports that the window filled up
// before they were all taken.
func (d *Dispatcher) refillChunk(ctx context.Context) (n int, full bool, err error) {
	var rows *sql.Rows
	if c := d.w.cursor; c != nil {
		rows, err = d.st.query(ctx, "refillAfter", b2i(c.matched), c.priority, c.depth, c.seq, refillChunk)
	} else {
		rows, err = d.st.query(ctx, "refill", refillChunk)
	}
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	for rows.Next() {
		n++
		t := &task{}
		var matched, render int
		if err := rows.Scan(&t.id, &t.url, &t.host, &t.domain, &t.depth, &matched, &t.priority, &render, &t.seq); err != nil {
			return n, false, fmt.Errorf("dispatcher: state refill: %w", err)
		}
		t.matched, t.render = matched == 1, render == 1
		if d.w.queued[t.id] == nil && d.w.leased[t.id] == nil {
			if len(d.w.queued) >= windowCap {
				return n, true, nil
			}
			d.w.add(t, true)
		}
		k := t.key()
		d.w.cursor = &k
	}
	if err := rows.Err(); err != nil {
		return n, false, fmt.Errorf("dispatcher: state refill: %w", err)
	}
	return n, false, nil
}
