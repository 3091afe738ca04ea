package dispatcher

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"backfill/linkscore"
)

// The frontier's score (see "Frontier order" in doc.go): each link a
// record reaches gets a cue (linkscore.Cue) and the run's model
// (linkscore.Model) says what it is expected to give the record; a task
// is worth the sum over the records that want it, and its level orders
// the frontier. What the pages give is fed back into the model as they
// come: which links gave their record a value (direct), and which led to
// one through their own links (onward, credited along the trail of pages
// that led there).

// Reasons a link is pruned for a record: not followed because it cannot
// pay. The keys of Summary.Pruned.
const (
	// PruneLastDepth: at the depth limit, and no mapping that runs on its
	// URL declares a field the record lacks, so its page can give the
	// record neither a value nor a link to follow.
	PruneLastDepth = "last-depth"
	// PruneBarrenHost: its host gave no record a value in its first
	// barrenPages pages, and the link does not name the record.
	PruneBarrenHost = "barren-host"
	// PruneUnlikely: the model, on enough evidence, expects less of it
	// than linkscore.PruneBelow.
	PruneUnlikely = "unlikely"
)

const (
	// levelsPerUnit and maxLevel quantize a task's value (its records'
	// expected values, added up) into the level that orders the
	// frontier: coarse enough that tasks of a level go round-robin over
	// hosts (rankedSeq), fine enough that a page likely to give a value
	// goes before one unlikely to.
	levelsPerUnit = 4
	maxLevel      = 15

	// barrenPages is how many pages of a host may give no record a value
	// before its links are followed only when they name the record.
	barrenPages = 20

	// trailCap bounds the links remembered for learning (their cue and
	// the page they were found on); yieldCap the hosts whose yield is
	// kept. Past them the oldest-looking half goes: the model only learns
	// from fewer links.
	trailCap = 1 << 16
	yieldCap = 1 << 16

	// rescoreEvery is how often the window's tasks are scored again under
	// what the model has learned since.
	rescoreEvery = time.Second
)

// levelOf is the level of a task worth v.
func levelOf(v float64) int { return min(maxLevel, max(0, int(v*levelsPerUnit))) }

// levelValue is the least value of a task of level l: what a task read
// back from the state, whose cues are not in memory, is taken to be worth.
func levelValue(l int) float64 { return float64(l) / levelsPerUnit }

// taskCue is what one record expects of a task.
type taskCue struct {
	rec   int64
	cue   linkscore.Cue
	value float64
}

// trailKey is a link a record followed: the URL's key and the record's
// seq.
type trailKey struct{ url, rec int64 }

// trailEntry is what is remembered of a followed link for learning: its
// cue, the page it was found on (0: the record's own link), and what was
// observed of it: its direct outcome, whether its page's links were
// followed for the record (tried), how many of those are not done with
// yet (open), whether a value was found through them (led), and whether
// it is done with (done: its page applied or failed, and its links, if
// followed, done with in turn).
type trailEntry struct {
	cue    linkscore.Cue
	parent int64
	open   int
	direct bool
	tried  bool
	led    bool
	done   bool
}

// hostYield is how many pages of a host were fetched and whether any gave
// a record a value.
type hostYield struct {
	pages int
	gave  bool
}

// scoring is the frontier's score state: the model and what it learns
// from. Owned by the Dispatcher, used under its mutex.
//
// A link that gave its record nothing (directly, or through its links)
// is told to the model only once the record has got a value from another
// one (pending until then): a crawl visits the links of many records
// side by side, and a record's one good link among many alike may well
// come last for each of them, after all the others have failed. Told as
// they come, those failures would teach the model that links like them
// never pay before the first of them does, and prune the very links the
// records need. A record that never gets a value teaches nothing of its
// failures.
type scoring struct {
	model    *linkscore.Model
	trail    map[trailKey]*trailEntry
	yield    map[string]*hostYield
	pending  map[int64][]failure // by record
	npending int
	rescored time.Time
}

// failure is a link's outcome not told to the model yet: its cue, and
// whether it failed to lead on (onward) or to give (direct).
type failure struct {
	cue    linkscore.Cue
	onward bool
}

