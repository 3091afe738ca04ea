package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"backfill/etl"
	"backfill/fetch"
	"backfill/linkscore"
	"backfill/wire"
)

// A supervisor makes a redirect's next request itself only on the page's
// own host; a redirect to another host comes back as the page's answer
// (wire.Result.Redirect), because the target is a request to that host,
// under its owner's politeness (robots.txt read first, its delay, one
// request at a time). The dispatcher then treats the target like a link
// of the page, but at the page's own depth: every record that reached the
// page reaches the target, through the same routing, filters (the
// blacklist first: a blacklisted name is neither looked up nor fetched)
// and seen store as any URL. The page's cached extraction keeps the
// target, so a record that reaches the page later is sent on too.
//
// What a record reached through redirects carries their chain (the
// links.via column, see schemaV6), and the values found there carry it
// to the export (store.Value.Via). A chain is held to the fetcher's
// redirect limit across hosts (urls.hops counts the hops to a queued URL;
// the supervisor counts the hops it makes on one host against what is
// left), and a target the record's chain went through already is a loop.

// maxRedirects is the longest redirect chain a page may take.
func (d *Dispatcher) maxRedirects() int {
	if d.cfg.MaxRedirects > 0 {
		return d.cfg.MaxRedirects
	}
	return fetch.DefaultMaxRedirects
}

// redirectResult fills what the seen store keeps of a page that
// redirected to another host: the target, the chain on the page's host
// and the hops taken, or nothing when the target cannot be followed
// (counted by reason).
func (d *Dispatcher) redirectResult(t *task, r *wire.Result, res *cachedResult) {
	target, err := etl.NormalizeURL(r.Redirect)
	if err != nil {
		d.run.redirects[wire.RedirectLoop]++
		d.log.Debug("redirect to an unusable URL not followed", "url", t.url, "target", r.Redirect, "error", err)
		return
	}
	hops := t.hops + len(r.Chain) + 1
	switch {
	case hops > d.maxRedirects():
		d.run.redirects[wire.RedirectTooMany]++
		d.log.Debug("redirect not followed: too many", "url", t.url, "target", target, "hops", hops)
		return
	case d.filter.check(target, 0) == FilterBlacklisted:
		d.run.redirects[wire.RedirectBlacklist]++
		d.log.Debug("redirect not followed: blacklisted host", "url", t.url, "target", target)
		return
	case target == res.Source || slices.Contains(r.Chain, target):
		d.run.redirects[wire.RedirectLoop]++
		return
	}
	d.run.redirects[wire.RedirectFollowed]++
	res.Redirect, res.Hops = target, hops
}

// followRedirect sends record r on from a page that redirected to another
// host (it.res.Redirect) at the page's depth: the target is attached to
// it with the chain that led there.
func (d *Dispatcher) followRedirect(ctx context.Context, r *recState, it applyItem) error {
	if r.complete {
		return nil
	}
	via := append(slices.Clip(it.via), it.res.Via...)
	via = append(via, it.res.Source)
	if slices.Contains(via, it.res.Redirect) {
		d.run.redirects[wire.RedirectLoop]++
		return nil
	}
	return d.attachVia(ctx, it.res.Redirect, r, it.depth, via, it.res.Hops, it.key)
}

// attachVia attaches one URL, reached through redirects (via, first to
// last; hops across hosts) from the page from, to the record r at depth:
// as attachSome attaches a page's links, but one at a time and with the
// chain kept on the link.
func (d *Dispatcher) attachVia(ctx context.Context, norm string, r *recState, depth int, via []string, hops int, from int64) error {
	viaText, err := json.Marshal(via)
	if err != nil {
		return fmt.Errorf("dispatcher: redirect chain: %w", err)
	}
	key := urlKey(norm)
	known, err := d.lookupURLs(ctx, []int64{key}, r.seq)
	if err != nil {
		return err
	}
	// The target stands for the page that sent the record there: it is
	// remembered with that link's cue and source (score.go).
	info := d.infoOf(norm)
	cue, parent := d.ownCue(r, norm, info, depth, linkscore.SourceNeutral), int64(0)
	if e := d.score.trail[trailKey{from, r.seq}]; e != nil {
		cue, parent = e.cue, e.parent
	}
	d.score.remember(trailKey{key, r.seq}, cue, parent)
	d.score.finish(trailKey{from, r.seq}) // the target takes its place
	v := d.score.model.Score(cue).Value
	if k, ok := known[key]; ok {
		if k.recDepth.Valid && int(k.recDepth.Int64) <= depth {
			return nil // already reached by this record, no farther away
		}
		if err := d.insertVia(ctx, key, r.seq, depth, viaText); err != nil {
			return err
		}
		if err := d.revisit(ctx, key, norm, r.seq, depth, via, k); err != nil {
			return err
		}
		if k.state == stateQueued || d.w.queued[key] != nil {
			return d.addCue(ctx, key, k.level, r.seq, cue, v)
		}
		return nil
	}
	host, domain := hostDomain(norm)
	if host == "" {
		return nil
	}
	t := &task{key: key, url: norm, host: host, domain: domain, depth: depth, hops: hops,
		matched: info.matched, priority: info.priority, render: d.cfg.Mappings.NeedsRender(norm),
		value: v, level: levelOf(v), cues: []taskCue{{rec: r.seq, cue: cue, value: v}}}
	hc, err := d.hostCount(ctx, host)
	if err != nil {
		return err
	}
	// A redirect stands for the page that sent it: it is charged to the
	// budgets, never refused by them.
	hc.n++
	d.hostDirty(hc)
	r.queued++
	r.markDirty()
	d.nextSeq++
	t.seq = rankedSeq(hc.n, d.nextSeq)
	if err := d.insertURLs(ctx, []*task{t}); err != nil {
		return err
	}
	if err := d.insertVia(ctx, key, r.seq, depth, viaText); err != nil {
		return err
	}
	d.queuedN++
	d.pagesLeft.add(t.host, t.depth, 1)
	d.w.add(t, false)
	return nil
}

// insertVia records that record rec reached the URL key at depth through
// the redirects via (JSON).
func (d *Dispatcher) insertVia(ctx context.Context, key, rec int64, depth int, via []byte) error {
	_, err := exec(ctx, d.st.q.linkVia, key, rec, depth, string(via))
	return err
}
