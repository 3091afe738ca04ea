package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"backfill/etl"
	"backfill/store"
	"backfill/wire"
)

// Freshness: pages are fetched again once they are older than the recrawl
// age (Config.RecrawlAfter), conditionally where their server gave
// validators, and with Config.Refresh the values filled longer ago than
// that are re-checked.
//
// A page is stale when it was crawled before this Dispatcher was made and
// longer ago than the recrawl age. Pages this process crawled are never
// stale: however small the age, one run fetches a page at most once, so a
// tiny age cannot turn into a loop of refetches. A record reaching a stale
// page queues it again (revisit) instead of taking its cached extraction.
//
// The seen store keeps the ETag and Last-Modified of a page's last good
// fetch. When the page is dispatched again they go with the Task; the
// supervisor sends them as If-None-Match and If-Modified-Since, and a 304
// comes back as a Result marked NotModified. That is a success: the page's
// cached extraction (fields and links) stands for it and is applied to
// every record that reached the page, and its last crawl becomes now.
//
// A refresh (startRefresh, once per Dispatcher, when Run starts) looks at
// every record's filled values. Each target value older than the age (the
// user's own input values are never targets, so never touched) is set
// aside in the prior table, open, and taken out of the record, which is
// incomplete again; the record's own links and the sources of those values
// are queued again if stale (or their fresh extraction applied at once if
// another record had them fetched already). The crawl then fills the
// fields as it fills any: the nearest page wins. Whenever a field with an
// open prior value gets a new winner, its History is the prior value's
// History, plus the prior value itself (with Replaced) if the value
// changed (historyOf): an unchanged value only has its At refreshed. The
// store keeps the old value until the new one is written, so an export in
// between shows the old one.
//
// When Run ends with nothing left to do, finishRefresh closes the open
// prior values and counts them: found unchanged (Summary.Refreshed),
// changed (Summary.Changed), or not found at all (Summary.Unconfirmed),
// in which case the old value is put back as it was. A Run cut short
// leaves them open; the next Run on the state goes on with the refresh
// (its tasks are queued) and closes them when it finishes.

// maxValidatorLen bounds an ETag or Last-Modified date kept in the state;
// a longer one (or one with control characters) is not kept.
const maxValidatorLen = 256

// ClassNotModifiedUncached is the failure class of a 304 for a page whose
// cached extraction is gone (it cannot stand for the page). Append only.
const ClassNotModifiedUncached = "not-modified-uncached"

// stale reports whether a page last crawled at last (Unix nanoseconds)
// must be fetched again rather than reused.
func (d *Dispatcher) stale(last int64) bool {
	if d.cfg.RecrawlAfter <= 0 || last <= 0 || last >= d.started.UnixNano() {
		return false
	}
	return time.Since(time.Unix(0, last)) > d.cfg.RecrawlAfter
}

// validator is v if it is worth keeping for the next conditional request,
// else "". It came from a supervisor, which took it from a server.
func validator(v string) string {
	if len(v) > maxValidatorLen {
		return ""
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c == 0x7f {
			return ""
		}
	}
	return v
}

// taskValidators are the validators a task carries: those of its page's
// last good fetch, when the page may be fetched again at all (a recrawl
// age is set) and the task is not a render (a render needs the page).
func (d *Dispatcher) taskValidators(ctx context.Context, t *task) (etag, lastModified string, err error) {
	if d.cfg.RecrawlAfter <= 0 || t.render {
		return "", "", nil
	}
	err = d.st.q.urlValid.QueryRowContext(ctx, t.key).Scan(&etag, &lastModified)
	if err == errNoRows {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("dispatcher: state validators of %s: %w", t.url, err)
	}
	return etag, lastModified, nil
}

// cached304 is what a 304 answer stands for: the page's cached extraction
// and the validators it was fetched with.
type cached304 struct {
	res                *cachedResult
	etag, lastModified string
}

// notModified304 reads the cached extraction a NotModified result stands
// for. Without one (the dispatcher sent no validators, or the page failed
// since), the result becomes a failure of ClassNotModifiedUncached and
// nil is returned.
func (d *Dispatcher) notModified304(ctx context.Context, t *task, r *wire.Result) (*cached304, error) {
	var class string
	var blob []byte
	c := &cached304{}
	err := d.st.q.urlCached.QueryRowContext(ctx, t.key).Scan(&class, &blob, &c.etag, &c.lastModified)
	if err != nil && err != errNoRows {
		return nil, fmt.Errorf("dispatcher: state cached result of %s: %w", t.url, err)
	}
	if err == nil && class == "" && len(blob) > 0 {
		c.res = new(cachedResult)
		if err := json.Unmarshal(blob, c.res); err != nil {
			return nil, fmt.Errorf("dispatcher: state cached result of %s: %w", t.url, err)
		}
		d.run.notModified++
		return c, nil
	}
	r.Class = ClassNotModifiedUncached
	r.Error = "304 Not Modified, but no extraction of the page is cached"
	return nil, nil
}

