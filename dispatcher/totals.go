package dispatcher

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"
)

// A crawl may take several dispatcher processes: one is stopped or dies,
// the next resumes from the state. The summary and the status describe the
// whole crawl, so its counters are kept in the state's meta table as
// totals ("total.<name>", and for counters by key "total.errors.<class>",
// "total.filtered.<why>", "total.pruned.<why>", "total.blocked.<refusal>",
// "total.redirects.<outcome>"),
// written with every commit: the totals of the processes before, plus
// this one's counters. A crawl ends when a Run finishes with no work left
// ("finished"); the next Dispatcher on the state starts a new crawl, with
// totals from zero (loading more records or refreshing is a new crawl).
// "starts" counts the processes of the current crawl.

// Meta keys of the totals.
const (
	metaFinished = "finished"
	metaStarts   = "starts"
	metaElapsed  = "total.elapsed_ns"
	totalPrefix  = "total."
	errorsPrefix = totalPrefix + "errors."
	filterPrefix = totalPrefix + "filtered."
	prunePrefix  = totalPrefix + "pruned."
	blockPrefix  = totalPrefix + "blocked."
	redirPrefix  = totalPrefix + "redirects."
)

// keyed is one family of counters by key kept across restarts: this
// process's and those of the processes before.
type keyed struct {
	prefix    string
	run, base map[string]int64
}

// keyedTallies lists the families of counters by key, by meta prefix.
func (d *Dispatcher) keyedTallies() []keyed {
	return []keyed{
		{errorsPrefix, d.run.errs, d.base.errs},
		{filterPrefix, d.run.filtered, d.base.filtered},
		{prunePrefix, d.run.pruned, d.base.pruned},
		{blockPrefix, d.run.blocked, d.base.blocked},
		{redirPrefix, d.run.redirects, d.base.redirects},
	}
}

// tally is one counter kept across restarts.
type tally struct {
	key string
	v   *int64
}

// tallies lists the counters kept across restarts, by meta key: the
// fields of the per-run counts.
func (d *Dispatcher) tallies() []tally {
	r := &d.run
	return []tally{
		{"pages", &r.pages}, {"reused", &r.reused}, {"disagreeing", &r.disagreeing}, {"late", &r.late}, {"forged", &r.forged}, {"adopted", &r.adopted},
		{"expired", &r.expired}, {"field_errors", &r.fieldErrs}, {"refused_registrations", &r.refused},
		{"refused_match_key", &r.keyRefused}, {"render_retried", &r.renderRetried}, {"render_wanted", &r.renderWanted},
		{"not_modified", &r.notModified}, {"refreshed", &r.refreshed}, {"changed", &r.changed},
		{"unconfirmed", &r.unconfirmed}, {"link_farms", &r.linkFarms}, {"duplicates", &r.duplicates},
		{"recrawled", &r.recrawled}, {"remaps", &r.remaps}, {"reextracted", &r.reextracted},
		{"reextracted_applied", &r.reapplied}, {"not_kept_refetched", &r.refetched}, {"insecure_tls", &r.insecureTLS},
		{"malformed_frames", &r.malformed},
		{"rechecked", &r.rechecked}, {"recheck_agreed", &r.recheckAgreed}, {"recheck_disputed", &r.recheckDisputed},
		{"recheck_unsettled", &r.recheckUnsettled}, {"recheck_failed", &r.recheckFailed}, {"recheck_dropped", &r.recheckDropped},
		{"contradicted", &r.contradicted}, {"liars", &r.liars}, {"purged", &r.purged},
		{"requests", &r.requests}, {"completed", &r.completed}, {"deferred", &r.deferred},
	}
}

// totals are what the processes before this one counted.
type totals struct {
	n                      map[string]int64
	errs, filtered, pruned map[string]int64
	blocked, redirects     map[string]int64
	elapsed                time.Duration
	starts                 int64
}

