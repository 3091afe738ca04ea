package dispatcher

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"maps"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"backfill/cluster"
	"backfill/wire"
)

// Re-checks: a member that follows the protocol can still lie about the
// pages it was asked for, and its values would be taken like any other.
// So a share of each member's value-giving answers (Config.RecheckShare)
// is fetched again by another member, and the values compared:
//
//   - The page is checked by "another member": the first on the walk of
//     the ring from the page's registrable domain that is not the member
//     checked (cluster.Balancer.Other), the one the ring would give the
//     domain were that member gone; a render node for a rendered page. One host has one owner; a re-check is a
//     task like any other, and passes the host to the checker for that
//     one request by the hand-over a host makes when its owner changes:
//     it is leased only when nothing else of the host is in flight and
//     the host's next request is due (its delay), it carries the host's
//     last request time (wire.Task.HostLast), and while it is out the
//     owner's next task of the host waits, then carries the check's time.
//     Politeness holds across the hand-over as it holds across a
//     membership change; a re-check costs the host one request.
//   - Answers agree when they give the same values (every mapping and
//     field). When they do not, a third member (the next on the walk
//     past both) fetches the page as arbiter. The member whose values
//     the other two's agreeing fetches contradict is struck: a whole
//     strike when its page's content fingerprint (text hash, or simhash
//     within the near-duplicate distance) is the others' (it saw the
//     same page and gave other values), half a strike when the content
//     differs too (the page may have changed between the fetches; or the
//     member lied about the content as well). When all three differ, the
//     page changes between fetches and nobody is struck. With two
//     members, nobody can arbitrate: the dispute is counted and logged.
//   - A member struck once is suspect: every value-giving answer of it is
//     checked until suspectChecks of them agree. One struck
//     Config.RecheckStrikes times is quarantined (cluster.Members.Forged)
//     and every answer it gave taken back and fetched again by the others
//     (purge.go) before the run ends.
//   - Trust is earned: a member is on probation, with at most
//     probationCapacity tasks in flight whatever its capacity, until a
//     check of one of its answers agrees (or, giving no values, until it
//     has answered probationAnswers tasks), and again while it is
//     suspect. A member that lies from the start is so caught within its
//     first few dozen answers, however fast it makes them up: it cannot
//     answer hundreds while its first check is on its way.
//
// Which answers are checked is drawn at random, under a seed the members
// never see: each value-giving answer with the share's probability, and
// one of each member's first startChecks such answers, so that a member
// that lies on every page is caught within its first few dozen answers
// however small the share. A member lying on a fraction f of its pages
// is caught, in expectation, after about 1/(share·f) of its answers (a
// thousand at 2 % of checks and 5 % of lies); what it gave until then is
// taken back with the rest. A re-check is a request a page would not
// otherwise get: the share is its cost, plus one check a member and the
// arbiters of disputes.

const (
	// DefaultRecheckShare is Config.RecheckShare's default on a secured
	// cluster: 2 % of each member's value-giving answers fetched again.
	DefaultRecheckShare = 0.02
	// DefaultRecheckStrikes is Config.RecheckStrikes's default.
	DefaultRecheckStrikes = 2
	// startChecks: one of each member's first startChecks value-giving
	// answers is checked.
	startChecks = 10
	// suspectChecks: a member struck is checked on every value-giving
	// answer until this many of the checks agree.
	suspectChecks = 100
	// maxPendingChecks bounds the checks waiting to go out; past it an
	// answer is not drawn.
	maxPendingChecks = 1024
	// probationCapacity bounds the tasks in flight of a member on
	// probation; probationAnswers of answers without values end it.
	probationCapacity = 8
	probationAnswers  = 200
)

// rechecks is the dispatcher's account of re-checks: those waiting to go
// out, the pages checked now, and each member's record. Used under mu.
type rechecks struct {
	rng     *rand.Rand
	salt    uint64
	pending []*task           // checks waiting for a checker and their host's turn
	open    map[int64]bool    // pages with a check pending or out, by URL key
	hosts   map[string]int    // hosts with checks pending: their own tasks wait for them
	out     int               // checks leased
	members map[string]*trust // by key (by name in a plaintext cluster)
}

// trust is one member's record in re-checks.
type trust struct {
	all                      int // answers of any kind
	answers, checked, agreed int // of value-giving answers
	strikes                  int // in halves (see strike)
	suspect                  int // agreeing checks still owed
}

