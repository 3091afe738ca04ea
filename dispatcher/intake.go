package dispatcher

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"backfill/cluster"
	"backfill/etl"
	"backfill/fetch"
	"backfill/linkscore"
	"backfill/wire"
)

// maxLinks bounds the links taken from one page.
const maxLinks = 2000

// recCacheCap bounds the records kept decoded in memory between batches.
const recCacheCap = 4096

// cachedResult is what the seen store keeps of a fetched page: enough to
// apply it to a record that reaches the page later, without a second fetch.
type cachedResult struct {
	Source string       `json:"s"`
	Fields []wire.Field `json:"f,omitempty"`
	Links  []string     `json:"l,omitempty"`
	// Anchors are the anchor texts of Links, by index (wire.Link.Text),
	// up to the last link that has one; the frontier's cues compare them
	// with what a record knows (score.go).
	Anchors []string `json:"a,omitempty"`
	// A page whose HTML was a JavaScript shell (wire.Result.JSOnly) keeps
	// the sign and the mappings that matched it, so that a record reaching
	// it later can still have it rendered (see renderLate).
	JSOnly   bool     `json:"j,omitempty"`
	Mappings []string `json:"m,omitempty"`
	// Via lists the URLs requested before Source on its host (redirects
	// the supervisor followed there). Redirect is the target of a page
	// that sent its client to another host, and Hops the redirects
	// across hosts that target is reached by (redirect.go).
	Via      []string `json:"v,omitempty"`
	Redirect string   `json:"r,omitempty"`
	Hops     int      `json:"h,omitempty"`
	// Member fetched the page, under the public key Key ("" on a
	// plaintext cluster): provenance for every value the page gives.
	// Task is the address the page was asked for, when it is not Source
	// (the member followed redirects, or says so): what a purge fetches
	// again (purge.go).
	Member string `json:"w,omitempty"`
	Key    string `json:"k,omitempty"`
	Task   string `json:"u,omitempty"`
	// TLS is the certificate problem of the page's connection, fetched
	// anyway under --insecure-tls (wire.Result.TLSError).
	TLS string `json:"t,omitempty"`

	infos []linkInfo // the links' cue inputs, made on first use (score.go)
}

// applyItem is a page to apply to a record at a depth. late is set when
// the page is a cached shell that was never rendered: once applied, it may
// need rendering for this record.
type applyItem struct {
	rec     int64 // the record's seq
	key     int64 // the page, as the record reached it (its urlKey)
	res     *cachedResult
	depth   int
	via     []string // the redirects across hosts by which the record reached the page
	lateKey int64    // the page, when late is set
	late    bool
}

// drainWork applies queued (page, record) pairs until none is left. Applying
// a page may attach new links, which may queue more work.
func (d *Dispatcher) drainWork(ctx context.Context) error {
	for len(d.work) > 0 {
		it := d.work[0]
		d.work[0] = applyItem{}
		d.work = d.work[1:]
		if err := d.apply(ctx, it); err != nil {
			return err
		}
		if it.late {
			if err := d.renderLate(ctx, it.lateKey, it.res); err != nil {
				return err
			}
		}
	}
	d.work = nil
	return nil
}