// pendingCap bounds the failures waiting for their record's first value;
// past it, the records' failures that wait longest are forgotten (the
// model learns from fewer links).
const pendingCap = 1 << 16

func newScoring() *scoring {
	return &scoring{model: linkscore.NewModel(), trail: make(map[trailKey]*trailEntry), yield: make(map[string]*hostYield),
		pending: make(map[int64][]failure)}
}

// failed keeps a failure of record rec's link until the record gets a
// value (see scoring).
func (s *scoring) failed(rec int64, c linkscore.Cue, onward bool) {
	if s.npending >= pendingCap {
		for r, fs := range s.pending { // map order: about random
			delete(s.pending, r)
			if s.npending -= len(fs); s.npending < pendingCap/2 {
				break
			}
		}
	}
	s.pending[rec] = append(s.pending[rec], failure{cue: c, onward: onward})
	s.npending++
}

// gained tells the model the failures of record rec's links, now that
// another link gave it a value.
func (s *scoring) gained(rec int64) {
	for _, f := range s.pending[rec] {
		if f.onward {
			s.model.Onward(f.cue, false)
		} else {
			s.model.Direct(f.cue, false)
		}
	}
	s.npending -= len(s.pending[rec])
	delete(s.pending, rec)
}

// remember keeps a followed link's cue and source, unless the record
// followed it before, and counts it as open on its source's entry.
func (s *scoring) remember(k trailKey, cue linkscore.Cue, parent int64) {
	if s.trail[k] != nil {
		return
	}
	if parent != 0 {
		if p := s.trail[trailKey{parent, k.rec}]; p != nil {
			p.open++
		}
	}
	if len(s.trail) >= trailCap {
		n := 0
		for key := range s.trail { // map order: about random
			delete(s.trail, key)
			if n++; n >= trailCap/2 {
				break
			}
		}
	}
	s.trail[k] = &trailEntry{cue: cue, parent: parent}
}

// notePage counts a page of host fetched.
func (s *scoring) notePage(host string) {
	y := s.yield[host]
	if y == nil {
		if len(s.yield) >= yieldCap {
			n := 0
			for h := range s.yield {
				delete(s.yield, h)
				if n++; n >= yieldCap/2 {
					break
				}
			}
		}
		y = &hostYield{}
		s.yield[host] = y
	}
	y.pages++
}

// noteGave records that a page of host gave a record a value.
func (s *scoring) noteGave(host string) {
	if y := s.yield[host]; y != nil {
		y.gave = true
	}
}

// barren reports that host gave no record a value in barrenPages pages.
func (s *scoring) barren(host string) bool {
	y := s.yield[host]
	return y != nil && !y.gave && y.pages >= barrenPages
}

// linkInfo is what the cues of a page's link need of it, worked out once
// per page for every record it is applied to.
type linkInfo struct {
	address, anchor string   // folded (linkscore.Address, linkscore.Fold)
	fields          []string // the fields of the mappings that run on it (etl.Set.Applies)
	host            string
	matched         bool // a mapping's url_patterns match it, with priority
	priority        int
}

// infoOf is what the cues of link norm need of it, its address and
// anchor aside (linkInfos and ownCue fold the address when a record's
// words are to be looked for in it).
func (d *Dispatcher) infoOf(norm string) linkInfo {
	host, _ := splitURL(norm)
	matched, prio, fields := d.cfg.Mappings.Applies(norm)
	return linkInfo{fields: fields, host: host, matched: matched, priority: prio}
}

// linkInfos are the infos of res's links, made on first use.
func (d *Dispatcher) linkInfos(res *cachedResult) []linkInfo {
	if res.infos != nil || len(res.Links) == 0 {
		return res.infos
	}
	res.infos = make([]linkInfo, len(res.Links))
	for i, l := range res.Links {
		res.infos[i] = d.infoOf(l)
		res.infos[i].address = linkscore.Address(l)
		if i < len(res.Anchors) && res.Anchors[i] != "" {
			res.infos[i].anchor = linkscore.Fold(res.Anchors[i])
		}
	}
	return res.infos
}

