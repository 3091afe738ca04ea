package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"backfill/store"
)

// Why a record was left incomplete: the reason of its store.Outcome, and
// the keys of Summary.Reasons. When several apply, the first of this list
// is the record's: a refused page says more than a page without values,
// which says more than a failure.
const (
	// ReasonRefused: a page had values for the record, refused because a
	// match key disagreed (the outcome names the page and the key).
	ReasonRefused = "match-key-refused"
	// ReasonNoValues: pages a mapping matched were fetched, and none
	// gave a missing field.
	ReasonNoValues = "no-values"
	// ReasonNoMapping: pages were fetched, none of which a mapping
	// matched.
	ReasonNoMapping = "no-mapping"
	// ReasonNotFetched: pages are still queued (the run was stopped, or
	// they wait for a render node).
	ReasonNotFetched = "not-fetched"
	// ReasonRobots: robots.txt disallows every page of the record. (A
	// robots.txt that could not be read is a failure, robots-unavailable:
	// nothing is fetched from the host until it can be.)
	ReasonRobots = "robots"
	// ReasonFailed: its pages could not be fetched; the outcome counts
	// them by failure class (dns, connect, bad-status, robots, …).
	ReasonFailed = "failed"
	// ReasonNoLinks: the record had no link to start from (none given,
	// or every one on the blacklist).
	ReasonNoLinks = "no-links"
)

// reasonOrder is the order reasons are printed in: most telling first.
var reasonOrder = []string{ReasonRefused, ReasonNoValues, ReasonNoMapping, ReasonNotFetched, ReasonRobots, ReasonFailed, ReasonNoLinks}

// ReasonOrder lists the reasons, most telling first.
func ReasonOrder() []string { return slices.Clone(reasonOrder) }

// ReasonIDs is the number of record ids Summary.Reasons lists per reason.
const ReasonIDs = 10

// ReasonCount is how many records were left incomplete for one reason,
// and the first of them in input order.
type ReasonCount struct {
	Records int      `json:"records"`
	IDs     []string `json:"ids"`
}

// refuse records that a page's values were refused for a record: counted,
// kept in the state for the record's outcome, and logged at debug level.
// Callers hold mu, inside the state transaction.
func (d *Dispatcher) refuse(ctx context.Context, r *recState, it applyItem, why refusal) error {
	d.run.keyRefused++
	if d.log.Enabled(ctx, slog.LevelDebug) {
		d.log.Debug("record: page refused, a match key disagrees", "record", r.id, "page", it.res.Source, "depth", it.depth,
			"key", why.field, "page_value", why.pageValue, "record_value", why.recordValue)
	}
	_, err := exec(ctx, d.st.q.refusalIns, r.seq, it.res.Source, why.field, why.pageValue, why.recordValue)
	return err
}

// logApplied logs, at debug level, what a page gave a record: the fields
// it had values for, by which mappings, and the ones it filled.
func (d *Dispatcher) logApplied(ctx context.Context, r *recState, it applyItem) {
	if !d.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	var values, mappings, filled []string
	for _, f := range it.res.Fields {
		values = append(values, f.Name)
		if !slices.Contains(mappings, f.Mapping) {
			mappings = append(mappings, f.Mapping)
		}
	}
	for _, t := range r.targets {
		if v, ok := r.filled[t]; ok && v.Source == it.res.Source && v.Depth == it.depth {
			filled = append(filled, t)
		}
	}
	d.log.Debug("record: page accepted", "record", r.id, "page", it.res.Source, "depth", it.depth,
		"mappings", mappings, "values", values, "filled", filled, "complete", r.isComplete())
}

// logFailed logs, at debug level, a failed page for each record that
// wanted it. Callers hold mu.
func (d *Dispatcher) logFailed(ctx context.Context, key int64, url, class, why string) error {
	if !d.log.Enabled(ctx, slog.LevelDebug) {
		return nil
	}
	rows, err := query(ctx, d.st.q.urlRecordIDs, key)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var rec string
		var depth int
		if err := rows.Scan(&rec, &depth); err != nil {
			return fmt.Errorf("dispatcher: state: %w", err)
		}
		d.log.Debug("record: page failed", "record", rec, "page", url, "depth", depth, "class", class, "error", why)
	}
	return rows.Err()
}

