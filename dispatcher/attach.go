package dispatcher

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

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
			it := applyItem{rec: rec, res: &res, depth: depth}
			if res.JSOnly { // a shell's static result: it may want rendering now
				it.urlID = id
			}
			d.work = append(d.work, it)
		}
	case k.state == stateDropped || k.state == stateDone:
		// Another record wants a task that was dropped, or one whose page
		// is older than the recrawl age: queue it again.
		if k.last > 0 {
			d.recrawled++
		}
		return d.requeueDone(ctx, id, min(depth, k.depth))
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