// lacksAny reports whether the record lacks one of fields among its
// targets.
func (r *recState) lacksAny(fields []string) bool {
	for _, f := range fields {
		if _, ok := r.filled[f]; !ok && r.isTarget(f) {
			return true
		}
	}
	return false
}

// keyWords are the words of the match keys the record knows, from its
// own values (linkscore.Words), worked out once.
func (r *recState) keyWords(fields []string) []string {
	if !r.wordsOK {
		var vals []string
		for _, f := range fields {
			if v := r.known(f, 0); v != "" {
				vals = append(vals, v)
			}
		}
		r.words, r.wordsOK = linkscore.Words(vals...), true
	}
	return r.words
}

// valueWords are the words of the values the record was given, its
// match keys aside.
func (r *recState) valueWords(keys []string) []string {
	var vals []string
	for f, v := range r.filled {
		if !slices.Contains(keys, f) {
			vals = append(vals, v.Value)
		}
	}
	return linkscore.Words(vals...)
}

// cueOf is what is known of a link (info) for the record r, found on a
// page that was source to it and had fanout links, at depth.
func (d *Dispatcher) cueOf(r *recState, keyWords, valueWords []string, info linkInfo, source linkscore.Source, fanout, depth int) linkscore.Cue {
	return linkscore.Cue{
		Match:  r.lacksAny(info.fields),
		Naming: linkscore.Name(keyWords, info.address, info.anchor),
		Values: linkscore.Holds(valueWords, info.address, info.anchor),
		Source: source,
		Fanout: linkscore.FanoutOf(fanout),
		Last:   depth >= d.cfg.Depth,
		Barren: d.score.barren(info.host),
	}
}

// ownCue is the cue of a record's own link, or of a link attached without
// a page to judge it by (a refresh's, a redirect's first): its URL norm
// only (info is infoOf's). With r nil it is any record's: Match says a
// mapping that runs on it declares a target field.
func (d *Dispatcher) ownCue(r *recState, norm string, info linkInfo, depth int, source linkscore.Source) linkscore.Cue {
	c := linkscore.Cue{Source: source, Last: depth >= d.cfg.Depth, Barren: d.score.barren(info.host)}
	if r != nil {
		c.Match = r.lacksAny(info.fields)
		c.Naming = linkscore.Name(r.keyWords(d.matchFields), linkscore.Address(norm), "")
	} else {
		for _, f := range info.fields {
			if _, ok := slices.BinarySearch(d.targetFields, f); ok {
				c.Match = true
				break
			}
		}
	}
	return c
}

// pruneWhy says why a link of cue c, estimated e, that would cost a
// request is not worth it for its record; "" when it is.
func (d *Dispatcher) pruneWhy(c linkscore.Cue, e linkscore.Estimate) string {
	switch {
	case c.Barren && c.Naming != linkscore.NameFull:
		return PruneBarrenHost
	case d.score.model.Unlikely(e):
		return PruneUnlikely
	}
	return ""
}

// pruned counts a link not followed for record r, and says so at debug
// level with what decided it.
func (d *Dispatcher) pruned(ctx context.Context, why, norm string, r *recState, depth int, c linkscore.Cue, e *linkscore.Estimate) {
	d.run.pruned[why]++
	if !d.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := []any{"url", norm, "record", r.id, "depth", depth, "reason", why, "cue", c.String()}
	if e != nil {
		attrs = append(attrs, "value", e.Value, "direct", e.Direct, "onward", e.Onward, "evidence", e.Evidence)
	}
	d.log.Debug("link pruned", attrs...)
}

// prunedRec is pruned for the record of seq rec.
func (d *Dispatcher) prunedRec(ctx context.Context, why, norm string, rec int64, depth int, c linkscore.Cue, e *linkscore.Estimate) {
	r := d.recCache[rec]
	if r == nil {
		r = &recState{seq: rec}
	}
	d.pruned(ctx, why, norm, r, depth, c, e)
}

// taken says at debug level that a link was followed for record rec, and
// what it is expected to give.
func (d *Dispatcher) taken(ctx context.Context, norm string, rec int64, depth int, c linkscore.Cue, e linkscore.Estimate) {
	if !d.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	id := ""
	if r := d.recCache[rec]; r != nil {
		id = r.id
	}
	d.log.Debug("link taken", "url", norm, "record", id, "depth", depth, "value", e.Value,
		"direct", e.Direct, "onward", e.Onward, "score_level", levelOf(e.Value), "cue", c.String())
}

