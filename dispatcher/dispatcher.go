package dispatcher

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"backfill/cluster"
	"backfill/store"
	"backfill/wire"
)

// Dispatcher owns the crawl state. Load and Run may be called from
// different goroutines; everything they share is guarded by mu.
type Dispatcher struct {
	cfg  Config
	log  *slog.Logger
	recv *wire.Receiver
	// pause, while the Run loop gathers a batch, holds the intake
	// reader after its next frame (frames.go).
	pause  atomic.Pointer[intakePause]
	st     *state
	digest string
	name   string
	runID  string

	mu sync.Mutex
	w  *window
	// members is the cluster's member table (cluster.Members: who
	// joined, who is quarantined or refused), with the crawl's hooks.
	members *cluster.Members[*member]
	epoch   int64
	failed  chan sendFail

	refusalLogged map[string]loggedRefusal // refused handshakes logged (security.go)

	left       []MemberStatus           // dropped members, for the status file
	dns        map[string]wire.DNSStats // the latest DNS counters of each resolver (wire.DNSStats.Source)
	polite     map[string]politeNote    // the latest politeness counters of each supervisor process (politeness.go)
	statusWarn bool                     // a failed status write was logged

	// For operators: the ledger (timeline, recent failures, tallies; see
	// ledger.go), and the state and start of the Run in progress or last
	// ended, for Status.
	led      *ledger
	runState string
	runBegan time.Time
	settled  settledFeed // records that became complete, for followers

	// domains balances the registrable domains over every live member and
	// renderDomains over the render-capable ones (cluster.Balancer); route
	// finds a domain's owner on one of them. Members change only in
	// register and drop, which also bump epoch so host queues look their
	// owner up again.
	domains       *cluster.Balancer
	renderDomains *cluster.Balancer

	ctx    context.Context // members' sender goroutines
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool

	// The cluster core (package cluster): who may join, and the lease
	// tokens (under a secret kept in the state, so a restarted process
	// knows its predecessor's: see adopt).
	admit  cluster.Admission
	tokens cluster.Tokens

	nextSeq int64
	recSeq  int64
	gen     int64 // this process's generation, for the budgets (budgets.go)
	seeded  int64 // records up to this seq have their links in the frontier (seeds.go)
	steps   int64 // batches handled by Run, for the log

	lastJoin     time.Time // when the latest member joined
	joinedByBeat bool      // a member joined by Heartbeat: see joinedFresh
	waitLogged   time.Time // the last "waiting for supervisors" line (expect.go)
	waitMembers  int       // members it counted

	// record counters, kept in step with the records table
	nRecords, nComplete, nPartial int
	queuedN                       int

	// decoded records (written back by flush, kept up to recCacheCap),
	// the hosts' budget counts (budgets.go) and the batch's pending
	// (page, record) pairs
	// pagesLeft counts the pages left per host, and response is the
	// mean time a request takes; lastETA is the bound last worked out
	// from them, at etaAt, in etaTook (eta.go).
	pagesLeft hostLeft
	answeredN int64      // tasks answered by this process, and samples of it
	answers   []answered // (see recentRate)
	kidsN     int        // tasks queued for links found on pages (less those dropped)
	kidsHere  int        // of them, on the host of the page being applied (kidsHost)
	kidsHost  string
	kids      []kidsMean // by depth, the new tasks an answered page led to
	response  float64
	lastETA   ETA
	etaAt     time.Time
	etaTook   time.Duration

	recCache   map[int64]*recState
	dirtyRecs  []*recState // of recCache, those changed since the last flush
	hosts      map[string]*hostCount
	dirtyHosts []*hostCount // of hosts, those changed since the last flush
	work       []applyItem
	results    resultCache // cached extractions, decoded

	// targetSets are the distinct target lists, by id in the state and by
	// their JSON (target_sets); matchFields the fields some mapping marks
	// match, the only own values the state keeps of a record;
	// targetFields the names targets picks a record's targets from, once.
	targetSets   map[string]int64
	targetNames  map[int64][]string
	matchFields  []string
	targetFields []string

	// seenKeys is the seen store's filter (seenfilter.go).
	seenKeys *seenFilter

	// run holds the counters since the current Run began (Load's before
	// it, until it does); base the crawl's totals before them, runStart
	// when the Run started (zero between Runs): see totals.go.
	run        runCounts
	base       totals
	runStart   time.Time
	badLines   int
	nMalformed int // malformed lines in the state
	// lateRenders are cached shells reached before any supervisor
	// joined, that may need rendering (renderLate).
	lateRenders []lateRender

	// link filters (what they refused is counted in run)
	filter      *linkFilter
	badTopSites int

	// the frontier's score: the run's model and what it learns from
	// (score.go; what it pruned is counted in run)
	score *scoring

	// the content-seen test (set up by resume; the duplicates it finds
	// are counted in run)
	seen *contentSeen

	// ob keeps found values until the store has them (outbox.go)
	ob *outbox

	// checks are the re-checks (recheck.go); memberRows the members rows
	// of the keys that answered (purge.go).
	checks     rechecks
	memberRows map[string]int64

	// freshness: started bounds the pages that may be fetched again (only
	// those crawled before this Dispatcher was made); refreshOpen counts
	// the fields a refresh is re-checking (open prior rows), refreshBegun
	// says the refresh of Config.Refresh has been started.
	started      time.Time
	refreshOpen  int
	refreshBegun bool

	// kept pages extracted anew when the mappings changed, once (remap.go)
	remapBegun bool

	// failed pages of earlier runs, queued again once (retry.go)
	retryBegun, retryPending  bool
	retryAfter                int64 // key of the last failed page looked at
	retried                   map[string]int64
	retryKept, retryExhausted int64
}

