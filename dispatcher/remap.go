package dispatcher

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"backfill/seconds"
	"backfill/store"
	"backfill/wire"
)

// Mappings changed since the last run. The state remembers the digest
// of the mappings each Run began with (meta "mappings"). When a Run
// begins with other mappings than the last, before anything is fetched,
// every page an earlier run fetched and the store kept (store.Pages: the
// supervisors keep each page they extract, see supervisor's keep.go) is
// extracted anew with the new mappings, here, from the store: no request
// is made. A page whose extraction changed gets it in the seen store and
// is applied again to every record that reached it, at the depth it
// reached it, as a result would be: new values fill the records (the
// page's new word on a field replaces its old one, see merge), new links
// are followed within the depth limit and the budgets, and those are
// what the run fetches. A page fetched before but not kept (the store's
// bound let it go, or pages were not kept) cannot be extracted anew:
// when an incomplete record wants it, it is queued again and fetched.
// Summary.Remap counts what was done; the log says it when Run begins.
//
// A page kept as its supervisor's browser rendered it is extracted as
// such; content duplicates keep their links unfollowed. Values a page no
// longer yields under the new mappings stay where they were filled.

// metaMappings is the meta key of the digest of the last Run's mappings
// (its first 15 hex digits, as an integer).
const metaMappings = "mappings"

// digestKey is the integer meta keeps of a mappings digest; 0 for none.
func digestKey(digest string) int64 {
	if len(digest) < 15 {
		return 0
	}
	v, err := strconv.ParseInt(digest[:15], 16, 64)
	if err != nil {
		return 0
	}
	return v
}

// Remap is what a change of mappings did to the crawl's earlier pages
// (see remap.go).
type Remap struct {
	// Changed says the mappings changed since the crawl's last run.
	Changed bool `json:"mappings_changed"`
	// Reextracted counts the kept pages extracted anew (no request made),
	// Applied those whose extraction changed and was applied again to
	// their records, Refetched the pages fetched before and not kept that
	// incomplete records want, queued to be fetched again.
	Reextracted int64 `json:"reextracted"`
	Applied     int64 `json:"reextracted_applied"`
	Refetched   int64 `json:"not_kept_refetched"`
}

// remapChunk is how many re-extracted pages are applied to their
// records in one step.
const remapChunk = 256