// apply merges one page into one record: attribution, conflict
// resolution, completion, and the page's links for an incomplete record.
// A page whose match key disagrees with the record gives it no values,
// but its links are followed like any other page's: a page about someone
// else (a colleague's profile, a team page, a co-author list) is often
// the way to the record's own. They are queued like the links of an
// agreeing page, at the same depth and priority: a task is shared by every
// record that reaches it, so a lower priority for one record's sake would
// hold it back for the others, and once the record completes its queued
// tasks are dropped anyway.
func (d *Dispatcher) apply(ctx context.Context, it applyItem) error {
	r, err := d.loadRec(ctx, it.rec)
	if err != nil {
		return err
	}
	if it.res.Redirect != "" {
		return d.followRedirect(ctx, r, it)
	}
	defer d.applied(it, r)
	ok, why := attributable(r, it.res, it.depth)
	if !ok {
		// The page describes someone else: no values. The refusal is
		// kept for the record's outcome (outcomes.go).
		d.learn(it, r, false)
		if r.complete {
			return nil
		}
		if err := d.refuse(ctx, r, it, why); err != nil {
			return err
		}
		if it.depth+1 > d.cfg.Depth {
			return d.noteBeyond(ctx, r, it.res.Links, it.depth+1)
		}
		d.run.disagreeing++
		d.tried(it, r)
		return d.attachPage(ctx, r, it, linkscore.SourceRefused, it.depth+1)
	}
	wasPartial := !r.complete && len(r.filled) > 0
	var fresh []string // target fields the page may fill for the first time
	for _, f := range it.res.Fields {
		if _, ok := r.filled[f.Name]; !ok && r.isTarget(f.Name) && !slices.Contains(fresh, f.Name) {
			fresh = append(fresh, f.Name)
		}
	}
	gave := gives(r, it.res)
	d.learn(it, r, gave)
	merge(r, it.res, it.depth, it.via, time.Now().UTC())
	for _, name := range fresh {
		if _, ok := r.filled[name]; ok {
			d.led.filled[name]++
		}
	}
	d.logApplied(ctx, r, it)
	if r.complete {
		return nil // a late page may still improve provenance, nothing more
	}
	if r.isComplete() {
		r.complete = true
		r.markDirty()
		d.nComplete++
		d.run.completed++
		d.settled.add(r.id, r.filled)
		d.log.Debug("record complete", "record", r.id, "url", it.res.Source, "fields", len(r.filled), "depth", it.depth)
		if wasPartial {
			d.nPartial--
		}
		if err := d.putRec(ctx, r); err != nil {
			return err
		}
		return d.dropTasks(ctx, r.seq)
	}
	if !wasPartial && len(r.filled) > 0 {
		d.nPartial++
	}
	if it.depth+1 > d.cfg.Depth {
		return d.noteBeyond(ctx, r, it.res.Links, it.depth+1)
	}
	source := linkscore.SourceNeutral
	if gave {
		source = linkscore.SourceGave
	}
	d.tried(it, r)
	return d.attachPage(ctx, r, it, source, it.depth+1)
}

// resultBatch bounds the results commitResults takes at once: their
// outcomes go to the seen store in one statement and their records are
// read in another, instead of two statements a result.
const resultBatch = 64

// doneResult is one result commitResults applies: its task, the cached
// extraction it makes and the row it writes to the seen store.
type doneResult struct {
	t             *task
	r             *wire.Result
	res           *cachedResult
	blob          []byte
	at            int64
	etag, lastMod string
	member        any    // the answering key's members row (memberRow), nil on a plaintext cluster
	key           string // the answering key
}

// result is a Result and who sent it.
type result struct {
	r    *wire.Result
	from wire.Peer
}

// commitResults applies the Results that answer the current lease of their
// tasks, from the member that holds it; a late answer is only counted, a
// forged one quarantines its sender (prepareResult). Their pages go to the
// seen store first, all at once; then each result's records, in order, get
// its values and links.
func (d *Dispatcher) commitResults(ctx context.Context, rs []result, now time.Time) error {
	done := make([]doneResult, 0, len(rs))
	quarantined := d.members.Quarantine().Len()
	for _, r := range rs {
		dr, ok, err := d.prepareResult(ctx, r.r, r.from, now)
		if err != nil {
			return err
		}
		if ok {
			done = append(done, dr)
		}
	}
	if d.members.Quarantine().Len() != quarantined {
		done = d.dropQuarantined(done)
	}
	if err := d.markDone(ctx, done); err != nil {
		return err
	}
	if err := d.learnFailed(ctx, done); err != nil {
		return err
	}
	work, err := d.resultRecords(ctx, done)
	if err != nil {
		return err
	}
	for _, dr := range done {
		if dr.r.Class != "" {
			d.noteKids(dr.t.depth, 0, 0)
			continue
		}
		kids, here := d.kidsN, d.kidsHere
		d.kidsHost = dr.t.host
		for _, it := range work[dr.t.key] {
			it.res = dr.res
			d.work = append(d.work, it)
		}
		if err := d.drainWork(ctx); err != nil {
			return err
		}
		if err := d.retryRender(ctx, dr.t, dr.r); err != nil {
			return err
		}
		d.kidsHost = ""
		d.noteKids(dr.t.depth, d.kidsN-kids, d.kidsHere-here)
	}
	return d.rescore(ctx, now)
}