// room is how many tasks member m may have in flight: its capacity, but
// probationCapacity while it is on probation or suspect (see the top of
// this file). Callers hold mu.
func (d *Dispatcher) room(m *member) int {
	if d.cfg.RecheckShare <= 0 || d.members.Len() < 2 {
		return m.Capacity
	}
	tr := d.checks.record(m.Key, m.ID)
	if tr.suspect > 0 || (tr.agreed == 0 && (tr.answers > 0 || tr.all < probationAnswers)) {
		return min(m.Capacity, probationCapacity)
	}
	return m.Capacity
}

// checkOf is what a check task checks: a member's answer for a page and,
// for an arbiter's fetch, the checker's answer that disagreed with it.
type checkOf struct {
	page      int64  // the page's URL key
	of, ofKey string // the member checked
	orig      answerPrint
	arbiter   bool
	first     answerPrint // the first checker's answer
	by, byKey string      // the first checker
}

// answerPrint is what a comparison needs of an answer: its values by
// mapping and field, and its content fingerprint.
type answerPrint struct {
	values map[string]string
	text   []byte
	sim    uint64
}

func newRechecks() rechecks {
	var seed [32]byte
	crand.Read(seed[:]) // never fails (crypto/rand)
	return rechecks{rng: rand.New(rand.NewChaCha8(seed)), salt: binary.BigEndian.Uint64(seed[:8]) | 1,
		open: make(map[int64]bool), hosts: make(map[string]int), members: make(map[string]*trust)}
}

// record is the re-check record of the member with key (name in a
// plaintext cluster).
func (c *rechecks) record(key, name string) *trust {
	id := key
	if id == "" {
		id = "name:" + name
	}
	tr := c.members[id]
	if tr == nil {
		tr = &trust{}
		c.members[id] = tr
	}
	return tr
}

// printOf is the print of an answer with fields and fingerprint.
func printOf(fields []wire.Field, text []byte, sim uint64) answerPrint {
	p := answerPrint{values: make(map[string]string, len(fields)), text: text, sim: sim}
	for _, f := range fields {
		if f.Name == "" {
			continue
		}
		if v := joinValues(f.Values); v != "" {
			p.values[f.Mapping+"\x00"+f.Name] = v
		}
	}
	return p
}

func (a answerPrint) sameValues(b answerPrint) bool { return maps.Equal(a.values, b.values) }

// sameContent reports whether two answers saw one page: the same text
// hash, or simhashes within the near-duplicate distance.
func (a answerPrint) sameContent(b answerPrint) bool {
	if len(a.text) == 16 && bytes.Equal(a.text, b.text) {
		return true
	}
	return a.sim != 0 && b.sim != 0 && bits.OnesCount64(a.sim^b.sim) <= simMaxDistance
}

// differ names the fields on which a and b differ, for logs (bounded).
func (a answerPrint) differ(b answerPrint) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(a.values)) {
		if b.values[k] != a.values[k] {
			out = append(out, k[strings.IndexByte(k, 0)+1:])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b.values)) {
		if _, ok := a.values[k]; !ok {
			out = append(out, k[strings.IndexByte(k, 0)+1:])
		}
	}
	out = slices.Compact(out)
	if len(out) > 8 {
		out = append(out[:8], "…")
	}
	return strings.Join(out, ",")
}

// checkKey is the key of a check task of page: never a URL's (but with
// the chance of two URLs sharing one), different for the arbiter's.
func (c *rechecks) checkKey(page int64, arbiter bool) int64 {
	z := uint64(page) ^ c.salt
	if arbiter {
		z = bits.RotateLeft64(z, 29) ^ 0x9e3779b97f4a7c15
	}
	// splitmix64's finalizer
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return int64(z ^ z>>31)
}

// sample draws whether the value-giving answer r to task t, from the
// member holding its lease (key from.Key), is checked, and queues the
// check. Callers hold mu.
func (d *Dispatcher) sample(t *task, r *wire.Result, fields []wire.Field, from wire.Peer) {
	c := &d.checks
	tr := c.record(from.Key, t.lease.Member)
	tr.answers++
	if d.members.Len() < 2 || c.open[t.key] || len(c.pending) >= maxPendingChecks {
		return
	}
	p := d.cfg.RecheckShare
	switch {
	case tr.suspect > 0:
		p = 1
	case tr.checked == 0 && tr.answers <= startChecks:
		p = max(p, 1/float64(startChecks-tr.answers+1))
	}
	if c.rng.Float64() >= p {
		return
	}
	tr.checked++
	c.add(t, &checkOf{page: t.key, of: t.lease.Member, ofKey: from.Key, orig: printOf(fields, r.TextHash, r.Simhash)})
}

