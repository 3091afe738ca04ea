package dispatcher

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
)

// stepWrites holds the rows a batch of results adds to urls, links and
// refusals until writeBack puts them in the state, several hundred rows a
// statement. Applying one page to one record wrote them a statement or
// three at a time: thousands of statements a run, each paying
// database/sql's and the driver's overhead. They go to the same state
// transaction as before, only later in it, so what a kill -9 can lose is
// unchanged: the transaction either commits with them or not at all.
//
// Until then the state does not hold them, so a reader of urls or links
// that may meet them either looks here too (lookupURLs, revisit,
// recordsNeed), comes after (dropTasks, for the records the batch
// completed) or writes them back first (logFailed, and every commit: see
// flush).
type stepWrites struct {
	urls     map[int64]*task   // new URLs, queued; written as the task is then
	links    map[linkKey]int   // a record's link to a URL: the least depth
	recsOf   map[int64][]int64 // the records of links, by URL
	refusals map[refusalKey]refusalRow
	order    []refusalKey // refusals in the order they came: the first stands
	// complete are the records that completed, whose queued tasks
	// writeBack drops (dropTasks) once their links are written.
	complete []int64
}

// linkKey is a record's link to a URL.
type linkKey struct{ url, rec int64 }

// refusalKey is a page a record refused.
type refusalKey struct {
	rec  int64
	page string
}

func (w *stepWrites) empty() bool {
	return len(w.urls) == 0 && len(w.links) == 0 && len(w.refusals) == 0 && len(w.complete) == 0
}

// reset forgets the rows: written, or rolled back with the transaction.
func (w *stepWrites) reset() {
	clear(w.urls)
	clear(w.links)
	clear(w.recsOf)
	clear(w.refusals)
	w.order = w.order[:0]
	w.complete = w.complete[:0]
}

// addURL holds a new URL.
func (w *stepWrites) addURL(t *task) {
	if w.urls == nil {
		w.urls = make(map[int64]*task)
	}
	w.urls[t.key] = t
}

// addLink holds rec's link to url at depth; a link held or written before
// keeps the smaller depth, as the statement's upsert does.
func (w *stepWrites) addLink(url, rec int64, depth int) {
	if w.links == nil {
		w.links = make(map[linkKey]int)
		w.recsOf = make(map[int64][]int64)
	}
	k := linkKey{url, rec}
	d, ok := w.links[k]
	if ok && d <= depth {
		return
	}
	if !ok {
		w.recsOf[url] = append(w.recsOf[url], rec)
	}
	w.links[k] = depth
}

// linkDepth is the depth of rec's link to url among those held.
func (w *stepWrites) linkDepth(url, rec int64) (int, bool) {
	d, ok := w.links[linkKey{url, rec}]
	return d, ok
}

// addRefusal holds a refused page; the first refusal of a page by a
// record stands, as the statement's ON CONFLICT DO NOTHING keeps it.
func (w *stepWrites) addRefusal(rec int64, page string, why refusal) {
	if w.refusals == nil {
		w.refusals = make(map[refusalKey]refusalRow)
	}
	k := refusalKey{rec, page}
	if _, ok := w.refusals[k]; ok {
		return
	}
	w.refusals[k] = refusalRow{page: page, field: why.field, pageValue: why.pageValue, recordValue: why.recordValue}
	w.order = append(w.order, k)
}

// writeBack puts the held rows in the state, in the open transaction.
func (d *Dispatcher) writeBack(ctx context.Context) error {
	w := &d.pend
	if w.empty() {
		return nil
	}
	if len(w.urls) > 0 {
		if err := d.insertURLs(ctx, slices.Collect(maps.Values(w.urls))); err != nil {
			return err
		}
	}
	links := make([]linkRow, 0, len(w.links))
	for k, depth := range w.links {
		links = append(links, linkRow{k.url, k.rec, depth})
	}
	if err := d.st.putLinks(ctx, links); err != nil {
		return err
	}
	refusals := make([]refusalWrite, len(w.order))
	for i, k := range w.order {
		refusals[i] = refusalWrite{rec: k.rec, refusalRow: w.refusals[k]}
	}
	if err := d.st.putRefusals(ctx, refusals); err != nil {
		return err
	}
	// A task another record of the batch reached stays: that record's
	// link is written now, and dropTasks sees it.
	for _, rec := range w.complete {
		if err := d.dropTasks(ctx, rec); err != nil {
			return err
		}
	}
	w.reset()
	return nil
}

// linkRow is one row of links.
type linkRow struct {
	url, rec int64
	depth    int
}

// putLinks writes links in (url, record) order, rowChunk rows a
// statement; a record that reached a URL before keeps the smaller depth.
func (s *state) putLinks(ctx context.Context, links []linkRow) error {
	slices.SortFunc(links, func(a, b linkRow) int {
		return cmp.Or(cmp.Compare(a.url, b.url), cmp.Compare(a.rec, b.rec), cmp.Compare(a.depth, b.depth))
	})
	// One row per (url, record), the least depth (first after sorting):
	// a statement may not upsert one row twice.
	links = slices.CompactFunc(links, func(a, b linkRow) bool { return a.url == b.url && a.rec == b.rec })
	for _, size := range chunkSizes(len(links), rowChunk) {
		part := links[:size]
		links = links[size:]
		st, err := s.stmtN(ctx, "linkInsD", len(part), func(n int) string {
			return `INSERT INTO links(url, rec, depth) VALUES ` + placeholders(n, "(?, ?, ?)") +
				` ON CONFLICT(url, rec) DO UPDATE SET depth = excluded.depth WHERE excluded.depth < links.depth`
		})
		if err != nil {
			return err
		}
		args := make([]any, 0, 3*len(part))
		for _, l := range part {
			args = append(args, l.url, l.rec, l.depth)
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("dispatcher: state links: %w", err)
		}
	}
	return nil
}

// refusalWrite is one row of refusals.
type refusalWrite struct {
	rec int64
	refusalRow
}

// putRefusals writes refusals, rowChunk rows a statement; a page a record
// refused before keeps its first refusal.
func (s *state) putRefusals(ctx context.Context, rows []refusalWrite) error {
	for _, size := range chunkSizes(len(rows), rowChunk) {
		part := rows[:size]
		rows = rows[size:]
		st, err := s.stmtN(ctx, "refusalInsN", len(part), func(n int) string {
			return `INSERT INTO refusals(rec, page, field, page_value, record_value) VALUES ` +
				placeholders(n, "(?, ?, ?, ?, ?)") + ` ON CONFLICT DO NOTHING`
		})
		if err != nil {
			return err
		}
		args := make([]any, 0, 5*len(part))
		for _, r := range part {
			args = append(args, r.rec, r.page, r.field, r.pageValue, r.recordValue)
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("dispatcher: state refusals: %w", err)
		}
	}
	return nil
}