// prepareResult judges a Result from from against its task's lease
// (cluster.Tokens.Judge), releases its task and makes what the seen store
// keeps of the page; ok is false for an answer not taken. A late answer
// (to a lease its sender held: of an earlier dispatcher process, or
// expired) is adopted when its task is still queued.
func (d *Dispatcher) prepareResult(ctx context.Context, r *wire.Result, from wire.Peer, now time.Time) (doneResult, bool, error) {
	t, ok, err := d.judgeResult(r, from, now)
	if !ok {
		return doneResult{}, false, err
	}
	r.Supervisor = t.lease.Member // the name it registered with, not the one it wrote
	if requested(r.Class) {
		d.run.requests += 1 + int64(len(r.Chain))
	}
	d.w.notePace(t.host, r, now)
	if r.Class == wire.ClassDeferred {
		// Handed back unfetched until its host is ready (the pace just
		// noted): queued again, no attempt spent.
		d.run.deferred++
		return doneResult{}, false, d.requeue(ctx, t)
	}
	if t.check != nil {
		// A re-check (recheck.go): compared, never kept.
		d.release(t)
		d.checks.out--
		return doneResult{}, false, d.checked(ctx, t, r, from, now)
	}
	if d.cfg.RecheckShare > 0 {
		d.checks.record(from.Key, t.lease.Member).all++ // (probation: see room)
	}
	d.release(t)
	d.pagesLeft.add(t.host, t.depth, -1)
	d.answeredN++
	d.noteResponse(r, now)
	d.countRedirects(t, r)
	res, cached, err := d.resultOf(ctx, t, r, from, now)
	if err != nil {
		return doneResult{}, false, err
	}
	if len(r.FieldErrs) > 0 {
		d.run.fieldErrs += int64(len(r.FieldErrs))
		d.log.Debug("extraction errors", "url", t.url, "host", t.host, "errors", r.FieldErrs)
	}
	dr, err := d.keptResult(ctx, t, r, from, res, cached, now)
	if err != nil {
		return doneResult{}, false, err
	}
	return dr, true, nil
}

// judgeResult judges r against its task's lease: t is the task it
// answers, adopted if late, and ok is false for an answer not taken (a
// forged one quarantines its sender, err if that fails).
func (d *Dispatcher) judgeResult(r *wire.Result, from wire.Peer, now time.Time) (t *task, ok bool, err error) {
	if d.members.Quarantined(from) {
		// Quarantined by an earlier result of its batch.
		d.members.Refuse(from, r.Supervisor, now)
		return nil, false, nil
	}
	key, ok := parseTaskID(r.TaskID)
	if ok {
		t = d.w.leased[key]
	}
	var held cluster.Lease
	if t != nil {
		held = t.lease
	}
	switch d.tokens.Judge(from, cluster.Label(r.Supervisor), r.TaskID, r.Lease, held) {
	case cluster.Late:
		// Its sender held the task once: taken while the task waits
		// (adopt), only counted when it is out again or done.
		if t == nil && ok {
			t = d.adopt(key, cluster.Lease{Token: r.Lease, Member: cluster.Label(r.Supervisor), Key: from.Key})
		} else {
			t = nil
		}
		if t == nil {
			d.run.late++
			return nil, false, nil
		}
	case cluster.Forged:
		why := "it answered a task leased to no one"
		switch {
		case held.Held() && held.Key != from.Key:
			why = "it answered a task leased to another member"
		case held.Held():
			why = "it answered under a lease token it was not given"
		}
		return nil, false, d.forged(from, r.Supervisor, why, now)
	}
	return t, true, nil
}

// resultOf makes what the seen store keeps of t's answer r: the page's
// fields and links, the cached extraction a 304 stands for (cached, nil
// if none), or the failure, counted and logged.
func (d *Dispatcher) resultOf(ctx context.Context, t *task, r *wire.Result, from wire.Peer, now time.Time) (*cachedResult, *cached304, error) {
	res := &cachedResult{Source: t.url, Member: t.lease.Member, Key: from.Key}
	if r.FinalURL != "" {
		if n, err := etl.NormalizeURL(r.FinalURL); err == nil {
			res.Source = n
		}
	}
	var cached *cached304
	if r.Class == "" && r.NotModified {
		c, err := d.notModified304(ctx, t, r)
		if err != nil {
			return nil, nil, err
		}
		if c != nil {
			res, cached = c.res, c
		}
	}
	switch {
	case r.Class == "" && r.Redirect != "":
		res.Via = r.Chain
		d.redirectResult(t, r, res)
	case r.Class == "" && cached == nil:
		if err := d.pageResult(ctx, t, r, from, res); err != nil {
			return nil, nil, err
		}
	case r.Class != "":
		if err := d.failedResult(ctx, t, r, now); err != nil {
			return nil, nil, err
		}
	}
	return res, cached, nil
}

