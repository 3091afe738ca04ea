package dispatcher

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"backfill/linkscore"
)

// attachChunk is how many URLs attachLinks looks up, or inserts, with one
// statement. Links come by the hundred from index pages, and one
// statement per link and table was most of a result's cost.
const attachChunk = 64

// knownURL is what the state knows of a URL already in the seen store,
// and of one record's link to it.
type knownURL struct {
	state, depth int
	level        int // its score level while queued
	last         int64
	class        string
	result       []byte
	recDepth     sql.NullInt64 // depth at which the record reached the URL before
}

// linkCand is a link to attach to a record: its normalized URL, what is
// known of it for the record (score.go) and the page it was found on (0:
// none).
type linkCand struct {
	norm   string
	cue    linkscore.Cue
	parent int64
	info   *linkInfo // whether a mapping matches it, with priority
}

// attachLinks records that the record rec (its seq) reached each of links
// (normalized URLs) at depth, links found on no page (a record's own, a
// refresh's), judged by their URL alone (ownCue). A URL new to the crawl
// is queued; one already crawled has its cached extraction applied to rec
// (queued as work); one queued or leased just gains rec. recN is the
// record's count of tasks queued, for its budget.
func (d *Dispatcher) attachLinks(ctx context.Context, links []string, rec int64, recN *int, depth int) error {
	links = d.keepLinks(links, depth)
	r := d.recCache[rec]
	source := linkscore.SourceOwn
	if depth > 0 {
		source = linkscore.SourceNeutral
	}
	cands := make([]linkCand, len(links))
	for i, l := range links {
		info := d.infoOf(l)
		cands[i] = linkCand{norm: l, cue: d.ownCue(r, l, info, depth, source), info: &info}
	}
	return d.attachCands(ctx, cands, rec, recN, depth)
}

// attachPage records that the record r reached the links of page it at
// depth (it.depth + 1), with what is known of each for r (its cue): the
// page was source to it. A link at the depth limit whose page cannot
// give r a value is pruned here (PruneLastDepth); the others go to
// attachCands, which prunes those not worth a request.
func (d *Dispatcher) attachPage(ctx context.Context, r *recState, it applyItem, source linkscore.Source, depth int) error {
	links := it.res.Links
	infos := d.linkInfos(it.res)
	keyWords, valueWords := r.keyWords(d.matchFields), r.valueWords(d.matchFields)
	cands := make([]linkCand, 0, len(links))
	for i, l := range links {
		if why := d.filter.check(l, depth); why != "" {
			d.run.filtered[why]++
			continue
		}
		c := d.cueOf(r, keyWords, valueWords, infos[i], source, len(links), depth)
		if c.Last && !c.Match {
			d.pruned(ctx, PruneLastDepth, l, r, depth, c, nil)
			continue
		}
		cands = append(cands, linkCand{norm: l, cue: c, parent: it.key, info: &infos[i]})
	}
	n := r.queued
	if err := d.attachCands(ctx, cands, r.seq, &r.queued, depth); err != nil {
		return err
	}
	if r.queued != n {
		r.markDirty() // the budget count is kept with the record
	}
	return nil
}

// attachCands attaches links, attachChunk at a time.
func (d *Dispatcher) attachCands(ctx context.Context, cands []linkCand, rec int64, recN *int, depth int) error {
	for len(cands) > 0 {
		n := min(len(cands), attachChunk)
		if err := d.attachSome(ctx, cands[:n], rec, recN, depth); err != nil {
			return err
		}
		cands = cands[n:]
	}
	return nil
}

// attachSome attaches at most attachChunk links: one lookup for those the
// seen store may hold, then one insert per table for the new ones. A link
// that would cost a request (a URL new to the crawl, or one to fetch
// again) is pruned when the record is not expected to get anything from
// it (pruneWhy); one whose page is cached, queued or on its way costs
// nothing more and is always attached. A record's own links are never
// pruned.
func (d *Dispatcher) attachSome(ctx context.Context, cands []linkCand, rec int64, recN *int, depth int) error {
	keys := make([]int64, 0, len(cands))
	kept := make([]linkCand, 0, len(cands))
	for _, c := range cands {
		key := urlKey(c.norm)
		if slices.Contains(keys, key) {
			continue
		}
		keys = append(keys, key)
		kept = append(kept, c)
	}
	known, err := d.lookupURLs(ctx, keys, rec)
	if err != nil {
		return err
	}
	var fresh []*task
	var knownLinks []seedLink // links to known URLs, put with one statement
	for i, key := range keys {
		c := kept[i]
		norm := c.norm
		e := d.score.model.Score(c.cue)
		if k, ok := known[key]; ok {
			if k.recDepth.Valid && int(k.recDepth.Int64) <= depth {
				continue // already reached by this record, no farther away
			}
			if depth > 0 && d.refetches(k) {
				if why := d.pruneWhy(c.cue, e); why != "" {
					d.prunedRec(ctx, why, norm, rec, depth, c.cue, &e)
					continue
				}
			}
			knownLinks = append(knownLinks, seedLink{key, rec})
			d.score.remember(trailKey{key, rec}, c.cue, c.parent)
			if k.last > 0 && k.class != "" && !d.refetches(k) {
				d.score.failedFor(key, []int64{rec}) // it failed before: done with
			}
			if err := d.revisit(ctx, key, norm, rec, depth, nil, k); err != nil {
				return err
			}
			if k.state == stateQueued || d.w.queued[key] != nil {
				if err := d.addCue(ctx, key, k.level, rec, c.cue, e.Value); err != nil {
					return err
				}
			}
			continue
		}
		host, domain := hostDomain(norm)
		if host == "" {
			d.log.Debug("link without a host ignored", "url", norm, "record", rec)
			continue
		}
		if depth > 0 {
			if why := d.pruneWhy(c.cue, e); why != "" {
				d.prunedRec(ctx, why, norm, rec, depth, c.cue, &e)
				continue
			}
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
		t := &task{key: key, url: norm, host: host, domain: domain, depth: depth,
			matched: c.info.matched, priority: c.info.priority, render: d.cfg.Mappings.NeedsRender(norm),
			value: e.Value, level: levelOf(e.Value), cues: []taskCue{{rec: rec, cue: c.cue, value: e.Value}}}
		d.nextSeq++
		t.seq = rankedSeq(hc.n, d.nextSeq)
		fresh = append(fresh, t)
		d.score.remember(trailKey{key, rec}, c.cue, c.parent)
		d.taken(ctx, norm, rec, depth, c.cue, e)
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

// refetches reports whether attaching a record to the known URL k would
// cost a request: revisit queues it again rather than applying a cached
// extraction or joining a task queued or on its way.
func (d *Dispatcher) refetches(k knownURL) bool {
	if k.last > 0 && !d.stale(k.last) {
		return false
	}
	return k.state == stateDone || k.state == stateDropped
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
		return `SELECT u.key, u.state, u.depth, u.score, u.last_crawled, u.class, u.result,
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
		if err := rows.Scan(&key, &k.state, &k.depth, &k.level, &k.last, &k.class, &k.result, &k.recDepth); err != nil {
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
			it := applyItem{rec: rec, key: key, res: res, depth: depth, via: via}
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
