package dispatcher

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"backfill/etl"
	"backfill/store"
)

// Why a record was left incomplete: the reason of its store.Outcome, and
// the keys of Summary.Reasons. When several apply, the first of this list
// is the record's: a refused page says more than a page without values,
// which says more than a failure.
const (
	// ReasonDepthLimit: the crawl stopped at the depth limit with a link
	// left unfollowed that looks like the record's own page: a mapping
	// matches it and its address names the record (see noteBeyond). The
	// outcome names the link and the depth that would reach it: a larger
	// --depth may fill the record. It outranks a refusal, since the pages refused on the way
	// are often the neighbours' that lead to the record's own.
	ReasonDepthLimit = "depth-limit"
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
	// ReasonLinkTooLong: the record's only link is longer than
	// etl.MaxURLLength, the longest URL the crawl fetches (the outcome
	// gives its start and length).
	ReasonLinkTooLong = "link-too-long"
	// ReasonNoLinks: the record had no link to start from (none given,
	// or every one on the blacklist).
	ReasonNoLinks = "no-links"
)

// reasonOrder is the order reasons are printed in: most telling first.
var reasonOrder = []string{ReasonDepthLimit, ReasonRefused, ReasonNoValues, ReasonNoMapping, ReasonNotFetched, ReasonRobots, ReasonFailed, ReasonLinkTooLong, ReasonNoLinks}

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
// became of the pages each reached (and its own link refused for its
// length), its failures by class, its refused pages, and the link it left
// unfollowed at the depth limit, unless the record reached it since (a
// deeper crawl, ?2 being --depth, or another way) or it failed for
// another record meanwhile. Each is one pass over the state;
// outcomes merges them by record. The records after ?1 have their own
// links still to fetch, and nothing else: outcomeUnreached counts them by
// kind (unreachedLinked, unreachedLong, unreachedNone), and
// outcomeUnreachedIDs lists the first of a kind (?2).
const (
	outcomePages = `SELECT r.seq, r.id, COUNT(l.url),
		COALESCE(SUM(u.last_crawled > 0 AND u.class = ''), 0),
		COALESCE(SUM(u.last_crawled > 0 AND u.class = '' AND (u.matched = 1 OR u.found = 1)), 0),
		COALESCE(SUM(u.state = 0), 0), COALESCE(r.long, '')
		FROM records r LEFT JOIN links l ON l.rec = r.seq LEFT JOIN urls u ON u.key = l.url
		WHERE r.complete = 0 AND r.seq <= ?1 GROUP BY r.seq ORDER BY r.seq`
	outcomeFailed = `SELECT r.seq, u.class, COUNT(*) FROM records r JOIN links l ON l.rec = r.seq
		JOIN urls u ON u.key = l.url
		WHERE r.complete = 0 AND r.seq <= ?1 AND u.class != '' GROUP BY r.seq, u.class ORDER BY r.seq, u.class`
	outcomeRefused = `SELECT r.seq, rf.page, rf.field, rf.page_value, rf.record_value FROM records r
		JOIN refusals rf ON rf.rec = r.seq WHERE r.complete = 0 AND r.seq <= ?1 ORDER BY r.seq, rf.page`
	outcomeBeyond = `SELECT r.seq, b.url, b.depth FROM records r JOIN beyond b ON b.rec = r.seq
		WHERE r.complete = 0 AND r.seq <= ?1 AND b.depth > ?2
		AND NOT EXISTS(SELECT 1 FROM links l WHERE l.url = b.key AND l.rec = r.seq)
		AND NOT EXISTS(SELECT 1 FROM urls u WHERE u.key = b.key AND u.class != '')
		ORDER BY r.seq`
	unreachedKind    = `CASE WHEN COALESCE(json_array_length(links), 0) > 0 THEN 0 WHEN long IS NOT NULL THEN 1 ELSE 2 END`
	outcomeUnreached = `SELECT ` + unreachedKind + `, COUNT(*) FROM records
		WHERE complete = 0 AND seq > ?1 GROUP BY 1`
	outcomeUnreachedIDs = `SELECT id FROM records
		WHERE complete = 0 AND seq > ?1 AND ` + unreachedKind + ` = ?2 ORDER BY seq LIMIT ?3`
	// outcomeBatch is how many outcomes are written to the store at once.
	outcomeBatch = 500
)

// The kinds of unreached records outcomeUnreached counts.
const (
	unreachedLinked = iota // with a link of its own: not-fetched
	unreachedLong          // its only link too long: link-too-long
	unreachedNone          // no link: no-links
)

