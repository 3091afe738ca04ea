package dispatcher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"time"

	"backfill/seconds"
	"backfill/wire"
)

// How long the crawl will take at least, from what the hosts allow. A
// crawl that waits on its hosts ends no sooner than its busiest host can
// be asked for its pages, one per delay, and no sooner than its requests
// take at the rate the hosts with work (and the supervisors' workers)
// allow together. Both follow from counts the dispatcher keeps as the
// crawl goes, not from how fast pages came lately:
//
//   - pages left per host (hostLeft): the tasks queued, in the window or
//     only in SQLite, and out on lease, and the own links of the records
//     not seeded yet (seeds.go), counted as they are queued, taken in,
//     seeded, answered and dropped; a resumed dispatcher counts them once
//     from the state (countLeft). One entry per host with pages left,
//     at most leftCap: past it a host with one page left is counted with
//     the others (folded), which only its naming in the bound can miss;
//   - each host's delay, from its last result (pace.go), else the default
//     delay the supervisors say in their Hello (Config.DefaultDelay
//     before any has), and the mean time a request takes, from the
//     results (each host's cycle is its delay plus that time); a host not
//     heard of yet has its robots.txt (and, with more than one page, its
//     soft-404 probe) to ask too;
//   - the supervisors' workers (their Hello), which bound the requests in
//     flight: workers / response time requests a second.
//
// The bound is the larger of the busiest host's requests at one a cycle
// (the first at once) and
// all requests / the rate allowed (Σ 1/cycle over the hosts with work,
// at most the workers' rate), and names the host or says the rate. It is
// computed at most every etaEvery (and at least etaCost times as long as
// the last computation took, a pass over the hosts with pages left),
// and shown by the progress line, the status and /metrics; with no page
// known to be left it is 0. What it cannot know are the pages not found
// yet: links a crawl to some depth has still to discover make the crawl
// longer than the bound, and records that complete early (their tasks
// dropped) shorter.

const (
	// leftCap bounds the hosts counted one by one in hostLeft.
	leftCap = 1 << 18
	// etaEvery is the least time between two computations of the ETA,
	// and etaCost how many times its last computation's length it waits
	// at least.
	etaEvery = time.Second
	etaCost  = 100
	// responseWeight is the weight of each new response time in its
	// running mean.
	responseWeight = 0.05
	// maxResponse caps a response time taken into the mean: a result's
	// FetchedAt is its supervisor's clock.
	maxResponse = time.Minute
	// etaWindow is the span the recent pace of answers is measured over,
	// and etaWindowMin the least of it that says anything.
	etaWindow    = 30 * time.Second
	etaWindowMin = 10 * time.Second
	// kidsWeight is the weight of each answered page in the running mean
	// of the new tasks a page leads to: the mean follows the crawl, as
	// later pages find more of their links known; kidsMin is how many
	// pages of a depth it waits for before it says anything.
	kidsWeight = 1.0 / 64
	kidsMin    = 16
)

// hostLeft counts, per host, the pages the crawl knows it has still to
// fetch there, by depth. Owned by the Dispatcher, under its mutex.
//
// Every link taken in passes through it (a million records' links at
// intake), so it is built for that: a host is keyed by a 64-bit hash of
// its name, and its name is kept in one byte arena (names), so that the
// map holds no pointer for the collector to follow and a look-up
// compares no string.
type hostLeft struct {
	n       map[uint64]hostLeftEntry
	names   []byte // the names of n's hosts, and of hosts gone since the last compact
	live    int    // bytes of names that are n's
	seed    maphash.Seed
	total   int   // every page left: those of n and the folded ones
	folded  int   // pages of hosts folded past leftCap, one each
	atDepth []int // every page left, by depth
}

// hostLeftEntry is one host's pages left by depth, those at hostDepthsLen-1
// and deeper together, and where its name is in hostLeft.names.
type hostLeftEntry struct {
	depths  hostDepths
	nameAt  uint32
	nameLen uint16
}

type hostDepths [hostDepthsLen]int32

const hostDepthsLen = 4

func newHostLeft() hostLeft {
	return hostLeft{n: make(map[uint64]hostLeftEntry), seed: maphash.MakeSeed()}
}

// pages sums a host's pages left.
func pages(byDepth hostDepths) int {
	n := 0
	for _, v := range byDepth {
		n += int(v)
	}
	return n
}