// add queues a check of t's page.
func (c *rechecks) add(t *task, chk *checkOf) {
	c.pending = append(c.pending, &task{key: c.checkKey(chk.page, chk.arbiter), url: t.url, host: t.host, domain: t.domain,
		depth: t.depth, render: t.render, check: chk})
	c.open[chk.page] = true
	c.hosts[t.host]++
}

// unpend notes that check t left the queue of checks: its host's tasks
// go on when no other check of it waits.
func (d *Dispatcher) unpend(t *task) {
	c := &d.checks
	if n := c.hosts[t.host] - 1; n > 0 {
		c.hosts[t.host] = n
		return
	}
	delete(c.hosts, t.host)
	d.w.unparkHost(t.host)
}

// checker is the member to check t with: the first on its domain's walk
// that is neither the member checked nor, for an arbiter, the first
// checker; nil when there is none.
func (d *Dispatcher) checker(t *task) *member {
	b := d.domains
	if t.render {
		b = d.renderDomains
	}
	not := []string{t.check.of}
	if t.check.arbiter {
		not = append(not, t.check.by)
	}
	m, _ := d.members.Get(b.Other(t.domain, not...))
	return m
}

// dispatchChecks leases the checks waiting whose host may take a request
// now (nothing of it in flight, its delay passed) to their checkers with
// room. A check no member can make is dropped. While a check waits, its
// host's own tasks wait too (dispatch parks them), so that a host always
// busy lets its requests end and the check goes. Callers hold mu.
func (d *Dispatcher) dispatchChecks(now time.Time) {
	c, w := &d.checks, d.w
	kept := c.pending[:0]
	for i, t := range c.pending {
		c.pending[i] = nil
		m := d.checker(t)
		if m == nil {
			if t.check.arbiter {
				d.log.Warn("re-check disputed and nobody can arbitrate (it takes three members): the values stand",
					"url", t.url, "member", t.check.of, "checker", t.check.by, "fields", t.check.orig.differ(t.check.first))
			}
			d.run.recheckDropped++
			delete(c.open, t.check.page)
			d.unpend(t)
			continue
		}
		if w.hostInFlight[t.host] > 0 || !w.notBefore(t.host, now).IsZero() || m.inFlight >= d.room(m) || len(m.out) >= cap(m.out) {
			kept = append(kept, t)
			continue
		}
		d.unpend(t)
		t.lease = d.tokens.Grant(taskID(t.key), m.ID, m.Key, now.Add(d.cfg.Lease))
		w.leased[t.key] = t
		m.inFlight++
		w.hostInFlight[t.host]++
		w.hostHolder[t.host] = m.ID
		c.out++
		wt := wire.Task{ID: taskID(t.key), Lease: t.lease.Token, URL: t.url, Host: t.host, Depth: t.depth, Render: t.render}
		if ho, ok := w.hostLast[t.host]; ok && ho.member != m.ID {
			wt.HostLast = ho.at
		}
		m.enqueue(wire.KindTask, wt) // room was checked above
	}
	c.pending = kept
}

// requeueCheck puts a check whose lease ended without an answer back in
// the queue of checks.
func (d *Dispatcher) requeueCheck(t *task) {
	d.release(t)
	d.checks.out--
	t.lease = cluster.Lease{}
	d.checks.pending = append(d.checks.pending, t)
	d.checks.hosts[t.host]++
}