// addCue adds what record rec expects of the queued task key, in the
// window or in the state only (its level there was level): the task's
// value rises, and its level with it.
func (d *Dispatcher) addCue(ctx context.Context, key int64, level int, rec int64, c linkscore.Cue, value float64) error {
	if t := d.w.queued[key]; t != nil {
		for _, tc := range t.cues {
			if tc.rec == rec {
				return nil
			}
		}
		t.cues = append(t.cues, taskCue{rec: rec, cue: c, value: value})
		t.value += value
		return d.relevel(ctx, t)
	}
	if d.w.leased[key] != nil {
		return nil // out already: its order no longer matters
	}
	// Queued in the state only: its level goes up with it there, and the
	// next refill reads on from it if it moved ahead of the cursor.
	l := levelOf(levelValue(level) + value)
	if l <= level {
		return nil
	}
	if _, err := exec(ctx, d.st.q.urlScore, l, key); err != nil {
		return err
	}
	d.w.cursor = nil
	return nil
}

// dropCue takes what a record that completed expected of the queued task
// t out of its value.
func (d *Dispatcher) dropCue(ctx context.Context, t *task, rec int64) error {
	for i, tc := range t.cues {
		if tc.rec == rec {
			t.cues = slices.Delete(t.cues, i, i+1)
			t.value -= tc.value
			return d.relevel(ctx, t)
		}
	}
	return nil
}

// relevel gives a queued task the level of its value, in the window and
// in the state.
func (d *Dispatcher) relevel(ctx context.Context, t *task) error {
	l := levelOf(t.value)
	if l == t.level {
		return nil
	}
	t.level = l
	d.w.reprioritize(t)
	_, err := exec(ctx, d.st.q.urlScore, l, t.key)
	return err
}

// rescore scores the window's tasks again, every rescoreEvery, under what
// the model has learned since they were queued: their levels follow, and
// a task every record of which now finds it unlikely to pay, on enough
// evidence, is pruned. A task read back from the state (the cues of its
// records are not all in memory) and a record's own link are never
// pruned (task.keep).
func (d *Dispatcher) rescore(ctx context.Context, now time.Time) error {
	if now.Sub(d.score.rescored) < rescoreEvery {
		return nil
	}
	d.score.rescored = now
	var prune []*task
	for _, t := range d.w.queued {
		if len(t.cues) == 0 {
			continue
		}
		v, unlikely := t.base, !t.keep
		for i := range t.cues {
			tc := &t.cues[i]
			e := d.score.model.Score(tc.cue)
			tc.value = e.Value
			v += e.Value
			unlikely = unlikely && tc.cue.Source != linkscore.SourceOwn && t.depth > 0 && d.score.model.Unlikely(e)
		}
		t.value = v
		if unlikely {
			prune = append(prune, t)
			continue
		}
		if err := d.relevel(ctx, t); err != nil {
			return err
		}
	}
	for _, t := range prune {
		if _, err := exec(ctx, d.st.q.urlDrop, t.key); err != nil {
			return err
		}
		d.queuedN--
		d.pagesLeft.add(t.host, t.depth, -1)
		d.w.remove(t.key)
		d.run.pruned[PruneUnlikely] += int64(len(t.cues))
		for _, tc := range t.cues {
			d.score.finish(trailKey{t.key, tc.rec})
		}
		d.log.Debug("task pruned", "url", t.url, "reason", PruneUnlikely, "records", len(t.cues), "value", t.value)
	}
	return nil
}