// name is e's host name.
func (l *hostLeft) name(e hostLeftEntry) string {
	return string(l.names[e.nameAt : e.nameAt+uint32(e.nameLen)])
}

// get returns host's pages left by depth; ok is false for a host not
// counted one by one.
func (l *hostLeft) get(host string) (hostDepths, bool) {
	e, ok := l.n[maphash.String(l.seed, host)]
	return e.depths, ok
}

// add counts k more pages (fewer, when negative) left on host at depth.
func (l *hostLeft) add(host string, depth, k int) {
	if host == "" || k == 0 {
		return
	}
	depth = max(depth, 0)
	for len(l.atDepth) <= depth {
		l.atDepth = append(l.atDepth, 0)
	}
	l.atDepth[depth] = max(l.atDepth[depth]+k, 0)
	key := maphash.String(l.seed, host)
	e, ok := l.n[key]
	at := min(depth, hostDepthsLen-1)
	if !ok && k < 0 {
		// A host not counted one by one: one folded past leftCap.
		take := min(-k, l.folded)
		l.folded -= take
		l.total -= take
		return
	}
	if !ok {
		l.compact()
		e.nameAt, e.nameLen = uint32(len(l.names)), uint16(min(len(host), 1<<16-1))
		l.names = append(l.names, host[:e.nameLen]...)
		l.live += int(e.nameLen)
	}
	v := &e.depths
	if k > 0 {
		v[at] += int32(k)
		l.total += k
	}
	for ; k < 0; k++ {
		// The depth's page, or when none is counted there (its depth
		// changed on the way), the deepest one.
		i := at
		if v[i] == 0 {
			for i = len(v) - 1; i >= 0 && v[i] == 0; i-- {
			}
		}
		if i < 0 {
			break
		}
		v[i]--
		l.total--
	}
	if pages(*v) == 0 {
		delete(l.n, key)
		l.live -= int(e.nameLen)
		return
	}
	l.n[key] = e
	if !ok {
		l.fold()
	}
}

// compact rewrites names with the names of the hosts counted now, when
// the names of hosts gone take more than half of it.
func (l *hostLeft) compact() {
	if len(l.names) < 1<<20 || l.live > len(l.names)/2 {
		return
	}
	names := make([]byte, 0, 2*l.live)
	for k, e := range l.n {
		at := uint32(len(names))
		names = append(names, l.names[e.nameAt:e.nameAt+uint32(e.nameLen)]...)
		e.nameAt = at
		l.n[k] = e
	}
	l.names = names
}

// moveDepth counts a page left on host at depth from as at depth to (a
// record reached it by a shorter way).
func (l *hostLeft) moveDepth(host string, from, to int) {
	if from < 0 || from >= len(l.atDepth) || to < 0 || l.atDepth[from] == 0 {
		return
	}
	l.atDepth[from]--
	for len(l.atDepth) <= to {
		l.atDepth = append(l.atDepth, 0)
	}
	l.atDepth[to]++
	from, to = min(from, hostDepthsLen-1), min(to, hostDepthsLen-1)
	key := maphash.String(l.seed, host)
	if e, ok := l.n[key]; ok && e.depths[from] > 0 {
		e.depths[from]--
		e.depths[to]++
		l.n[key] = e
	}
}

// fold keeps at most leftCap hosts, counting those with one page left
// beyond it together.
func (l *hostLeft) fold() {
	if len(l.n) <= leftCap {
		return
	}
	for h, e := range l.n {
		if pages(e.depths) == 1 {
			delete(l.n, h)
			l.live -= int(e.nameLen)
			l.folded++
			if len(l.n) <= leftCap*7/8 {
				return
			}
		}
	}
}

// linkHost is the host[:port] of a normalized URL, as hostDomain has it,
// read off the URL's text when it is plain.
func linkHost(norm string) string {
	if i := strings.Index(norm, "://"); i > 0 {
		rest := norm[i+3:]
		if j := strings.IndexAny(rest, "/?#"); j >= 0 {
			rest = rest[:j]
		}
		if rest != "" && !strings.ContainsAny(rest, "@%ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			return rest
		}
	}
	host, _ := hostDomain(norm)
	return host
}