// recordPages is what a record's pages came to, as outcomeOf weighs it:
// its links reached, pages fetched, fetched that a mapping matched (or
// that had values), still queued, and failed by class; its own link
// refused for its length; the first page it refused; the link it left at
// the depth limit.
type recordPages struct {
	id                              string
	links, fetched, matched, queued int
	long                            string
	failed                          map[string]int
	refused                         *refusalRow
	beyond                          *beyondRow
}

// outcomeOf decides why a record with what its pages came to is incomplete.
func outcomeOf(p recordPages) store.Outcome {
	o := store.Outcome{Record: p.id, Pages: p.fetched, Failed: p.failed}
	nFailed := 0
	for _, n := range p.failed {
		nFailed += n
	}
	if rf := p.refused; rf != nil {
		o.Page, o.Key = rf.page, rf.field
	}
	switch {
	case p.beyond != nil && p.queued == 0:
		b := p.beyond
		o.Reason, o.Link, o.Depth = ReasonDepthLimit, b.url, b.depth
		o.Detail = fmt.Sprintf("%s, a page a mapping matches whose address names the record, is %d links from the record's own: one beyond --depth %d, so it was not followed (--depth %d would)",
			b.url, b.depth, b.depth-1, b.depth)
		if rf := p.refused; rf != nil {
			o.Detail += fmt.Sprintf("; a page reached was about someone else (%s: its %s is %q, the record's %q)", rf.page, rf.field, rf.pageValue, rf.recordValue)
		}
	case p.refused != nil:
		rf := p.refused
		o.Reason = ReasonRefused
		o.Detail = fmt.Sprintf("%s: its %s is %q, the record's %q", rf.page, rf.field, rf.pageValue, rf.recordValue)
	case p.matched > 0:
		o.Reason = ReasonNoValues
		o.Detail = fmt.Sprintf("%d page(s) a mapping matched gave none of the missing fields", p.matched)
	case p.fetched > 0:
		o.Reason = ReasonNoMapping
		o.Detail = fmt.Sprintf("%d page(s) fetched; no mapping matched any", p.fetched)
	case p.queued > 0:
		o.Reason = ReasonNotFetched
		o.Detail = fmt.Sprintf("%d page(s) still queued", p.queued)
	case nFailed > 0 && p.failed["robots"] == nFailed:
		o.Reason = ReasonRobots
		o.Detail = fmt.Sprintf("%d page(s) disallowed by robots.txt", nFailed)
	case nFailed > 0:
		o.Reason = ReasonFailed
		var parts []string
		for _, c := range slices.Sorted(maps.Keys(p.failed)) {
			parts = append(parts, fmt.Sprintf("%s=%d", c, p.failed[c]))
		}
		o.Detail = "pages not fetched: " + strings.Join(parts, " ")
	case p.links == 0 && p.long != "":
		o.Reason, o.Link = ReasonLinkTooLong, p.long
		o.Detail = longDetail(p.long)
	case p.links == 0:
		o.Reason = ReasonNoLinks
		o.Detail = "no http(s) link to start from (none given, or all blacklisted)"
	default:
		o.Reason = ReasonNotFetched
		o.Detail = fmt.Sprintf("%d page(s) not fetched", p.links)
	}
	return o
}

// longPreview is how much of a link refused for its length the state
// keeps, and the outcome shows.
const longPreview = 100