// runCounts are the counters of one Run (and of the Loads before it),
// reset together when Run starts and ends, once the totals have them
// (totals.go). refused counts registrations refused, keyRefused pages a
// record refused; filtered the links not followed by reason, linkFarms
// and duplicates the pages whose links were not expanded.
type runCounts struct {
	pages, reused, late, expired, fieldErrs, refused, keyRefused, adopted int64
	disagreeing                                                           int64
	forged                                                                int64 // answers and registrations forged (cluster.Forged)
	errs, filtered, pruned                                                map[string]int64
	blocked                                                               map[string]int64 // blocked-address errors by fetch.RefusalOf
	redirects                                                             map[string]int64 // redirects to other hosts by outcome (wire.Redirect*; redirect.go)
	linkFarms, duplicates                                                 int64
	requests                                                              int64 // requests made for tasks answered: the page and its redirects on its host
	deferred                                                              int64 // tasks handed back unfetched until their host was ready (wire.ClassDeferred)
	completed                                                             int64 // records a page completed
	renderRetried, renderWanted                                           int64
	wantedRender                                                          map[int64]bool // pages counted in renderWanted
	// freshness: see Summary
	recrawled, notModified, refreshed, changed, unconfirmed int64
	// mappings changed (remap.go): see Summary.Remap
	remaps, reextracted, reapplied, refetched int64
	insecureTLS                               int64 // pages fetched despite a bad certificate

	// members: intake frames that did not decode; re-checks (recheck.go)
	// and purges (purge.go), see RecheckCounts
	malformed                                                                                  int64
	rechecked, recheckAgreed, recheckDisputed, recheckUnsettled, recheckFailed, recheckDropped int64
	contradicted, liars, purged                                                                int64
}

// newRunCounts are zero counts.
func newRunCounts() runCounts {
	return runCounts{errs: make(map[string]int64), filtered: make(map[string]int64), pruned: make(map[string]int64),
		blocked: make(map[string]int64), redirects: make(map[string]int64)}
}