// historyOf is the History of cand, a field's new value found by a
// refresh of the value p: p's own History, and p itself when the value
// changed.
func historyOf(p, cand store.Value, now time.Time) []store.Prior {
	h := append([]store.Prior(nil), p.History...)
	if cand.Value != p.Value {
		h = append(h, store.Prior{Value: p.Value, Source: p.Source, Mapping: p.Mapping, Depth: p.Depth, At: p.At, Replaced: now})
	}
	if len(h) == 0 {
		return nil
	}
	return h
}

// loadPrior reads the open prior values of r's fields (see refresh).
func (d *Dispatcher) loadPrior(ctx context.Context, r *recState) error {
	rows, err := query(ctx, d.st.q.priorGet, r.seq)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var field string
		var blob []byte
		if err := rows.Scan(&field, &blob); err != nil {
			return fmt.Errorf("dispatcher: state prior values of %q: %w", r.id, err)
		}
		var v store.Value
		if err := json.Unmarshal(blob, &v); err != nil {
			return fmt.Errorf("dispatcher: state prior value %q of %q: %w", field, r.id, err)
		}
		if r.prior == nil {
			r.prior = make(map[string]store.Value)
		}
		r.prior[field] = v
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: state prior values of %q: %w", r.id, err)
	}
	return nil
}

// refreshChunk is how many records startRefresh reads at a time.
const refreshChunk = 500

// startRefresh begins the refresh of Config.Refresh: every record's target
// values older than the recrawl age are re-checked (see the comment at the
// top of this file). Callers hold mu with the state transaction open.
func (d *Dispatcher) startRefresh(ctx context.Context, now time.Time) error {
	d.refreshBegun = true
	cutoff := now.Add(-d.cfg.RecrawlAfter)
	var after int64
	records, fields := 0, 0
	for {
		seqs, err := d.filledRecords(ctx, after)
		if err != nil {
			return err
		}
		if len(seqs) == 0 {
			break
		}
		after = seqs[len(seqs)-1]
		for _, seq := range seqs {
			n, err := d.refreshRecord(ctx, seq, cutoff)
			if err != nil {
				return err
			}
			if n > 0 {
				records++
				fields += n
			}
		}
		if err := d.drainWork(ctx); err != nil {
			return err
		}
		if err := d.flush(ctx); err != nil {
			return err
		}
	}
	d.log.Info("refresh started", "older_than", cutoff.UTC().Format(time.RFC3339), "records", records, "fields", fields, "pages_queued", d.run.recrawled)
	return nil
}

// filledRecords lists up to refreshChunk seqs of records with filled
// values after the sequence number after, in order.
func (d *Dispatcher) filledRecords(ctx context.Context, after int64) ([]int64, error) {
	return column[int64](d.st.q.filledRecords.QueryContext(ctx, after, refreshChunk))
}

// refreshRecord sets aside the record's target values found before cutoff
// and revisits its own links and those values' sources. It returns how
// many values it set aside.
func (d *Dispatcher) refreshRecord(ctx context.Context, seq int64, cutoff time.Time) (int, error) {
	r, err := d.loadRec(ctx, seq)
	if err != nil {
		return 0, err
	}
	id := r.id
	var old []string
	for f, v := range r.filled {
		if _, open := r.prior[f]; open {
			continue // an earlier refresh is still re-checking it
		}
		if r.isTarget(f) && r.fields[f] == "" && v.At.Before(cutoff) {
			old = append(old, f)
		}
	}
	if len(old) == 0 {
		return 0, nil
	}
	sort.Strings(old)
	wasPartial := !r.complete && len(r.filled) > 0
	sources := make(map[string]int) // source URL → depth it was found at
	for _, f := range old {
		v := r.filled[f]
		blob, err := json.Marshal(v)
		if err != nil {
			return 0, fmt.Errorf("dispatcher: record %q field %q: %w", id, f, err)
		}
		if _, err := exec(ctx, d.st.q.priorPut, seq, f, blob); err != nil {
			return 0, err
		}
		if r.prior == nil {
			r.prior = make(map[string]store.Value)
		}
		r.prior[f] = v
		delete(r.filled, f)
		d.refreshOpen++
		if v.Source == "" {
			continue
		}
		if dep, ok := sources[v.Source]; !ok || v.Depth < dep {
			sources[v.Source] = v.Depth
		}
	}
	switch {
	case r.complete:
		d.nComplete--
	case wasPartial:
		d.nPartial--
	}
	if len(r.filled) > 0 {
		d.nPartial++
	}
	r.complete = false
	r.markDirty()

	// The record's own links, then the sources of the values set aside.
	var blob []byte
	if err := d.st.q.ownLinks.QueryRowContext(ctx, seq).Scan(&blob); err != nil {
		return 0, fmt.Errorf("dispatcher: state links of %q: %w", id, err)
	}
	var links []string
	if len(blob) > 0 {
		if err := json.Unmarshal(blob, &links); err != nil {
			return 0, fmt.Errorf("dispatcher: state links of %q: %w", id, err)
		}
	}
	sort.Strings(links)
	visit := make(map[string]int, len(links)+len(sources))
	order := make([]string, 0, len(links)+len(sources))
	add := func(u string, depth int) {
		if dep, ok := visit[u]; !ok || depth < dep {
			if !ok {
				order = append(order, u)
			}
			visit[u] = depth
		}
	}
	for _, u := range links {
		add(u, 0)
	}
	srcs := make([]string, 0, len(sources))
	for u := range sources {
		srcs = append(srcs, u)
	}
	sort.Strings(srcs)
	for _, u := range srcs {
		if n, err := etl.NormalizeURL(u); err == nil {
			add(n, sources[u])
		}
	}
	for _, u := range order {
		if err := d.recheck(ctx, u, r, visit[u]); err != nil {
			return 0, err
		}
	}
	return len(old), nil
}