// outcomeQueries read, for the records not complete that the crawl has
// reached (seeds.go: ?1 is the last record seeded), in input order: what
// became of the pages each reached, its failures by class, and its
// refused pages. Each is one pass over the state; outcomes merges them by
// record. The records after ?1 have their own links still to fetch, and
// nothing else: outcomeUnreached counts them, with a link and without,
// and outcomeUnreachedIDs lists the first of each (?2: with a link).
const (
	outcomePages = `SELECT r.seq, r.id, COUNT(l.url),
		COALESCE(SUM(u.last_crawled > 0 AND u.class = ''), 0),
		COALESCE(SUM(u.last_crawled > 0 AND u.class = '' AND (u.matched = 1 OR u.found = 1)), 0),
		COALESCE(SUM(u.state = 0), 0)
		FROM records r LEFT JOIN links l ON l.rec = r.seq LEFT JOIN urls u ON u.key = l.url
		WHERE r.complete = 0 AND r.seq <= ?1 GROUP BY r.seq ORDER BY r.seq`
	outcomeFailed = `SELECT r.seq, u.class, COUNT(*) FROM records r JOIN links l ON l.rec = r.seq
		JOIN urls u ON u.key = l.url
		WHERE r.complete = 0 AND r.seq <= ?1 AND u.class != '' GROUP BY r.seq, u.class ORDER BY r.seq, u.class`
	outcomeRefused = `SELECT r.seq, rf.page, rf.field, rf.page_value, rf.record_value FROM records r
		JOIN refusals rf ON rf.rec = r.seq WHERE r.complete = 0 AND r.seq <= ?1 ORDER BY r.seq, rf.page`
	outcomeUnreached = `SELECT COALESCE(json_array_length(links), 0) > 0, COUNT(*) FROM records
		WHERE complete = 0 AND seq > ?1 GROUP BY 1`
	outcomeUnreachedIDs = `SELECT id FROM records
		WHERE complete = 0 AND seq > ?1 AND (COALESCE(json_array_length(links), 0) > 0) = ?2 ORDER BY seq LIMIT ?3`
	// outcomeBatch is how many outcomes are written to the store at once.
	outcomeBatch = 500
)

// outcomeOf decides why a record with what its pages came to is incomplete.
func outcomeOf(id string, links, fetched, matched, queued int, failed map[string]int, rf *refusalRow) store.Outcome {
	o := store.Outcome{Record: id, Pages: fetched, Failed: failed}
	nFailed := 0
	for _, n := range failed {
		nFailed += n
	}
	switch {
	case rf != nil:
		o.Reason, o.Page, o.Key = ReasonRefused, rf.page, rf.field
		o.Detail = fmt.Sprintf("%s: its %s is %q, the record's %q", rf.page, rf.field, rf.pageValue, rf.recordValue)
	case matched > 0:
		o.Reason = ReasonNoValues
		o.Detail = fmt.Sprintf("%d page(s) a mapping matched gave none of the missing fields", matched)
	case fetched > 0:
		o.Reason = ReasonNoMapping
		o.Detail = fmt.Sprintf("%d page(s) fetched; no mapping matched any", fetched)
	case queued > 0:
		o.Reason = ReasonNotFetched
		o.Detail = fmt.Sprintf("%d page(s) still queued", queued)
	case nFailed > 0 && failed["robots"] == nFailed:
		o.Reason = ReasonRobots
		o.Detail = fmt.Sprintf("%d page(s) disallowed by robots.txt", nFailed)
	case nFailed > 0:
		o.Reason = ReasonFailed
		var parts []string
		for _, c := range slices.Sorted(maps.Keys(failed)) {
			parts = append(parts, fmt.Sprintf("%s=%d", c, failed[c]))
		}
		o.Detail = "pages not fetched: " + strings.Join(parts, " ")
	case links == 0:
		o.Reason = ReasonNoLinks
		o.Detail = "no http(s) link to start from (none given, or all blacklisted)"
	default:
		o.Reason = ReasonNotFetched
		o.Detail = fmt.Sprintf("%d page(s) not fetched", links)
	}
	return o
}