// checked takes the answer r, from from, to check task t (its lease
// released): a check agrees, or disputes and calls an arbiter; an
// arbiter's answer strikes the member the other two contradict. Callers
// hold mu, inside the state transaction.
func (d *Dispatcher) checked(ctx context.Context, t *task, r *wire.Result, from wire.Peer, now time.Time) error {
	c, chk := &d.checks, t.check
	delete(c.open, chk.page)
	d.run.rechecked++
	if r.Class != "" || r.NotModified || r.Redirect != "" {
		d.run.recheckFailed++
		d.log.Debug("re-check not made: the checker could not fetch the page", "url", t.url, "member", chk.of, "checker", t.lease.Member,
			"class", r.Class)
		return nil
	}
	got := printOf(r.Fields, r.TextHash, r.Simhash)
	if !chk.arbiter {
		if got.sameValues(chk.orig) {
			d.run.recheckAgreed++
			tr := c.record(chk.ofKey, chk.of)
			tr.agreed++
			tr.suspect = max(tr.suspect-1, 0)
			if m, ok := d.members.Get(chk.of); ok && m.Key == chk.ofKey {
				d.w.unparkMember(m) // its probation may be over
			}
			return nil
		}
		d.run.recheckDisputed++
		d.log.Warn("re-check disagrees: another member's fetch of the page gave other values; a third member fetches it",
			"url", t.url, "member", chk.of, "checker", t.lease.Member, "fields", chk.orig.differ(got))
		c.add(t, &checkOf{page: chk.page, of: chk.of, ofKey: chk.ofKey, orig: chk.orig, arbiter: true,
			first: got, by: t.lease.Member, byKey: from.Key})
		return nil
	}
	switch withFirst, withOrig := got.sameValues(chk.first), got.sameValues(chk.orig); {
	case withFirst && !withOrig:
		return d.strike(ctx, chk.ofKey, chk.of, chk.orig.sameContent(got), t.url, now)
	case withOrig && !withFirst:
		return d.strike(ctx, chk.byKey, chk.by, chk.first.sameContent(got), t.url, now)
	}
	d.run.recheckUnsettled++
	d.log.Info("re-check unsettled: three members' fetches of the page gave three answers (it changes between fetches); nobody is struck",
		"url", t.url, "member", chk.of, "checker", chk.by, "arbiter", t.lease.Member)
	return nil
}

// strike counts against the member with key (name) an answer for url
// that two other members' fetches contradicted: a whole strike when it
// saw the same content (same), half otherwise. At Config.RecheckStrikes
// it is quarantined and every answer it gave taken back (purge).
func (d *Dispatcher) strike(ctx context.Context, key, name string, same bool, url string, now time.Time) error {
	tr := d.checks.record(key, name)
	if same {
		tr.strikes += 2
	} else {
		tr.strikes++
	}
	tr.suspect = suspectChecks
	d.run.contradicted++
	d.log.Warn("member's answer contradicted by two other members' fetches of the page; its answers are checked from now on",
		"member", name, "key", key, "url", url, "same_content", same, "strikes", float64(tr.strikes)/2, "quarantined_at", d.cfg.RecheckStrikes)
	if tr.strikes < 2*d.cfg.RecheckStrikes || key == "" || d.members.Quarantine().Has(key) {
		return nil
	}
	why := fmt.Sprintf("its answers were contradicted by two other members' fetches of the same pages (%g strikes, re-checks)",
		float64(tr.strikes)/2)
	if _, err := d.members.Forged(wire.Peer{Key: key}, name, why, now); err != nil {
		return err
	}
	d.run.liars++
	d.forgetChecks(key, name)
	_, err := d.purge(ctx, key)
	return err
}

// forgetChecks drops the checks of the answers of the member with key
// (name): they are all fetched again.
func (d *Dispatcher) forgetChecks(key, name string) {
	c := &d.checks
	c.pending = slices.DeleteFunc(c.pending, func(t *task) bool {
		if (key != "" && t.check.ofKey == key) || (key == "" && t.check.of == name) {
			delete(c.open, t.check.page)
			d.unpend(t)
			return true
		}
		return false
	})
}

// RecheckCounts say what re-checks did (see recheck.go), over the crawl.
type RecheckCounts struct {
	Fetched      int64 `json:"fetched"`      // pages fetched again by another member (arbiters' fetches included)
	Agreed       int64 `json:"agreed"`       // checks that gave the member's values
	Disputed     int64 `json:"disputed"`     // checks that gave other values (a third member arbitrated)
	Unsettled    int64 `json:"unsettled"`    // disputes where all three differed: the page changes
	Failed       int64 `json:"failed"`       // checks the checker could not fetch
	Dropped      int64 `json:"dropped"`      // checks no member could make (fewer than two, or three to arbitrate)
	Contradicted int64 `json:"contradicted"` // answers two other members' fetches contradicted (strikes)
	Liars        int64 `json:"liars"`        // members quarantined for it
	Purged       int64 `json:"purged"`       // pages of members quarantined (or purged) queued again
}

// recheckCounts are the crawl's re-check counters. Callers hold mu.
func (d *Dispatcher) recheckCounts() RecheckCounts {
	r := &d.run
	return RecheckCounts{Fetched: d.total(&r.rechecked), Agreed: d.total(&r.recheckAgreed), Disputed: d.total(&r.recheckDisputed),
		Unsettled: d.total(&r.recheckUnsettled), Failed: d.total(&r.recheckFailed), Dropped: d.total(&r.recheckDropped),
		Contradicted: d.total(&r.contradicted), Liars: d.total(&r.liars), Purged: d.total(&r.purged)}
}