// longLink is what the state keeps of a record's own link refused for
// its length: its start, and its length in bytes.
func longLink(l string) string {
	cut := min(len(l), longPreview)
	for cut > 0 && cut < len(l) && !utf8.RuneStart(l[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", l[:cut], len(l))
}

// longDetail says why a record whose only link was too long has none.
func longDetail(long string) string {
	return fmt.Sprintf("its only link, %s, is longer than %d bytes, the longest URL the crawl fetches: refused when the records were read", long, etl.MaxURLLength)
}

type refusalRow struct {
	page, field, pageValue, recordValue string
}

type beyondRow struct {
	url   string
	depth int
}

// beyondScan bounds the links of a page noteBeyond looks at, and
// beyondChecks those of them it looks up in the state.
const (
	beyondScan   = 256
	beyondChecks = 8
)

// noteBeyond keeps, for the record's outcome (ReasonDepthLimit), a link
// of a page at the depth limit (its links would be at depth, beyond
// --depth) that looks like the record's own page: a mapping matches it,
// its address names the record (a word of a match key the record knows,
// such as a name: /people/ann-lee for Ann Lee), the link filters let it
// through, the record has not reached it already and it has not failed.
// A record that knows no match key, or a link that names someone else
// (a colleague's profile), says nothing of the depth: the reason stays
// what the pages reached show. Once per record (recState.beyond).
// Callers hold mu, inside the state transaction.
func (d *Dispatcher) noteBeyond(ctx context.Context, r *recState, links []string, depth int) error {
	if r.beyond {
		return nil
	}
	words := r.nameWords(d.cfg.Mappings.MatchFields())
	if len(words) == 0 {
		return nil
	}
	checked := 0
	for _, l := range links[:min(len(links), beyondScan)] {
		if !namesRecord(l, words) {
			continue
		}
		if matched, _ := d.cfg.Mappings.Matches(l); !matched || d.filter.check(l, depth) != "" {
			continue
		}
		if checked++; checked > beyondChecks {
			return nil
		}
		key := urlKey(l)
		var known bool
		if err := d.st.q.beyondKnown.QueryRowContext(ctx, key, r.seq).Scan(&known); err != nil {
			return fmt.Errorf("dispatcher: state: %w", err)
		}
		if known {
			continue
		}
		if _, err := exec(ctx, d.st.q.beyondPut, r.seq, l, key, depth); err != nil {
			return err
		}
		r.beyond = true
		return nil
	}
	return nil
}

// minNameWord is the shortest word of a match key a link's address must
// hold to name the record: shorter ones ("li", "de") are in too many.
const minNameWord = 3

// nameWords are the words of the match keys the record knows (fields,
// the set's match fields), folded as etl.MatchKey folds them.
func (r *recState) nameWords(fields []string) []string {
	var out []string
	for _, f := range fields {
		v := r.known(f, 0)
		if v == "" {
			continue
		}
		for _, w := range strings.FieldsFunc(r.matchKey(v), func(c rune) bool { return !unicode.IsLetter(c) && !unicode.IsDigit(c) }) {
			if len(w) >= minNameWord && !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	return out
}

// namesRecord reports whether the link's address (its path and query,
// folded to lower case) holds one of the record's name words.
func namesRecord(link string, words []string) bool {
	_, rest, _ := strings.Cut(link, "://")
	_, path, _ := strings.Cut(rest, "/")
	if p, err := url.PathUnescape(path); err == nil {
		path = p
	}
	path = etl.MatchKey(path)
	for _, w := range words {
		if strings.Contains(path, w) {
			return true
		}
	}
	return false
}

// outcomes works out why each incomplete record is incomplete, counts the
// records by reason (with the first ReasonIDs ids of each) and, with
// write, puts the outcomes in the store and clears those of records
// complete now. A record the crawl has not reached (a run stopped before
// seeding it) is counted, not-fetched, link-too-long or no-links, and
// gets no outcome in the store: its outcome says nothing its absence does
// not, and writing one for each of millions of records taken in and not
// crawled yet made an interrupt take minutes and the store a third
// larger. A store that fails is logged: the outcomes are written again at
// the end of the next run. Callers hold mu, with no state transaction
// open.
func (d *Dispatcher) outcomes(ctx context.Context, write bool) (map[string]ReasonCount, error) {
	counts := make(map[string]ReasonCount)
	conn := d.st.conn
	pages, err := conn.QueryContext(ctx, outcomePages, d.seeded)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: outcomes: %w", err)
	}
	defer pages.Close()
	// The other walks are in the same record order; each lags behind
	// pages until it reaches the record pages is on.
	failed, err := lagging(ctx, conn, outcomeFailed, func(rows *sql.Rows, seq *int64, row *classCount) error {
		return rows.Scan(seq, &row.class, &row.n)
	}, d.seeded)
	if err != nil {
		return nil, err
	}
	defer failed.close()
	refused, err := lagging(ctx, conn, outcomeRefused, func(rows *sql.Rows, seq *int64, row *refusalRow) error {
		return rows.Scan(seq, &row.page, &row.field, &row.pageValue, &row.recordValue)
	}, d.seeded)
	if err != nil {
		return nil, err
	}
	defer refused.close()
	beyond, err := lagging(ctx, conn, outcomeBeyond, func(rows *sql.Rows, seq *int64, row *beyondRow) error {
		return rows.Scan(seq, &row.url, &row.depth)
	}, d.seeded, d.cfg.Depth)
	if err != nil {
		return nil, err
	}
	defer beyond.close()

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
		var p recordPages
		if err := pages.Scan(&seq, &p.id, &p.links, &p.fetched, &p.matched, &p.queued, &p.long); err != nil {
			return nil, fmt.Errorf("dispatcher: outcomes: %w", err)
		}
		if err := failed.each(seq, func(c classCount) {
			if p.failed == nil {
				p.failed = make(map[string]int)
			}
			p.failed[c.class] = c.n
		}); err != nil {
			return nil, err
		}
		if err := refused.each(seq, func(rf refusalRow) {
			if p.refused == nil {
				p.refused = &rf
			}
		}); err != nil {
			return nil, err
		}
		if err := beyond.each(seq, func(b beyondRow) { p.beyond = &b }); err != nil {
			return nil, err
		}
		o := outcomeOf(p)
		c := counts[o.Reason]
		c.Records++
		if len(c.IDs) < ReasonIDs {
			c.IDs = append(c.IDs, p.id)
		}
		counts[o.Reason] = c
		if write {
			batch = append(batch, o)
			if len(batch) == outcomeBatch {
				flush()
			}
		}
	}
	if err := pages.Err(); err != nil {
		return nil, fmt.Errorf("dispatcher: outcomes: %w", err)
	}
	for _, l := range []interface{ err() error }{failed, refused, beyond} {
		if err := l.err(); err != nil {
			return nil, err
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

type classCount struct {
	class string
	n     int
}

// lagWalk walks the rows of a query in record order behind another walk:
// each hands on the rows of one record, once the other reaches it.
type lagWalk[T any] struct {
	rows  *sql.Rows
	scan  func(*sql.Rows, *int64, *T) error
	seq   int64
	row   T
	ok    bool
	fault error
}

func lagging[T any](ctx context.Context, conn *sql.Conn, q string, scan func(*sql.Rows, *int64, *T) error, args ...any) (*lagWalk[T], error) {
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: outcomes: %w", err)
	}
	w := &lagWalk[T]{rows: rows, scan: scan}
	w.next()
	return w, w.fault
}

func (w *lagWalk[T]) next() {
	if w.ok = w.rows.Next(); w.ok {
		if err := w.scan(w.rows, &w.seq, &w.row); err != nil {
			w.ok, w.fault = false, fmt.Errorf("dispatcher: outcomes: %w", err)
		}
	}
}

// each calls fn with every row of record seq, which no earlier call
// passed.
func (w *lagWalk[T]) each(seq int64, fn func(T)) error {
	for w.ok && w.seq == seq {
		fn(w.row)
		w.next()
	}
	return w.fault
}

func (w *lagWalk[T]) err() error {
	if w.fault != nil {
		return w.fault
	}
	if err := w.rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: outcomes: %w", err)
	}
	return nil
}

func (w *lagWalk[T]) close() { w.rows.Close() }

// countUnreached adds to counts the incomplete records the crawl has not
// reached (after d.seeded): not-fetched when they have a link,
// link-too-long when their only one was refused for its length, no-links
// when they have none. Their ids come after those of the records
// reached, as their records do in input order.
func (d *Dispatcher) countUnreached(ctx context.Context, counts map[string]ReasonCount) error {
	rows, err := d.st.conn.QueryContext(ctx, outcomeUnreached, d.seeded)
	if err != nil {
		return fmt.Errorf("dispatcher: outcomes: %w", err)
	}
	n := map[int]int{}
	for rows.Next() {
		var kind, count int
		if err := rows.Scan(&kind, &count); err != nil {
			rows.Close()
			return fmt.Errorf("dispatcher: outcomes: %w", err)
		}
		n[kind] = count
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: outcomes: %w", err)
	}
	for _, u := range []struct {
		kind   int
		reason string
	}{{unreachedLinked, ReasonNotFetched}, {unreachedLong, ReasonLinkTooLong}, {unreachedNone, ReasonNoLinks}} {
		if n[u.kind] == 0 {
			continue
		}
		c := counts[u.reason]
		c.Records += n[u.kind]
		if room := ReasonIDs - len(c.IDs); room > 0 {
			ids, err := column[string](d.st.conn.QueryContext(ctx, outcomeUnreachedIDs, d.seeded, u.kind, room))
			if err != nil {
				return err
			}
			c.IDs = append(c.IDs, ids...)
		}
		counts[u.reason] = c
	}
	return nil
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