// ETA is how long the crawl will take at least, and what bounds it.
type ETA struct {
	// Seconds is the bound: the larger of HostSeconds and RateSeconds.
	Seconds float64 `json:"seconds"`
	// Estimate is the bound with the pages the pages left will lead to
	// (Growth: each page left comes to that many on average, itself
	// included), or those requests at the pace requests were answered
	// over the last etaWindow (Recent, a second) when that says longer:
	// a crawl bound by something the bound does not see (the CPU, a slow
	// store) takes that long.
	Estimate float64 `json:"estimate_seconds"`
	Growth   float64 `json:"growth"`
	Recent   float64 `json:"recent_rate,omitempty"`
	// The busiest host: its requests left, its cycle (delay and mean
	// response time) and what they take, the first at once and each of
	// the others a cycle after the one before.
	Host         string  `json:"host,omitempty"`
	HostRequests int     `json:"host_requests,omitempty"`
	HostCycle    float64 `json:"host_cycle_seconds,omitempty"`
	HostSeconds  float64 `json:"host_seconds"`
	// Every request left (Pages, and the robots.txt and probes of the
	// Hosts not heard of yet) at the Rate allowed.
	Requests    int     `json:"requests"`
	Pages       int     `json:"pages"`
	Hosts       int     `json:"hosts"` // with pages left
	Rate        float64 `json:"rate"`  // requests a second
	RateSeconds float64 `json:"rate_seconds"`
	// Response is the mean time a request takes, as results say.
	Response float64 `json:"response_seconds"`
	// Workers are the supervisors' (0 when unknown); WorkerBound says
	// they, not the hosts, bound the rate.
	Workers     int  `json:"workers,omitempty"`
	WorkerBound bool `json:"worker_bound,omitempty"`
	// At is when it was worked out.
	At time.Time `json:"at"`
}

// ByHost says whether the busiest host bounds the crawl, rather than the
// rate.
func (e ETA) ByHost() bool { return e.Host != "" && e.HostSeconds >= e.RateSeconds }

// Bound is Seconds as a duration, rounded to the second.
func (e ETA) Bound() time.Duration { return seconds.Duration(e.Seconds).Round(time.Second) }

// Expected is Estimate as a duration, rounded to the second.
func (e ETA) Expected() time.Duration { return seconds.Duration(e.Estimate).Round(time.Second) }

// String says the bound and what bounds it: "≥ 6m0s: host a.example, 25
// requests one every 15.1s", "≥ 2m0s: 7000 requests at 58.3/s", or "0s" when no
// page is left, "?" while nothing bounds it that the dispatcher knows of
// (no delay, and no response time yet).
func (e ETA) String() string {
	switch {
	case e.Pages == 0:
		return "0s"
	case e.Seconds == 0:
		return "?"
	case e.ByHost():
		return fmt.Sprintf("≥ %v: host %s, %d requests one every %.1fs", e.Bound(), e.Host, e.HostRequests, e.HostCycle)
	case e.WorkerBound:
		return fmt.Sprintf("≥ %v: %d requests at %s/s (%d workers)", e.Bound(), e.Requests, rateText(e.Rate), e.Workers)
	}
	return fmt.Sprintf("≥ %v: %d requests at %s/s", e.Bound(), e.Requests, rateText(e.Rate))
}

// rateText writes a rate with a decimal, or three digits when small.
func rateText(r float64) string {
	if r < 1 {
		return strconv.FormatFloat(r, 'g', 3, 64)
	}
	return strconv.FormatFloat(r, 'f', 1, 64)
}

// noteResponse takes a result's response time into the mean. Callers
// hold mu.
func (d *Dispatcher) noteResponse(r *wire.Result, now time.Time) {
	if r.Status == 0 || r.FetchedAt.IsZero() {
		return // no request answered
	}
	rt := now.Sub(r.FetchedAt)
	if rt < 0 || rt > maxResponse {
		return
	}
	if d.response == 0 {
		d.response = rt.Seconds()
		return
	}
	d.response += responseWeight * (rt.Seconds() - d.response)
}

// defaultDelay is the delay of a host not heard of yet: the shortest the
// supervisors say, else Config.DefaultDelay. Callers hold mu.
func (d *Dispatcher) defaultDelay() time.Duration {
	delay, known := time.Duration(0), false
	for _, m := range d.members.All() {
		if m.workers > 0 && (!known || m.delay < delay) {
			delay, known = m.delay, true
		}
	}
	if !known {
		return max(d.cfg.DefaultDelay, 0)
	}
	return delay
}

// ETA works out how long the crawl will take at least, now (see eta.go).
// Safe for concurrent use with Load and Run.
func (d *Dispatcher) ETA() ETA {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.workETA(time.Now())
}