// recheck revisits one URL for a record being refreshed, whether or not
// the record reached it before. A source the frontier does not hold (a
// page reached through a redirect) is attached as a new link.
func (d *Dispatcher) recheck(ctx context.Context, norm string, r *recState, depth int) error {
	key := urlKey(norm)
	known, err := d.lookupURLs(ctx, []int64{key}, r.seq)
	if err != nil {
		return err
	}
	k, ok := known[key]
	if !ok {
		r.markDirty() // its budget may change
		return d.attachLinks(ctx, []string{norm}, r.seq, &r.queued, depth)
	}
	if _, err := exec(ctx, d.st.q.linkPut, key, r.seq, depth); err != nil {
		return err
	}
	if k.recDepth.Valid && int(k.recDepth.Int64) < depth {
		depth = int(k.recDepth.Int64)
	}
	return d.revisit(ctx, key, norm, r.seq, depth, nil, k)
}

// finishRefresh closes the open prior values once the crawl has nothing
// left to do, counting what the refresh found, and puts back the values
// it found nothing for. Callers hold mu with the state transaction open.
func (d *Dispatcher) finishRefresh(ctx context.Context) error {
	for d.refreshOpen > 0 {
		rows, err := query(ctx, d.st.q.priorOpen, refreshChunk)
		if err != nil {
			return err
		}
		type open struct {
			rec   int64
			field string
		}
		var opens []open
		for rows.Next() {
			var o open
			if err := rows.Scan(&o.rec, &o.field); err != nil {
				rows.Close()
				return fmt.Errorf("dispatcher: state prior values: %w", err)
			}
			opens = append(opens, o)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("dispatcher: state prior values: %w", err)
		}
		if len(opens) == 0 {
			d.refreshOpen = 0
			break
		}
		for i := 0; i < len(opens); {
			j := i
			for j < len(opens) && opens[j].rec == opens[i].rec {
				j++
			}
			fields := make([]string, 0, j-i)
			for _, o := range opens[i:j] {
				fields = append(fields, o.field)
			}
			if err := d.closePrior(ctx, opens[i].rec, fields); err != nil {
				return err
			}
			i = j
		}
		if err := d.flush(ctx); err != nil {
			return err
		}
	}
	d.log.Info("refresh finished", "refreshed", d.run.refreshed, "changed", d.run.changed, "unconfirmed", d.run.unconfirmed)
	return nil
}

// closePrior closes one record's open prior values.
func (d *Dispatcher) closePrior(ctx context.Context, seq int64, fields []string) error {
	r, err := d.loadRec(ctx, seq)
	if err != nil {
		return err
	}
	wasPartial := !r.complete && len(r.filled) > 0
	for _, f := range fields {
		if _, err := exec(ctx, d.st.q.priorClose, seq, f); err != nil {
			return fmt.Errorf("dispatcher: state prior value %q of %q: %w", f, r.id, err)
		}
		d.refreshOpen--
		p, ok := r.prior[f]
		delete(r.prior, f)
		if !ok {
			continue
		}
		v, found := r.filled[f]
		switch {
		case !found:
			// Nothing found this time: the old value stands, unconfirmed.
			// The store never lost it.
			r.filled[f] = p
			r.markDirty()
			d.run.unconfirmed++
		case v.Value == p.Value:
			d.run.refreshed++
		default:
			d.run.changed++
		}
	}
	if r.complete {
		return nil
	}
	if r.isComplete() {
		r.complete = true
		r.markDirty()
		d.nComplete++
		d.settled.add(r.id, r.filled)
		if wasPartial {
			d.nPartial--
		}
		return nil
	}
	if !wasPartial && len(r.filled) > 0 {
		d.nPartial++
	}
	return nil
}