type refusalRow struct {
	page, field, pageValue, recordValue string
}

// outcomes works out why each incomplete record is incomplete, counts the
// records by reason (with the first ReasonIDs ids of each) and, with
// write, puts the outcomes in the store and clears those of records
// complete now. A record the crawl has not reached (a run stopped before
// seeding it) is counted, not-fetched or no-links, and gets no outcome
// in the store: its outcome says nothing its absence does not, and
// writing one for each of millions of records taken in and not crawled
// yet made an interrupt take minutes and the store a third larger. A store that fails is logged: the outcomes are written
// again at the end of the next run. Callers hold mu, with no state
// transaction open.
func (d *Dispatcher) outcomes(ctx context.Context, write bool) (map[string]ReasonCount, error) {
	counts := make(map[string]ReasonCount)
	conn := d.st.conn
	pages, err := conn.QueryContext(ctx, outcomePages, d.seeded)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: outcomes: %w", err)
	}
	defer pages.Close()
	failed, err := conn.QueryContext(ctx, outcomeFailed, d.seeded)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: outcomes: %w", err)
	}
	defer failed.Close()
	refused, err := conn.QueryContext(ctx, outcomeRefused, d.seeded)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: outcomes: %w", err)
	}
	defer refused.Close()

	// The three walks are in the same record order; each lags behind the
	// first until it reaches the record the first is on.
	var (
		fSeq   int64
		fClass string
		fN     int
		fOK    = failed.Next()
		rSeq   int64
		rRow   refusalRow
		rOK    = refused.Next()
	)
	if fOK {
		if err := failed.Scan(&fSeq, &fClass, &fN); err != nil {
			return nil, fmt.Errorf("dispatcher: outcomes: %w", err)
		}
	}
	if rOK {
		if err := refused.Scan(&rSeq, &rRow.page, &rRow.field, &rRow.pageValue, &rRow.recordValue); err != nil {
			return nil, fmt.Errorf("dispatcher: outcomes: %w", err)
		}
	}
	var batch []store.Outcome
	var werr error
	flush := func() {
		if write && len(batch) > 0 && werr == nil {
			werr = d.cfg.Store.SetOutcomes(ctx, batch)
		}
		batch = batch[:0]
	}
	for pages.Next() {
		var seq int64
		var id string
		var links, fetched, matched, queued int
		if err := pages.Scan(&seq, &id, &links, &fetched, &matched, &queued); err != nil {
			return nil, fmt.Errorf("dispatcher: outcomes: %w", err)
		}
		var byClass map[string]int
		for fOK && fSeq == seq {
			if byClass == nil {
				byClass = make(map[string]int)
			}
			byClass[fClass] = fN
			if fOK = failed.Next(); fOK {
				if err := failed.Scan(&fSeq, &fClass, &fN); err != nil {
					return nil, fmt.Errorf("dispatcher: outcomes: %w", err)
				}
			}
		}
		var rf *refusalRow
		for rOK && rSeq == seq {
			if rf == nil {
				first := rRow
				rf = &first
			}
			if rOK = refused.Next(); rOK {
				if err := refused.Scan(&rSeq, &rRow.page, &rRow.field, &rRow.pageValue, &rRow.recordValue); err != nil {
					return nil, fmt.Errorf("dispatcher: outcomes: %w", err)
				}
			}
		}
		o := outcomeOf(id, links, fetched, matched, queued, byClass, rf)
		c := counts[o.Reason]
		c.Records++
		if len(c.IDs) < ReasonIDs {
			c.IDs = append(c.IDs, id)
		}
		counts[o.Reason] = c
		if write {
			batch = append(batch, o)
			if len(batch) == outcomeBatch {
				flush()
			}
		}
	}
	for _, rows := range []interface{ Err() error }{pages, failed, refused} {
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("dispatcher: outcomes: %w", err)
		}
	}
	flush()
	if err := d.countUnreached(ctx, counts); err != nil {
		return nil, err
	}
	if !write {
		return counts, nil
	}
	if werr == nil {
		werr = d.clearOutcomes(ctx)
	}
	if werr != nil {
		d.log.Warn("record outcomes not written to the store; they are written at the end of the next run", "error", werr)
		return counts, nil
	}
	return counts, d.noteOutcomes(ctx)
}