// pageResult fills res from the page t fetched: its fields, its links
// (none for a copy of a page seen before), and the sample to re-check.
func (d *Dispatcher) pageResult(ctx context.Context, t *task, r *wire.Result, from wire.Peer, res *cachedResult) error {
	d.run.pages++
	res.Via = r.Chain
	if res.TLS = r.TLSError; res.TLS != "" {
		d.run.insecureTLS++
	}
	for _, f := range r.Fields {
		if f.Name == "" || len(f.Values) == 0 {
			continue
		}
		res.Fields = append(res.Fields, f)
	}
	res.Links, res.Anchors = d.pageLinks(t.url, r.Links)
	d.score.notePage(t.host)
	if r.JSOnly && !t.render {
		res.JSOnly, res.Mappings = true, r.Mappings
	}
	if d.cfg.RecheckShare > 0 && len(res.Fields) > 0 {
		d.sample(t, r, res.Fields, from)
	}
	dup, err := d.contentSeen(ctx, t, r)
	if err != nil {
		return err
	}
	if dup {
		// Its values still go to the records (pages on one template
		// can look alike and still name different people), but the
		// links were expanded from the first page already. The cached
		// result keeps none, so a record reaching this URL later does
		// not expand them either.
		res.Links, res.Anchors = nil, nil
	}
	return nil
}

// failedResult counts, notes and logs t's failure r.
func (d *Dispatcher) failedResult(ctx context.Context, t *task, r *wire.Result, now time.Time) error {
	d.run.errs[r.Class]++
	if r.Class == string(fetch.ClassBlocked) {
		d.run.blocked[fetch.RefusalOf(r.Error)]++
	}
	d.led.failed(ErrorNote{At: now, URL: t.url, Host: t.host, Class: r.Class, Status: r.Status, Error: r.Error, Supervisor: r.Supervisor})
	d.log.Debug("task failed", "url", t.url, "host", t.host, "class", r.Class, "status", r.Status, "error", r.Error, "supervisor", r.Supervisor)
	return d.logFailed(ctx, t.key, t.url, r.Class, r.Error)
}

// keptResult is the doneResult of t's answer r, with res as the seen
// store keeps it, the member's row, the time and the validators.
func (d *Dispatcher) keptResult(ctx context.Context, t *task, r *wire.Result, from wire.Peer, res *cachedResult, cached *cached304, now time.Time) (doneResult, error) {
	if cached == nil && res.Source != t.url {
		res.Task = t.url
	}
	dr := doneResult{t: t, r: r, res: res, key: from.Key}
	if from.Key != "" {
		id, err := d.memberRow(ctx, from.Key, t.lease.Member)
		if err != nil {
			return doneResult{}, err
		}
		dr.member = id
	}
	if r.Class == "" {
		var err error
		if dr.blob, err = json.Marshal(res); err != nil {
			return doneResult{}, fmt.Errorf("dispatcher: result of %s: %w", t.url, err)
		}
	}
	at := r.FetchedAt
	if at.IsZero() {
		at = now
	}
	dr.at = at.UnixNano()
	if r.Class == "" {
		var etag, lastMod string
		if cached != nil {
			etag, lastMod = cached.etag, cached.lastModified
		}
		// The validators of this answer (a 304 need not repeat them).
		dr.etag, dr.lastMod = cmp.Or(validator(r.ETag), etag), cmp.Or(validator(r.LastModified), lastMod)
	}
	// A failure keeps no validators: there is no cached extraction for a
	// 304 to stand for.
	return dr, nil
}

// dropQuarantined takes out of done the answers of keys quarantined
// while their batch was prepared (a re-check's verdict, recheck.go):
// their tasks go back in the queue, to be fetched by others.
func (d *Dispatcher) dropQuarantined(done []doneResult) []doneResult {
	kept := done[:0]
	for _, dr := range done {
		if !d.members.Quarantined(wire.Peer{Key: dr.key}) {
			kept = append(kept, dr)
			continue
		}
		dr.t.lease = cluster.Lease{}
		d.queuedN++
		d.w.add(dr.t, true)
	}
	return kept
}

// learnFailed tells the frontier's model that the failed pages of done
// gave the records that reached them nothing.
func (d *Dispatcher) learnFailed(ctx context.Context, done []doneResult) error {
	for _, dr := range done {
		if dr.r.Class == "" {
			continue
		}
		rows, err := query(ctx, d.st.q.urlRecords, dr.t.key)
		if err != nil {
			return err
		}
		var recs []int64
		for rows.Next() {
			var rec int64
			var depth int
			if err := rows.Scan(&rec, &depth); err != nil {
				rows.Close()
				return fmt.Errorf("dispatcher: state links: %w", err)
			}
			recs = append(recs, rec)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("dispatcher: state links: %w", err)
		}
		d.score.failedFor(dr.t.key, recs)
	}
	return nil
}