// New opens (or creates) the state in cfg.StateDir, binds the intake and
// returns a Dispatcher ready to Load and Run. Tasks leased by a previous
// process are queued again.
func New(cfg Config) (*Dispatcher, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	filter, bad, nbad, err := newLinkFilter(cfg)
	if err != nil {
		return nil, err
	}
	for i, e := range bad {
		if i == 20 {
			log.Warn("more malformed top-sites lines skipped", "count", nbad-i)
			break
		}
		log.Warn("malformed top-sites line skipped", "error", e)
	}
	if cfg.Blacklist != "" || cfg.ExcludeTop > 0 {
		log.Info("link filter lists loaded", "blacklisted_hosts", len(filter.blacklist),
			"top_sites", len(filter.top), "malformed_top_sites_lines", nbad)
	}
	ctx := context.Background()
	if cfg.StateDir == "" {
		return nil, errors.New("dispatcher: no state directory")
	}
	lock, err := lockState(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	st, err := openState(ctx, cfg.StateDir)
	if err != nil {
		lock.release()
		return nil, err
	}
	st.lock = lock
	led, err := loadLedger(cfg.StateDir)
	if err != nil {
		log.Warn("history of earlier runs not read; starting a new one", "error", err)
	}
	d := &Dispatcher{
		cfg:           cfg,
		log:           log,
		st:            st,
		digest:        cfg.Mappings.Digest(),
		w:             newWindow(),
		domains:       cluster.NewBalancer(),
		renderDomains: cluster.NewBalancer(),
		failed:        make(chan sendFail, 64),
		recCache:      make(map[int64]*recState),
		pagesLeft:     newHostLeft(),
		hosts:         make(map[string]*hostCount),
		run:           newRunCounts(),
		retried:       make(map[string]int64),

		refusalLogged: make(map[string]loggedRefusal),
		admit:         cluster.Admission{Keys: cfg.Keys, Authorized: cfg.Authorized, Names: cfg.Names, Insecure: cfg.Insecure},

		filter:      filter,
		badTopSites: nbad,
		score:       newScoring(),
		started:     time.Now(),
		led:         led,
		checks:      newRechecks(),
	}
	d.members = d.newMembers()
	if err := d.setupOutbox(ctx); err != nil {
		st.close()
		return nil, err
	}
	if err := d.resume(ctx); err != nil {
		st.close()
		return nil, err
	}
	if d.base.starts == 1 {
		// A new crawl (see totals.go): its history starts afresh too.
		d.led = newLedger()
	}
	recv, err := wire.ListenSecure(cfg.Listen, d.admit.Listen())
	if err != nil {
		st.close()
		return nil, fmt.Errorf("dispatcher: intake: %w", err)
	}
	d.recv = recv
	host, _ := os.Hostname()
	d.name = host
	if ep := shownEndpoint(recv.Endpoint()); ep != "" {
		d.name += " " + ep
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	return d, nil
}

// resume reads the counters back, re-queues tasks a previous process had
// leased (only earlier builds wrote leases to the state), sets up the seen
// filter and the target sets, and fills the window.
func (d *Dispatcher) resume(ctx context.Context) error {
	return d.inTx(ctx, d.resumeTx)
}

func (d *Dispatcher) resumeTx(ctx context.Context) error {
	s := d.st
	run, err := s.meta(ctx, "run")
	if err != nil {
		return err
	}
	if run == 0 {
		var b [8]byte
		rand.Read(b[:])
		run = int64(binary.BigEndian.Uint64(b[:]) >> 1)
		if err := s.setMeta(ctx, "run", run); err != nil {
			return err
		}
	}
	d.runID = fmt.Sprintf("%016x", run)
	if err := d.loadTotals(ctx); err != nil {
		return err
	}
	if d.gen, err = s.meta(ctx, "gen"); err != nil {
		return err
	}
	d.gen = (d.gen + 1) & (1<<(62-genShift) - 1)
	if err := s.setMeta(ctx, "gen", d.gen); err != nil {
		return err
	}
	if err := d.setupTokens(ctx); err != nil {
		return err
	}
	if d.nextSeq, err = s.meta(ctx, "next_seq"); err != nil {
		return err
	}
	if d.nextSeq == 0 { // a state of an earlier build
		if d.nextSeq, err = s.scalar(ctx, `SELECT MAX(seq & `+strconv.FormatInt(seqCounterMask, 10)+`) FROM urls`); err != nil {
			return err
		}
	}
	if d.seeded, err = s.meta(ctx, "seeded"); err != nil {
		return err
	}
	// Malformed lines take their places in the input order too.
	if d.recSeq, err = s.scalar(ctx, `SELECT MAX(seq) FROM (SELECT MAX(seq) AS seq FROM records UNION ALL SELECT MAX(seq) FROM malformed)`); err != nil {
		return err
	}
	if err := d.readCounters(ctx); err != nil {
		return err
	}
	if err := d.loadTargetSets(ctx); err != nil {
		return err
	}
	d.matchFields = d.cfg.Mappings.MatchFields()
	d.targetFields = d.cfg.Fields
	if len(d.targetFields) == 0 {
		d.targetFields = d.cfg.Mappings.FieldNames()
	}
	d.targetFields = slices.Compact(slices.Sorted(slices.Values(d.targetFields)))
	if len(d.targetFields) > 0 && d.targetFields[0] == "" {
		d.targetFields = d.targetFields[1:]
	}
	if err := d.setupSeenFilter(ctx); err != nil {
		return err
	}
	if err := d.loadFingerprints(ctx); err != nil {
		return err
	}
	if err := d.countLeft(ctx); err != nil {
		return err
	}
	d.w.spilled = d.queuedN > 0
	return d.refill(ctx)
}

// counters are the Dispatcher's counts that the state keeps in meta, so a
// resume need not count them over every row.
func (d *Dispatcher) counters() []struct {
	key string
	n   *int
	q   string // counts it when meta lacks it (a state of an earlier build)
} {
	return []struct {
		key string
		n   *int
		q   string
	}{
		{"records", &d.nRecords, `SELECT COUNT(*) FROM records`},
		{"complete", &d.nComplete, `SELECT COUNT(*) FROM records WHERE complete = 1`},
		{"partial", &d.nPartial, `SELECT COUNT(*) FROM records WHERE complete = 0 AND nfilled > 0`},
		{"queued", &d.queuedN, `SELECT COUNT(*) FROM urls WHERE state = 0`},
		{"refresh_open", &d.refreshOpen, `SELECT COUNT(*) FROM prior WHERE open = 1`},
		{"malformed", &d.nMalformed, `SELECT COUNT(*) FROM malformed`},
	}
}

func (d *Dispatcher) readCounters(ctx context.Context) error {
	for _, c := range d.counters() {
		var v int64
		err := d.st.q.metaGet.QueryRowContext(ctx, c.key).Scan(&v)
		if errors.Is(err, errNoRows) {
			v, err = d.st.scalar(ctx, c.q)
		}
		if err != nil {
			return fmt.Errorf("dispatcher: state counter %s: %w", c.key, err)
		}
		*c.n = int(v)
	}
	return nil
}

// putCounters writes the counters and the lease and sequence numbers into
// the open transaction.
func (d *Dispatcher) putCounters(ctx context.Context) error {
	for _, c := range d.counters() {
		v := int64(*c.n)
		if c.n == &d.queuedN {
			// A task out on lease is queued as far as the state goes (a
			// restart queues it again), so it counts here; a re-check is
			// not in the state.
			v += int64(len(d.w.leased) - d.checks.out)
		}
		if err := d.st.setMeta(ctx, c.key, v); err != nil {
			return err
		}
	}
	if err := d.st.setMeta(ctx, "next_seq", d.nextSeq); err != nil {
		return err
	}
	if err := d.st.setMeta(ctx, "seeded", d.seeded); err != nil {
		return err
	}
	return nil
}

// loadTargetSets reads the distinct target lists.
func (d *Dispatcher) loadTargetSets(ctx context.Context) error {
	d.targetSets, d.targetNames = make(map[string]int64), make(map[int64][]string)
	rows, err := query(ctx, d.st.q.targetSets)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var names string
		if err := rows.Scan(&id, &names); err != nil {
			return fmt.Errorf("dispatcher: state target sets: %w", err)
		}
		var list []string
		if err := json.Unmarshal([]byte(names), &list); err != nil {
			return fmt.Errorf("dispatcher: state target set %d: %w", id, err)
		}
		d.targetSets[names], d.targetNames[id] = id, list
	}
	return rows.Err()
}

// targetSet returns the id of a target list, adding it if new.
func (d *Dispatcher) targetSet(ctx context.Context, targets []string) (int64, error) {
	b, _ := json.Marshal(targets)
	if targets == nil {
		b = []byte("[]")
	}
	if id, ok := d.targetSets[string(b)]; ok {
		return id, nil
	}
	r, err := exec(ctx, d.st.q.targetSetIns, string(b))
	if err != nil {
		return 0, err
	}
	id, err := r.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("dispatcher: state target set: %w", err)
	}
	d.targetSets[string(b)], d.targetNames[id] = id, targets
	return id, nil
}