// loadTotals reads the totals at New, starting a new crawl if the last
// one finished, and counts this process as one more start.
func (d *Dispatcher) loadTotals(ctx context.Context) error {
	s := d.st
	finished, err := s.meta(ctx, metaFinished)
	if err != nil {
		return err
	}
	if finished != 0 {
		if _, err := s.conn.ExecContext(ctx, `DELETE FROM meta WHERE key LIKE 'total.%' OR key IN (?, ?)`, metaFinished, metaStarts); err != nil {
			return fmt.Errorf("dispatcher: state totals: %w", err)
		}
	}
	d.base = totals{n: map[string]int64{}, errs: map[string]int64{}, filtered: map[string]int64{}, pruned: map[string]int64{},
		blocked: map[string]int64{}, redirects: map[string]int64{}}
	t := &d.base
	families := d.keyedTallies()
	rows, err := s.conn.QueryContext(ctx, `SELECT key, value FROM meta WHERE key LIKE 'total.%'`)
	if err != nil {
		return fmt.Errorf("dispatcher: state totals: %w", err)
	}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return fmt.Errorf("dispatcher: state totals: %w", err)
		}
		if k == metaElapsed {
			t.elapsed = time.Duration(v)
			continue
		}
		family := false
		for _, f := range families {
			if name, ok := strings.CutPrefix(k, f.prefix); ok {
				f.base[name], family = v, true
				break
			}
		}
		if !family {
			t.n[strings.TrimPrefix(k, totalPrefix)] = v
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: state totals: %w", err)
	}
	if t.starts, err = s.meta(ctx, metaStarts); err != nil {
		return err
	}
	t.starts++
	return s.setMeta(ctx, metaStarts, t.starts)
}

// saveTotals writes the totals: the base plus this process's counters.
// Callers hold mu; inside the state transaction when one is open.
//
// The working time changes at every call: unless always, it is written
// only with something else (a row or a counter changed in the open
// transaction), so that a quiet dispatcher's commits write nothing and
// give the checkpointer nothing to do.
func (d *Dispatcher) saveTotals(ctx context.Context, always bool) error {
	for _, t := range d.tallies() {
		if err := d.st.setMeta(ctx, totalPrefix+t.key, d.base.n[t.key]+*t.v); err != nil {
			return err
		}
	}
	for _, f := range d.keyedTallies() {
		for k, v := range f.run {
			if err := d.st.setMeta(ctx, f.prefix+k, f.base[k]+v); err != nil {
				return err
			}
		}
	}
	if !always && d.st.inTx {
		if changed, err := d.st.changed(ctx); err != nil || !changed {
			return err
		}
	}
	return d.st.setMeta(ctx, metaElapsed, int64(d.elapsed()))
}

// elapsed is the crawl's working time: the processes before this one, the
// Runs of this one, and the Run going on. Callers hold mu.
func (d *Dispatcher) elapsed() time.Duration {
	e := d.base.elapsed
	if !d.runStart.IsZero() {
		e += time.Since(d.runStart)
	}
	return e
}

// foldTotals moves this process's counters into the base and zeroes them
// in one assignment (Run does, when it starts and ends, so that each
// Run's own figures are at hand while the totals go on). Callers hold mu.
func (d *Dispatcher) foldTotals() {
	for _, t := range d.tallies() {
		d.base.n[t.key] += *t.v
	}
	for _, f := range d.keyedTallies() {
		for k, v := range f.run {
			f.base[k] += v
		}
	}
	d.run = newRunCounts()
	if !d.runStart.IsZero() {
		d.base.elapsed += time.Since(d.runStart)
		d.runStart = time.Time{}
	}
}

// total is a counter's total over the crawl. Callers hold mu.
func (d *Dispatcher) total(v *int64) int64 {
	for _, t := range d.tallies() {
		if t.v == v {
			return d.base.n[t.key] + *v
		}
	}
	return *v
}

// sumMaps is base plus cur, as a new map.
func sumMaps(base, cur map[string]int64) map[string]int64 {
	out := maps.Clone(base)
	if out == nil {
		out = make(map[string]int64)
	}
	for k, v := range cur {
		out[k] += v
	}
	return out
}