// learn feeds the direct outcome of page it for record r back into the
// model (gave: it gave r a value); for a page that gave, every link on
// the trail that led there counts as having led to a value, and r's
// failures so far are told (see scoring).
func (d *Dispatcher) learn(it applyItem, r *recState, gave bool) {
	s := d.score
	k := trailKey{it.key, r.seq}
	e := s.trail[k]
	if e == nil {
		if it.depth > 0 {
			return // forgotten (trailCap), or reached in an earlier process
		}
		s.remember(k, d.ownCue(r, it.res.Source, d.infoOf(it.res.Source), 0, linkscore.SourceOwn), 0)
		e = s.trail[k]
	}
	if !e.direct {
		e.direct = true
		if gave {
			s.model.Direct(e.cue, true)
		} else {
			s.failed(r.seq, e.cue, false)
		}
	}
	if !gave {
		return
	}
	s.gained(r.seq)
	host, _ := splitURL(it.res.Source)
	s.noteGave(host)
	for hops := 0; e.parent != 0 && hops <= maxTrail; hops++ {
		p := s.trail[trailKey{e.parent, r.seq}]
		if p == nil {
			return
		}
		if p.tried && !p.led && !p.done {
			p.led = true
			s.model.Onward(p.cue, true)
		}
		e = p
	}
}

// maxTrail bounds the walk up a trail: no crawl's depth is longer.
const maxTrail = 64

// tried notes that the links of page it are being followed for record r.
func (d *Dispatcher) tried(it applyItem, r *recState) {
	if e := d.score.trail[trailKey{it.key, r.seq}]; e != nil {
		e.tried = true
	}
}

// applied notes that page it was applied to record r, its links followed
// or not: done with unless links of it are still open.
func (d *Dispatcher) applied(it applyItem, r *recState) {
	if e := d.score.trail[trailKey{it.key, r.seq}]; e != nil && e.open <= 0 {
		d.score.finish(trailKey{it.key, r.seq})
	}
}

// failedFor notes that the page key failed for the records recs: a link
// that gave nothing, done with.
func (s *scoring) failedFor(key int64, recs []int64) {
	for _, rec := range recs {
		k := trailKey{key, rec}
		if e := s.trail[k]; e != nil {
			if !e.direct {
				e.direct = true
				s.failed(rec, e.cue, false)
			}
			s.finish(k)
		}
	}
}

// finish marks a link done with. One whose links were followed and led to
// no value counts so (Onward), and its source has one open link fewer:
// the last to close closes the source in turn.
func (s *scoring) finish(k trailKey) {
	for hops := 0; hops <= maxTrail; hops++ {
		e := s.trail[k]
		if e == nil || e.done {
			return
		}
		e.done = true
		if e.tried && !e.led {
			s.failed(k.rec, e.cue, true)
		}
		if e.parent == 0 {
			return
		}
		k = trailKey{e.parent, k.rec}
		p := s.trail[k]
		if p == nil {
			return
		}
		if p.open--; p.open > 0 || !p.tried {
			return
		}
	}
}

// requestsPerComplete is the crawl's requests for pages per record it
// completed (0 before the first). Callers hold mu.
func (d *Dispatcher) requestsPerComplete() float64 {
	if n := d.total(&d.run.completed); n > 0 {
		return float64(d.total(&d.run.requests)) / float64(n)
	}
	return 0
}

// FrontierStatus is what the frontier's score did (score.go): the
// requests made for pages, and per record the crawl completed; the links
// pruned for a record, by reason; and what the model learned of links,
// feature by feature (linkscore.Rate: links observed and those that gave
// a value, directly or through their own links).
type FrontierStatus struct {
	Requests            int64            `json:"requests"`
	RequestsPerComplete float64          `json:"requests_per_complete"`
	Pruned              map[string]int64 `json:"pruned,omitempty"`
	Learned             []linkscore.Rate `json:"learned,omitempty"`
}

// frontierStatus is the frontier's part of the status. Callers hold mu.
func (d *Dispatcher) frontierStatus() FrontierStatus {
	return FrontierStatus{Requests: d.total(&d.run.requests), RequestsPerComplete: d.requestsPerComplete(),
		Pruned: sumMaps(d.base.pruned, d.run.pruned), Learned: d.score.model.Rates()}
}

// gives reports whether the page res has a value for one of r's target
// fields (applied to r only when its match keys agree).
func gives(r *recState, res *cachedResult) bool {
	for _, f := range res.Fields {
		if r.isTarget(f.Name) {
			return true
		}
	}
	return false
}