// eta works the bound out now, or returns the last one if it is recent
// (etaEvery). Callers hold mu.
func (d *Dispatcher) eta(now time.Time) ETA {
	if !d.etaAt.IsZero() && now.Sub(d.etaAt) < max(etaEvery, etaCost*d.etaTook) {
		return d.lastETA
	}
	began := time.Now()
	d.lastETA = d.workETA(now)
	d.etaAt, d.etaTook = now, time.Since(began)
	return d.lastETA
}

// workETA works the bound out from the counts (see above). Callers hold
// mu.
func (d *Dispatcher) workETA(now time.Time) ETA {
	e := ETA{Pages: d.pagesLeft.total, Hosts: len(d.pagesLeft.n) + d.pagesLeft.folded, Response: d.response, At: now}
	def := d.defaultDelay()
	rt := d.response
	inFlight := float64(max(d.cfg.HostInFlight, 1))
	// cycle is the time between the starts of two requests to a host
	// with the given delay (0: it keeps none, and HostInFlight go at once).
	cycle := func(delay time.Duration) float64 {
		if delay <= 0 {
			return rt / inFlight
		}
		return delay.Seconds() + rt
	}
	var rate, hostEstimate float64
	unbounded := false // some host keeps no delay and its requests take no time we know of
	after, afterHere := d.growth(false), d.growth(true)
	if e.Pages > 0 {
		e.Growth = grown(d.pagesLeft.atDepth, after) / float64(e.Pages)
	}
	l := &d.pagesLeft
	var busiest []byte // the busiest host's name, in l.names
	for _, en := range l.n {
		name := l.names[en.nameAt : en.nameAt+uint32(en.nameLen)]
		pages := pages(en.depths)
		delay, heard := def, false
		if p, ok := d.w.hostPace[string(name)]; ok { // no copy: a look-up
			delay, heard = p.delay, true
		}
		requests := pages
		if !heard {
			requests++ // its robots.txt
			if pages > 1 {
				requests++ // its soft-404 probe
			}
		}
		e.Requests += requests
		c := cycle(delay)
		if c <= 0 {
			unbounded = true
			continue
		}
		rate += 1 / c
		// The first request goes at once; each of the others a cycle
		// after the one before.
		s := float64(requests)*c - delay.Seconds()
		if s > e.HostSeconds || (s == e.HostSeconds && bytes.Compare(name, busiest) < 0) {
			busiest, e.HostRequests, e.HostCycle, e.HostSeconds = name, requests, c, s
		}
		// With the pages its pages will lead to.
		hostEstimate = max(hostEstimate, s+(grown(en.depths[:], afterHere)-float64(pages))*c)
	}
	if busiest != nil {
		e.Host = string(busiest)
	}
	if d.pagesLeft.folded > 0 {
		// Hosts of one page each, not heard of, at the default delay.
		c := cycle(def)
		e.Requests += 2 * d.pagesLeft.folded
		if c > 0 {
			rate += float64(d.pagesLeft.folded) / c
			e.HostSeconds = max(e.HostSeconds, 2*c-def.Seconds())
		} else {
			unbounded = true
		}
	}
	for _, m := range d.members.All() {
		e.Workers += m.workers
	}
	if e.Workers > 0 && rt > 0 {
		if w := float64(e.Workers) / rt; unbounded || w < rate {
			rate, e.WorkerBound = w, true
		}
	} else if unbounded {
		rate = 0 // nothing bounds it that we know of
	}
	e.Rate = rate
	if rate > 0 {
		e.RateSeconds = float64(e.Requests) / rate
	}
	e.Seconds = max(e.HostSeconds, e.RateSeconds)
	// The estimate counts the pages the pages left will lead to.
	requests := float64(e.Requests) + (e.Growth-1)*float64(e.Pages)
	e.Estimate = hostEstimate
	if rate > 0 {
		e.Estimate = max(e.Estimate, requests/rate)
	}
	if e.Recent = d.recentRate(now); e.Recent > 0 {
		e.Estimate = max(e.Estimate, requests/e.Recent)
	}
	e.Estimate = max(e.Estimate, e.Seconds)
	if e.Pages == 0 {
		e = ETA{Response: rt, Workers: e.Workers, At: now}
	}
	return e
}

// answered is how many tasks have been answered at a time, for
// recentRate.
type answered struct {
	at time.Time
	n  int64
}