// remap re-extracts the kept pages when the mappings changed since the
// last Run, as the comment at the top of this file says, and remembers
// the mappings. Callers hold mu with the state transaction open.
func (d *Dispatcher) remap(ctx context.Context) error {
	cur := digestKey(d.digest)
	prev, err := d.st.meta(ctx, metaMappings)
	if err != nil {
		return err
	}
	if prev == cur || cur == 0 {
		return nil
	}
	if prev == 0 {
		// The first Run on this state (or one of a build that kept no
		// digest): nothing to compare with.
		return d.st.setMeta(ctx, metaMappings, cur)
	}
	start := time.Now()
	d.run.remaps++
	dups, err := d.duplicateURLs(ctx)
	if err != nil {
		return err
	}
	var changed []int64
	done := make(map[int64]bool)
	damaged := 0
	pages, _ := d.cfg.Store.(store.Pages)
	if pages != nil {
		err = store.EachPage(ctx, pages, func(p store.Page) error {
			if p.Damaged != "" {
				// As if not kept: fetched again if a record wants it.
				if damaged++; damaged == 1 {
					d.log.Warn("kept page damaged; fetched again if a record wants it (the count of such pages follows)", "url", p.Key, "error", p.Damaged)
				}
				return nil
			}
			key := urlKey(p.Key)
			ch, ok, err := d.reextract(ctx, key, p, dups[p.Key])
			if err != nil || !ok {
				return err
			}
			done[key] = true
			if ch {
				changed = append(changed, key)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("dispatcher: kept pages: %w", err)
		}
	}
	for len(changed) > 0 {
		n := min(len(changed), remapChunk)
		if err := d.reapplyPages(ctx, changed[:n]); err != nil {
			return err
		}
		changed = changed[n:]
	}
	if err := d.refetchUnkept(ctx, done); err != nil {
		return err
	}
	d.log.Info("mappings changed since the last run: kept pages extracted anew, without a request",
		"pages_reextracted", d.run.reextracted, "pages_changed", d.run.reapplied, "not_kept_fetched_again", d.run.refetched,
		"kept_damaged", damaged,
		"records_complete", d.nComplete, "records", d.nRecords, seconds.Attr("elapsed", time.Since(start)))
	return d.st.setMeta(ctx, metaMappings, cur)
}

// duplicateURLs are the pages the content-seen test found to be copies:
// their links stay unfollowed.
func (d *Dispatcher) duplicateURLs(ctx context.Context) (map[string]bool, error) {
	urls, err := column[string](d.st.conn.QueryContext(ctx, `SELECT url FROM fingerprints WHERE duplicate_of != ''`))
	if err != nil {
		return nil, err
	}
	m := make(map[string]bool, len(urls))
	for _, u := range urls {
		m[u] = true
	}
	return m, nil
}

// reextract extracts the kept page p (of the URL key) anew and writes
// the result to the seen store. ok is false for a page the crawl did not
// fetch well (a page learning kept, one queued again since); changed
// says its cached extraction changed.
func (d *Dispatcher) reextract(ctx context.Context, key int64, p store.Page, dup bool) (changed, ok bool, err error) {
	var (
		state int
		class string
		blob  []byte
	)
	err = d.st.conn.QueryRowContext(ctx, `SELECT state, class, result FROM urls WHERE key = ?`, key).Scan(&state, &class, &blob)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("dispatcher: state urls: %w", err)
	}
	if state != stateDone || class != "" || blob == nil {
		return false, false, nil
	}
	var old cachedResult
	if err := json.Unmarshal(blob, &old); err != nil {
		return false, false, fmt.Errorf("dispatcher: state: cached extraction of %s: %w", p.Key, err)
	}
	if old.Redirect != "" {
		return false, false, nil // it sent its client to another host; what was kept is not its page
	}
	d.run.reextracted++
	res := old
	res.Fields, res.Links, res.Anchors, res.JSOnly, res.Mappings = nil, nil, nil, false, nil
	res.infos = nil
	if ex := d.cfg.Mappings.Extract(p.Address(), p.Body, p.ContentType); ex != nil {
		for _, f := range ex.Fields {
			if f.Field != "" && len(f.Values) > 0 {
				res.Fields = append(res.Fields, wire.Field{Mapping: f.Mapping, Name: f.Field, Values: f.Values, Match: f.Match})
			}
		}
		d.run.fieldErrs += int64(len(ex.Errors))
		if !dup {
			res.Links, res.Anchors = d.pageLinks(old.Source, wire.MergeLinks(ex.Links, ex.OutLinks, ex.Anchors, wire.MaxResultLinks))
		}
		if ex.JSOnly && !p.Rendered {
			res.JSOnly, res.Mappings = true, ex.Mappings
		}
	}
	nb, err := json.Marshal(&res)
	if err != nil {
		return false, false, fmt.Errorf("dispatcher: result of %s: %w", p.Key, err)
	}
	if bytes.Equal(nb, blob) {
		return false, true, nil
	}
	if _, err := d.st.conn.ExecContext(ctx, `UPDATE urls SET result = ?, found = ? WHERE key = ?`, nb, b2i(len(res.Fields) > 0), key); err != nil {
		return false, false, fmt.Errorf("dispatcher: state urls: %w", err)
	}
	return true, true, nil
}

// reapplyPages applies the pages of keys, whose cached extraction changed, to
// every record that reached them.
func (d *Dispatcher) reapplyPages(ctx context.Context, keys []int64) error {
	work, err := d.linkRecords(ctx, keys)
	if err != nil {
		return err
	}
	for _, key := range keys {
		var (
			class, etag, lastMod string
			blob                 []byte
		)
		if err := d.st.q.urlCached.QueryRowContext(ctx, key).Scan(&class, &blob, &etag, &lastMod); err != nil {
			return fmt.Errorf("dispatcher: state urls: %w", err)
		}
		res, err := d.results.decode(key, blob)
		if err != nil {
			return fmt.Errorf("dispatcher: state: cached extraction: %w", err)
		}
		d.run.reapplied++
		for _, it := range work[key] {
			it.res = res
			if res.JSOnly {
				it.late, it.lateKey = true, key
			}
			d.work = append(d.work, it)
		}
		if err := d.drainWork(ctx); err != nil {
			return err
		}
	}
	return nil
}

// refetchUnkept queues again the pages fetched well before and not
// re-extracted (not kept) that an incomplete record reached: their
// extraction under the new mappings is not known.
func (d *Dispatcher) refetchUnkept(ctx context.Context, done map[int64]bool) error {
	rows, err := d.st.conn.QueryContext(ctx, `SELECT u.key, u.depth, u.result FROM urls u
		WHERE u.state = ? AND u.class = '' AND u.result IS NOT NULL
		AND EXISTS (SELECT 1 FROM links l JOIN records r ON r.seq = l.rec WHERE l.url = u.key AND r.complete = 0)`, stateDone)
	if err != nil {
		return fmt.Errorf("dispatcher: state urls: %w", err)
	}
	type stale struct {
		key   int64
		depth int
		url   string
	}
	var todo []stale
	for rows.Next() {
		var s stale
		var blob []byte
		if err := rows.Scan(&s.key, &s.depth, &blob); err != nil {
			rows.Close()
			return fmt.Errorf("dispatcher: state urls: %w", err)
		}
		if done[s.key] {
			continue
		}
		var res cachedResult
		if json.Unmarshal(blob, &res) != nil || res.Redirect != "" {
			continue
		}
		// The task's URL: the first of the redirects on its host, else
		// the page's own.
		s.url = res.Source
		if len(res.Via) > 0 {
			s.url = res.Via[0]
		}
		if urlKey(s.url) == s.key {
			todo = append(todo, s)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: state urls: %w", err)
	}
	for _, s := range todo {
		// Fetched whole: a 304 would stand for the old extraction.
		if _, err := d.st.conn.ExecContext(ctx, `UPDATE urls SET etag = '', last_modified = '' WHERE key = ?`, s.key); err != nil {
			return fmt.Errorf("dispatcher: state urls: %w", err)
		}
		queued, err := d.requeueDone(ctx, s.key, s.url, s.depth)
		if err != nil {
			return err
		}
		if queued {
			d.run.refetched++
		}
	}
	return nil
}

// remapTotals is Summary.Remap: the crawl's counts, across its
// processes.
func (d *Dispatcher) remapTotals() Remap {
	return Remap{Changed: d.total(&d.run.remaps) > 0, Reextracted: d.total(&d.run.reextracted),
		Applied: d.total(&d.run.reapplied), Refetched: d.total(&d.run.refetched)}
}