// requested reports whether a task answered with class reached its host:
// not when robots.txt, the blacklist or the address guard refused it, nor
// when its name did not resolve.
func requested(class string) bool {
	switch fetch.Class(class) {
	case wire.ClassDeferred:
		return false
	case fetch.ClassRobots, fetch.ClassRobotsUnavailable, fetch.ClassBlocked, fetch.ClassBlacklisted,
		fetch.ClassURL, fetch.ClassDNS, fetch.ClassDNSTimeout, fetch.ClassCanceled:
		return false
	}
	return true
}

// markDone writes the pages' outcomes to the seen store, rowChunk rows a
// statement: a failed fetch counts in attempts and a good one clears
// them (retry.go); a failed page keeps its URL, since a rerun may fetch
// it again.
func (d *Dispatcher) markDone(ctx context.Context, done []doneResult) error {
	for _, size := range chunkSizes(len(done), rowChunk) {
		part := done[:size]
		done = done[size:]
		st, err := d.st.stmtN(ctx, "urlDoneN", size, func(n int) string {
			return `UPDATE urls SET state = 2, last_crawled = v.column1, class = v.column2, status = v.column3, result = v.column4,
				etag = v.column5, last_modified = v.column6,
				attempts = CASE WHEN v.column2 = '' THEN 0 ELSE urls.attempts + 1 END,
				url = CASE WHEN v.column2 = '' THEN NULL ELSE urls.url END, found = v.column8, member = v.column9
				FROM (VALUES ` + placeholders(n, "(?, ?, ?, ?, ?, ?, ?, ?, ?)") + `) AS v WHERE urls.key = v.column7`
		})
		if err != nil {
			return err
		}
		args := make([]any, 0, 9*size)
		for _, dr := range part {
			found := dr.r.Class == "" && len(dr.res.Fields) > 0 // the "f" of its blob
			args = append(args, dr.at, dr.r.Class, dr.r.Status, dr.blob, dr.etag, dr.lastMod, dr.t.key, b2i(found), dr.member)
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("dispatcher: state urls: %w", err)
		}
	}
	return nil
}

// resultRecords reads which records reached each good page of done, and
// at what depth, in record order: rowChunk pages a statement.
func (d *Dispatcher) resultRecords(ctx context.Context, done []doneResult) (map[int64][]applyItem, error) {
	keys := make([]int64, 0, len(done))
	for _, dr := range done {
		if dr.r.Class == "" {
			keys = append(keys, dr.t.key)
		}
	}
	return d.linkRecords(ctx, keys)
}

// linkRecords reads which records reached each page of pages, and at
// what depth, in record order: rowChunk pages a statement.
func (d *Dispatcher) linkRecords(ctx context.Context, pages []int64) (map[int64][]applyItem, error) {
	keys := make([]any, len(pages))
	for i, k := range pages {
		keys[i] = k
	}
	work := make(map[int64][]applyItem, len(keys))
	for _, size := range chunkSizes(len(keys), rowChunk) {
		part := keys[:size]
		keys = keys[size:]
		st, err := d.st.stmtN(ctx, "urlRecordsN", size, func(n int) string {
			return `SELECT url, rec, depth, via FROM links WHERE url IN (` + placeholders(n, "?") + `) ORDER BY url, rec`
		})
		if err != nil {
			return nil, err
		}
		rows, err := st.QueryContext(ctx, part...)
		if err != nil {
			return nil, fmt.Errorf("dispatcher: state links: %w", err)
		}
		for rows.Next() {
			var key int64
			var it applyItem
			var via sql.NullString
			if err := rows.Scan(&key, &it.rec, &it.depth, &via); err != nil {
				rows.Close()
				return nil, fmt.Errorf("dispatcher: state links: %w", err)
			}
			if via.Valid {
				if err := json.Unmarshal([]byte(via.String), &it.via); err != nil {
					rows.Close()
					return nil, fmt.Errorf("dispatcher: state links: redirect chain of record %d: %w", it.rec, err)
				}
			}
			it.key = key
			work[key] = append(work[key], it)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("dispatcher: state links: %w", err)
		}
	}
	return work, nil
}
