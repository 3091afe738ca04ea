package dispatcher

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// attachChunk is how many URLs attachLinks looks up, or inserts, with one
// statement. Links come by the hundred from index pages, and one
// statement per link and table was most of a result's cost.
const attachChunk = 64

// knownURL is what the state knows of a URL already in the seen store,
// and of one record's link to it.
type knownURL struct {
	state, depth int
	last         int64
	class        string
	result       []byte
	recDepth     sql.NullInt64 // depth at which the record reached the URL before
}

// attachLinks records that the record rec (its seq) reached each of links
// (normalized URLs) at depth. A URL new to the crawl is queued; one
// already crawled has its cached extraction applied to rec (queued as
// work); one queued or leased just gains rec. recN is the record's count
// of tasks queued, for its budget.
func (d *Dispatcher) attachLinks(ctx context.Context, links []string, rec int64, recN *int, depth int) error {
	links = d.keepLinks(links, depth)
	for len(links) > 0 {
		n := min(len(links), attachChunk)
		if err := d.attachSome(ctx, links[:n], rec, recN, depth); err != nil {
			return err
		}
		links = links[n:]
	}
	return nil
}

// attachSome attaches at most attachChunk links: one lookup for those the
// seen store may hold, then one insert per table for the new ones.
func (d *Dispatcher) attachSome(ctx context.Context, links []string, rec int64, recN *int, depth int) error {
	keys := make([]int64, 0, len(links))
	norms := make([]string, 0, len(links))
	for _, norm := range links {
		key := urlKey(norm)
		if slices.Contains(keys, key) {
			continue
		}
		keys = append(keys, key)
		norms = append(norms, norm)
	}
	known, err := d.lookupURLs(ctx, keys, rec)
	if err != nil {
		return err
	}
	var fresh []*task
	var knownLinks []seedLink // links to known URLs, put with one statement
	for i, key := range keys {
		norm := norms[i]
		if k, ok := known[key]; ok {
			if k.recDepth.Valid && int(k.recDepth.Int64) <= depth {
				continue // already reached by this record, no farther away
			}
			knownLinks = append(knownLinks, seedLink{key, rec})
			if err := d.revisit(ctx, key, norm, rec, depth, nil, k); err != nil {
				return err
			}
			continue
		}
		host, domain := hostDomain(norm)
		if host == "" {
			d.log.Debug("link without a host ignored", "url", norm, "record", rec)
			continue
		}
		hc, err := d.hostCount(ctx, host)
		if err != nil {
			return err
		}
		if why := d.filter.budget(&hc.n, recN, depth); why != "" {
			d.run.filtered[why]++
			continue
		}
		d.hostDirty(hc)
		matched, prio := d.cfg.Mappings.Matches(norm)
		t := &task{key: key, url: norm, host: host, domain: domain, depth: depth,
			matched: matched, priority: prio, render: d.cfg.Mappings.NeedsRender(norm)}
		d.nextSeq++
		t.seq = rankedSeq(hc.n, d.nextSeq)
		fresh = append(fresh, t)
	}
	if err := d.insertLinks(ctx, knownLinks, depth); err != nil {
		return err
	}
	if len(fresh) == 0 {
		return nil
	}
	if err := d.insertTasks(ctx, fresh, rec, depth); err != nil {
		return err
	}
	for _, t := range fresh {
		d.queuedN++
		d.pagesLeft.add(t.host, t.depth, 1)
		d.kidsN++
		if t.host == d.kidsHost {
			d.kidsHere++
		}
		d.w.add(t, false)
	}
	return nil
}

// lookupURLs returns what the state knows of the URLs among keys that
// are in the seen store. Those the seen store's filter rules out (see
// seenFilter) are not looked up at all: on an intake of new records, or
// a page of new links, that is every one of them.
func (d *Dispatcher) lookupURLs(ctx context.Context, keys []int64, rec int64) (map[int64]knownURL, error) {
	maybe := make([]any, 0, len(keys)+1)
	maybe = append(maybe, rec)
	for _, k := range keys {
		if d.seenKeys.mayHave(k) {
			maybe = append(maybe, k)
		}
	}
	known := make(map[int64]knownURL)
	if len(maybe) == 1 {
		return known, nil
	}
	st, err := d.st.stmtN(ctx, "urlGet", len(maybe)-1, func(n int) string {
		return `SELECT u.key, u.state, u.depth, u.last_crawled, u.class, u.result,
			(SELECT depth FROM links WHERE url = u.key AND rec = ?)
			FROM urls u WHERE u.key IN (` + placeholders(n, "?") + `)`
	})
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, maybe...)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: state urls: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key int64
		var k knownURL
		if err := rows.Scan(&key, &k.state, &k.depth, &k.last, &k.class, &k.result, &k.recDepth); err != nil {
			return nil, fmt.Errorf("dispatcher: state urls: %w", err)
		}
		known[key] = k
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("dispatcher: state urls: %w", err)
	}
	return known, nil
}

// insertTasks puts new URLs in the state: rec's link to each and the
// queued task in the seen store.
func (d *Dispatcher) insertTasks(ctx context.Context, ts []*task, rec int64, depth int) error {
	if err := d.insertURLs(ctx, ts); err != nil {
		return err
	}
	links := make([]seedLink, len(ts))
	for i, t := range ts {
		links[i] = seedLink{t.key, rec}
	}
	return d.insertLinks(ctx, links, depth)
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

// revisit gives rec, which reached a URL the seen store holds (through the
// redirects via, if any), what the
// URL has: its cached extraction while that is fresh (see stale), else the
// URL is queued again if it is done or dropped (a queued or leased task
// will answer every record that reached it).
func (d *Dispatcher) revisit(ctx context.Context, key int64, norm string, rec int64, depth int, via []string, k knownURL) error {
	switch {
	case k.last > 0 && !d.stale(k.last):
		if k.class == "" && len(k.result) > 0 {
			res, err := d.results.decode(key, k.result)
			if err != nil {
				return fmt.Errorf("dispatcher: state cached result of %s: %w", norm, err)
			}
			d.run.reused++
			it := applyItem{rec: rec, res: res, depth: depth, via: via}
			if res.JSOnly { // a shell's static result: it may want rendering now
				it.lateKey, it.late = key, true
			}
			d.work = append(d.work, it)
		}
	case k.state == stateDropped || k.state == stateDone:
		// Another record wants a task that was dropped, or one whose page
		// is older than the recrawl age: queue it again.
		queued, err := d.requeueDone(ctx, key, norm, min(depth, k.depth))
		if queued && k.last > 0 {
			d.run.recrawled++
		}
		return err
	case depth < k.depth:
		if _, err := exec(ctx, d.st.q.urlDepth, depth, key, depth); err != nil {
			return err
		}
		if k.state == stateQueued {
			d.pagesLeft.moveDepth(linkHost(norm), k.depth, depth)
		}
		if t := d.w.queued[key]; t != nil {
			t.depth = depth
			d.w.reprioritize(t)
		} else if t := d.w.leased[key]; t != nil {
			t.depth = depth
		} else if k.state == stateQueued {
			// Queued in SQLite only: it moved up in the order, maybe
			// before the cursor.
			d.w.cursor = nil
		}
	}
	return nil
}