// recentRate is how many tasks were answered a second over the last
// etaWindow, or 0 when less than etaWindowMin of it is known. It keeps
// a sample at each call (one every etaEvery at most). Callers hold mu.
func (d *Dispatcher) recentRate(now time.Time) float64 {
	d.answers = append(d.answers, answered{now, d.answeredN})
	i := 0
	for i < len(d.answers)-1 && now.Sub(d.answers[i+1].at) >= etaWindow {
		i++
	}
	d.answers = append(d.answers[:0], d.answers[i:]...)
	first := d.answers[0]
	dt := now.Sub(first.at)
	if dt < etaWindowMin || d.answeredN == first.n {
		return 0
	}
	return float64(d.answeredN-first.n) / dt.Seconds()
}

// countLeft counts the pages left per host from the state, for a resumed
// crawl: its queued tasks (every task a process before left unfinished
// is queued) and the own links of its records not seeded yet. A new
// state has none; Load and the crawl count from there on.
func (d *Dispatcher) countLeft(ctx context.Context) error {
	d.pagesLeft = newHostLeft()
	rows, err := d.st.conn.QueryContext(ctx, `SELECT url, depth FROM urls WHERE state = 0 AND url IS NOT NULL`)
	if err != nil {
		return fmt.Errorf("dispatcher: state pages left: %w", err)
	}
	for rows.Next() {
		var u string
		var depth int
		if err := rows.Scan(&u, &depth); err != nil {
			rows.Close()
			return fmt.Errorf("dispatcher: state pages left: %w", err)
		}
		d.pagesLeft.add(linkHost(u), depth, 1)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: state pages left: %w", err)
	}
	rows, err = d.st.conn.QueryContext(ctx, `SELECT seq, links FROM records WHERE seq > ? AND complete = 0 AND links IS NOT NULL`, d.seeded)
	if err != nil {
		return fmt.Errorf("dispatcher: state pages left: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var blob []byte
		var links []string
		if err := rows.Scan(&seq, &blob); err != nil {
			return fmt.Errorf("dispatcher: state pages left: %w", err)
		}
		if err := json.Unmarshal(blob, &links); err != nil {
			return fmt.Errorf("dispatcher: state links of record %d: %w", seq, err)
		}
		for _, l := range links {
			d.pagesLeft.add(linkHost(l), 0, 1)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dispatcher: state pages left: %w", err)
	}
	return nil
}

// noteKids takes the tasks an answered page at depth led to (its links
// new to the crawl, queued, less the tasks its records' completion
// dropped), and those of them on its own host, into the running means
// of its depth. Callers hold mu.
func (d *Dispatcher) noteKids(depth, kids, here int) {
	depth = max(depth, 0)
	for len(d.kids) <= depth {
		d.kids = append(d.kids, kidsMean{})
	}
	k := &d.kids[depth]
	k.pages++
	w := max(kidsWeight, 1/float64(k.pages)) // a plain mean of the first ones
	k.mean += w * (float64(kids) - k.mean)
	k.here += w * (float64(here) - k.here)
}

// kidsMean is the running mean of the tasks a page at one depth led to,
// and of those on its own host.
type kidsMean struct {
	mean, here float64
	pages      int
}

// growth is how many pages one page left at each depth will come to,
// itself and the pages it will lead to, on average (1: none more): a page
// at depth d leads to kids(d) new ones, each of which leads to kids(d+1),
// and so on to the depth limit, where links are not followed. A depth
// whose pages have not been answered kidsMin times yet counts as leading
// to none. Callers hold mu.
//
// here counts only the pages on the page's own host, as a host's pages
// left will come to.
func (d *Dispatcher) growth(here bool) []float64 {
	n := max(len(d.pagesLeft.atDepth), d.cfg.Depth+1)
	after := make([]float64, n+1)
	for i := n - 1; i >= 0; i-- {
		after[i] = 1
		if i < d.cfg.Depth && i < len(d.kids) && d.kids[i].pages >= kidsMin {
			k := d.kids[i].mean
			if here {
				k = d.kids[i].here
			}
			after[i] += max(k, 0) * after[i+1]
		}
	}
	return after[:n]
}

// grown is what pages left at each depth (byDepth) will come to, by
// the growth after (a host's deepest count, its pages at hostDepthsLen-1
// and deeper, grows as those at hostDepthsLen-1).
func grown[T int | int32](byDepth []T, after []float64) float64 {
	sum := 0.0
	for i, v := range byDepth {
		g := 1.0
		if i < len(after) {
			g = after[i]
		}
		sum += float64(v) * g
	}
	return sum
}