// countUnreached adds to counts the incomplete records the crawl has not
// reached (after d.seeded): not-fetched when they have a link, no-links
// when they have none. Their ids come after those of the records
// reached, as their records do in input order.
func (d *Dispatcher) countUnreached(ctx context.Context, counts map[string]ReasonCount) error {
	rows, err := d.st.conn.QueryContext(ctx, outcomeUnreached, d.seeded)
	if err != nil {
		return fmt.Errorf("dispatcher: outcomes: %w", err)
	}
	n := map[bool]int{}
	for rows.Next() {
		var linked bool
		var count int
		if err := rows.Scan(&linked, &count); err != nil {
			rows.Close()
			return fmt.Errorf("dispatcher: outcomes: %w", err)
		}
		n[linked] = count
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: outcomes: %w", err)
	}
	for _, u := range []struct {
		linked bool
		reason string
	}{{true, ReasonNotFetched}, {false, ReasonNoLinks}} {
		if n[u.linked] == 0 {
			continue
		}
		c := counts[u.reason]
		c.Records += n[u.linked]
		if room := ReasonIDs - len(c.IDs); room > 0 {
			ids, err := d.unreachedIDs(ctx, u.linked, room)
			if err != nil {
				return err
			}
			c.IDs = append(c.IDs, ids...)
		}
		counts[u.reason] = c
	}
	return nil
}

// unreachedIDs lists the first n ids of the unreached incomplete records
// with a link (linked) or without.
func (d *Dispatcher) unreachedIDs(ctx context.Context, linked bool, n int) ([]string, error) {
	return column[string](d.st.conn.QueryContext(ctx, outcomeUnreachedIDs, d.seeded, linked, n))
}

// clearOutcomes clears in the store the outcomes of records complete now.
func (d *Dispatcher) clearOutcomes(ctx context.Context) error {
	ids, err := column[string](d.st.conn.QueryContext(ctx, `SELECT r.id FROM outcomes o JOIN records r ON r.seq = o.rec WHERE r.complete = 1`))
	if err != nil {
		return err
	}
	done := make([]store.Outcome, len(ids))
	for i, id := range ids {
		done[i] = store.Outcome{Record: id}
	}
	for len(done) > 0 {
		n := min(len(done), outcomeBatch)
		if err := d.cfg.Store.SetOutcomes(ctx, done[:n]); err != nil {
			return err
		}
		done = done[n:]
	}
	return nil
}

// noteOutcomes remembers which records the store holds an outcome for:
// the incomplete ones reached, which outcomes has just written. Those
// not reached keep what is noted of them (an earlier build wrote their
// outcome); a record is reached before it can be complete, so the
// outcome noted is cleared then.
func (d *Dispatcher) noteOutcomes(ctx context.Context) error {
	return d.inTx(ctx, func(ctx context.Context) error {
		if _, err := d.st.conn.ExecContext(ctx, `DELETE FROM outcomes WHERE rec <= ?`, d.seeded); err != nil {
			return fmt.Errorf("dispatcher: outcomes: %w", err)
		}
		if _, err := d.st.conn.ExecContext(ctx, `INSERT INTO outcomes(rec) SELECT seq FROM records WHERE complete = 0 AND seq <= ?`, d.seeded); err != nil {
			return fmt.Errorf("dispatcher: outcomes: %w", err)
		}
		return nil
	})
}