// Endpoint is the intake endpoint actually bound (port resolved).
func (d *Dispatcher) Endpoint() string { return d.recv.Endpoint() }

// Close stops talking to supervisors, closes the intake and the state.
// Leased tasks are queued in the state, so the next New sends them again.
// Close must not be called while Run is running.
func (d *Dispatcher) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.cancel()
	for _, m := range d.members.All() {
		m.stop()
	}
	d.wg.Wait()
	err := d.recv.Close()
	ctx := context.Background()
	// The counters, and the seen filter for a quick start next time; a
	// filter that cannot be saved is rebuilt then.
	err2 := d.st.begin(ctx)
	if err2 == nil {
		err2 = d.putCounters(ctx)
	}
	if err2 == nil {
		err2 = d.saveTotals(ctx, true)
	}
	if err2 == nil {
		if ferr := d.saveSeenFilter(ctx); ferr != nil {
			d.log.Warn("seen filter not saved; the next start rebuilds it", "error", ferr)
		}
		err2 = d.st.commit(ctx)
	}
	d.st.rollback()
	return errors.Join(err, err2, d.st.close())
}

// ownValues is the JSON of r's own values of the match-key fields, the
// only of its fields the state keeps (attribution compares pages with
// them); nil when it has none.
func (d *Dispatcher) ownValues(r store.Record) ([]byte, error) {
	var own map[string]string
	for _, name := range d.matchFields {
		if v := r.Fields[name]; v != "" {
			if own == nil {
				own = make(map[string]string, len(d.matchFields))
			}
			own[name] = v
		}
	}
	if own == nil {
		return nil, nil
	}
	b, err := json.Marshal(own)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: record %q: %w", r.ID, err)
	}
	return b, nil
}

// targets are the fields to fill on r: Config.Fields that r lacks, or by
// default every field of r's own (a column or key it has, left empty) that
// some mapping can produce. Fields the record does not have at all are not
// targets by default: generic mappings produce many (og_title, job_title…)
// and a record would otherwise never count as complete.
func (d *Dispatcher) targets(r store.Record) []string {
	own := len(d.cfg.Fields) == 0
	var out []string
	for _, n := range d.targetFields { // sorted, once each
		v, has := r.Fields[n]
		if v != "" || (own && !has) {
			continue
		}
		out = append(out, n)
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
