package dispatcher

import (
	"backfill/records"
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
	"time"

	"backfill/cluster"
	"backfill/etl"
	"backfill/store"
	"backfill/wire"
)

// Config configures a Dispatcher. Zero values take the defaults noted.
type Config struct {
	StateDir     string        // state.db lives here; created if missing
	Listen       string        // intake endpoint, default "tcp://127.0.0.1:5550"
	Mappings     *etl.Set      // required
	Store        store.Store   // required: where records and filled values go
	Depth        int           // link depth limit (0 = only the records' own links); default 1, negative means 0
	Fields       []string      // target fields; default: mapping fields the record lacks
	Lease        time.Duration // default 2m
	HostInFlight int           // default 2
	// MemberLease is a member's hold on the hosts routed to it, renewed
	// by every heartbeat heard (wire.Renew; default DefaultMemberLease,
	// at least three heartbeats). A member cut off that long has stopped
	// asking them anything, and after its longest request too they go to
	// another member.
	MemberLease time.Duration
	// MaxRedirects bounds a page's chain of redirects across hosts, as
	// the fetcher's bounds it on one (fetch.Config.MaxRedirects, whose
	// default is the default).
	MaxRedirects int
	Heartbeat    time.Duration // supervisors' heartbeat interval, default 2s
	// Expect, when set, is how many supervisors the crawl has: nothing is
	// dispatched until that many have joined (a log line says so while it
	// waits), so that domains are not handed to the first ones and moved
	// as the others join. After ExpectTimeout (default
	// DefaultExpectTimeout; negative: no limit) it dispatches to those
	// that did join, and says so. Without Expect, dispatching starts
	// after a quiet spell that lets late ones join.
	Expect        int
	ExpectTimeout time.Duration

	// Link filters (see filter.go). Zero takes the default noted; a
	// negative value turns the limit off. Only the blacklist applies to a
	// record's own links: the user gave those on purpose.
	HostBudget   int    // tasks queued per host by this process, default 1000
	RecordBudget int    // tasks queued on behalf of one record, default 200
	MaxPathDepth int    // path segments of a link, default 16
	MaxRepeats   int    // occurrences of one path segment in a link, default 3
	MaxFanout    int    // distinct registrable domains, and hosts outside its own domain, a page may link to and be expanded, default 100
	TopSites     string // ranked CSV of popular sites: "rank,domain" per line
	ExcludeTop   int    // links found on pages into the top ExcludeTop sites are not followed; 0: off
	Blacklist    string // file of hosts never crawled, one per line with their subdomains (IP/CIDR lines are the supervisors')

	// Security (see security.go). With Keys, the intake is a CURVE server
	// that accepts only supervisors whose public key is in Authorized, and
	// tasks go only to task sockets holding one of those keys. Without,
	// the intake and every supervisor endpoint must be loopback unless
	// Insecure.
	Keys       wire.Keys
	Authorized []string
	Insecure   bool

	// Freshness (see refresh.go). RecrawlAfter is the recrawl age: a page
	// crawled longer ago than that, before this Dispatcher was made, is
	// fetched again when a record needs it (conditionally, with the
	// validators of its last fetch) instead of reusing its cached
	// extraction; 0 reuses cached extractions however old. Refresh
	// re-checks, once per Dispatcher, when Run starts, the filled values
	// older than RecrawlAfter: their records are worked on again and a
	// value that changed replaces the old one, which goes to the field's
	// History. Refresh needs RecrawlAfter.
	RecrawlAfter time.Duration
	Refresh      bool

	// Failed pages of earlier runs (see retry.go). When Run begins on a
	// state an earlier process left, a page that failed with a transient
	// class (dns, connect, timeout, 5xx, 429, blocked address, robots.txt
	// unavailable) is queued again while it has failed fewer than
	// RetryAttempts times in a row (default DefaultRetryAttempts; negative:
	// never); RetryFailed queues every failed page again, whatever its
	// class and count.
	RetryAttempts int
	RetryFailed   bool

	// StoreDrainTimeout is how long Run waits at its end for the values
	// found to reach the store (see outbox.go); what has not by then
	// stays in the state and is pushed on the next start. Default
	// DefaultStoreDrainTimeout.
	StoreDrainTimeout time.Duration

	// LateJoinWait is how long a finished Run goes on answering the
	// supervisors that say Hello with a Bye (see tellLateJoiners): one
	// restarted in the run's last moments learns that the run is over
	// instead of waiting for it. 0: not at all (supervisors in the same
	// process, as `backfill run` has, need none).
	LateJoinWait time.Duration

	// Strict refuses a records file with any malformed line, before
	// loading any of it; otherwise malformed lines are reported, kept
	// (in the store, for export) and the rest is crawled.
	Strict bool

	Logger   *slog.Logger // nil discards
	Progress func(Progress)
}

// DefaultExpectTimeout is how long Run waits for Config.Expect
// supervisors when Config.ExpectTimeout is zero.
const DefaultExpectTimeout = 2 * time.Minute

// DefaultListen is the intake endpoint when Config.Listen is empty.
const DefaultListen = "tcp://127.0.0.1:5550"

// Summary is the outcome of a crawl, as of the end of a Run. A crawl may
// take several dispatcher processes (stopped, or dead, and resumed on the
// same state): the counters cover them all (see totals.go), and Restarts
// says how many there were after the first. Record counts cover every
// record in the state (Records = Complete + Partial + Untouched; Skipped,
// the records that had nothing to fill from the start, are counted in
// Complete). The JSON keys are what `--summary` writes.
type Summary struct {
	Records   int `json:"records"`
	Complete  int `json:"complete"`
	Partial   int `json:"partial"`
	Untouched int `json:"untouched"`
	Skipped   int `json:"already_complete"`
	// Finished says the crawl has no work left; false when Run was
	// stopped (the next Run on the state resumes it).
	Finished bool `json:"finished"`
	Restarts int  `json:"restarts"` // dispatcher processes of this crawl before the last one
	// UntouchedIDs are the first 50 records with nothing found, in input
	// order. Reasons counts the incomplete records (partial or untouched)
	// by why their missing fields stayed missing (the Reason* constants),
	// with the first ReasonIDs ids of each.
	UntouchedIDs []string               `json:"untouched_ids,omitempty"`
	Reasons      map[string]ReasonCount `json:"incomplete_by_reason,omitempty"`
	BadLines     int                    `json:"malformed_lines"` // malformed input lines Load read (kept for export, not crawled)
	Pages        int64                  `json:"pages"`           // pages fetched and extracted (Class "")
	Reused       int64                  `json:"reused"`          // cached extractions applied to another record
	// Disagreeing counts the pages applied to a record whose match key
	// named someone else: their values were refused, their links followed.
	Disagreeing int64 `json:"disagreeing"`
	Late        int64 `json:"late"` // late results ignored (answers to leases their sender held and lost)
	// Forged counts the frames refused as forged: answers to a lease their
	// sender did not hold (another member's, nobody's, an answer sent
	// again, a guessed token) and registrations under another member's
	// name. Quarantined lists the keys that sent them, refused since
	// (see cluster.Quarantine).
	Forged      int64                 `json:"forged"`
	Quarantined []cluster.Quarantined `json:"quarantined,omitempty"`
	// Adopted counts results for leases their sender held and lost (of
	// an earlier dispatcher process, this one restarted, or expired)
	// whose task was still queued: applied, so the page is not fetched
	// again.
	Adopted     int64            `json:"adopted"`
	Expired     int64            `json:"expired"` // leases that expired and were re-sent
	Errors      map[string]int64 `json:"errors"`
	BlockedBy   map[string]int64 `json:"blocked_by,omitempty"` // Errors["blocked-address"] by fetch.RefusalOf, to name what lifts it
	FieldErrors int64            `json:"field_errors"`
	// Refused counts what was refused: pages whose values a record
	// refused because a match key disagreed, and supervisors' registrations
	// (mapping digest differs, key not authorized). RefusedBy splits it:
	// "match-key", "registration".
	Refused   int64            `json:"refused"`
	RefusedBy map[string]int64 `json:"refused_by,omitempty"`
	Waiting   int              `json:"waiting_render"` // render tasks left with no render-capable supervisor
	// Filtered counts the links not followed, by reason (the Filter*
	// constants). LinkFarms counts the pages whose links were not
	// expanded; BadTopSites the malformed lines skipped in the top-sites
	// file.
	Filtered    map[string]int64 `json:"filtered"`
	LinkFarms   int64            `json:"link_farms"`
	BadTopSites int              `json:"malformed_top_sites_lines"`
	// Duplicates counts the fetched pages whose text was already seen at
	// another URL (the same, or within a few simhash bits): their values
	// were applied but their links not expanded.
	Duplicates int64 `json:"duplicates"`
	// Elapsed is the crawl's working time, every process's Runs added up;
	// ElapsedSeconds is it in seconds, for JSON.
	Elapsed        time.Duration `json:"-"`
	ElapsedSeconds float64       `json:"elapsed_seconds"`
	PagesPerSec    float64       `json:"pages_per_sec"`

	// Failed pages of earlier runs (see retry.go), when this Run began:
	// Retried counts, by the class they failed with, those queued again;
	// RetryKept those kept as they were because their failure is
	// permanent (a 404, a robots.txt rule: Config.RetryFailed retries
	// them), RetryExhausted those that failed Config.RetryAttempts times.
	Retried        map[string]int64 `json:"retried,omitempty"`
	RetryKept      int64            `json:"retry_kept"`
	RetryExhausted int64            `json:"retry_exhausted"`

	// RenderRetried counts pages sent again as render tasks: their HTML
	// was a JavaScript shell and a record still lacked a field a matching
	// mapping could find once rendered. RenderWanted counts such pages
	// that were not, for want of a render-capable supervisor; their
	// static result stands.
	RenderRetried int64 `json:"render_retried"`
	RenderWanted  int64 `json:"render_wanted"`

	// Store writes of the last Run (see outbox.go): StoreWritten values
	// the store acknowledged, StoreRetried failed pushes tried again.
	// StorePending values still waiting when Run returned, kept in the
	// state and pushed on the next start; StoreRefused values of records
	// the store does not have (the state and the store are of different
	// crawls), also kept.
	StoreWritten int64 `json:"store_written"`
	StoreRetried int64 `json:"store_retried"`
	StorePending int   `json:"store_pending"`
	StoreRefused int   `json:"store_refused"`

	// Freshness. Recrawled counts the pages queued again because their
	// last crawl was older than Config.RecrawlAfter. NotModified counts
	// the answers to conditional requests that said the page had not
	// changed (their cached extraction was applied). With Config.Refresh,
	// Refreshed counts the fields re-checked whose value was found again
	// unchanged, Changed those whose value changed (the old one went to
	// the field's History), and Unconfirmed those the refresh found no
	// value for (the old value stays).
	Recrawled   int64 `json:"recrawled"`
	NotModified int64 `json:"not_modified"`
	Refreshed   int64 `json:"refreshed"`
	Changed     int64 `json:"changed"`
	Unconfirmed int64 `json:"unconfirmed"`

	// DNS sums the supervisors' name resolution (see Status.DNS); nil
	// when none has a resolver of its own.
	DNS *wire.DNSStats `json:"dns,omitempty"`

	// Politeness: redirects by outcome, the most requests in flight to
	// one host, requests repeated.
	Politeness
}

// Progress is a snapshot passed to Config.Progress while Run works.
type Progress struct {
	Records, Complete, Partial int
	Queued, InFlight           int
	Waiting                    int // render tasks with no render-capable supervisor
	Members                    int
	Pages                      int64
	Elapsed                    time.Duration
}

// LoadReport says what Load read.
type LoadReport struct {
	Records int // good records in the file (new and already known)
	// New counts the records not seen before: 0 when the file was taken
	// in before, and when a crash cut its intake short, those from its
	// first read on.
	New int
	Bad int // malformed lines: not crawled for, exported marked
	// NothingToFill counts the new records that had no target field
	// (none of their empty fields is one the mappings produce, nor one
	// of Config.Fields): complete from the start.
	NothingToFill int
	Errors        []error // "file:line: reason", malformed lines and ignored values; at most maxReported
}

const maxReported = records.MaxReported

// Dispatcher owns the crawl state. Load and Run may be called from
// different goroutines; everything they share is guarded by mu.
type Dispatcher struct {
	cfg    Config
	log    *slog.Logger
	recv   *wire.Receiver
	st     *state
	digest string
	name   string
	runID  string

	mu      sync.Mutex
	w       *window
	members map[string]*member
	epoch   int64
	refused map[string]bool
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

	// The cluster core (package cluster): who may join, the lease
	// tokens (under a secret kept in the state, so a restarted process
	// knows its predecessor's: see adopt), the keys quarantined.
	admit  cluster.Admission
	tokens cluster.Tokens
	quar   *cluster.Quarantine

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
	recCache map[int64]*recState
	hosts    map[string]*hostCount
	work     []applyItem
	results  resultCache // cached extractions, decoded

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

	// the content-seen test (set up by resume; the duplicates it finds
	// are counted in run)
	seen *contentSeen

	// ob keeps found values until the store has them (outbox.go)
	ob *outbox

	// freshness: started bounds the pages that may be fetched again (only
	// those crawled before this Dispatcher was made); refreshOpen counts
	// the fields a refresh is re-checking (open prior rows), refreshBegun
	// says the refresh of Config.Refresh has been started.
	started      time.Time
	refreshOpen  int
	refreshBegun bool

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
	errs, filtered                                                        map[string]int64
	blocked                                                               map[string]int64 // blocked-address errors by fetch.RefusalOf
	redirects                                                             map[string]int64 // redirects to other hosts by outcome (wire.Redirect*; redirect.go)
	linkFarms, duplicates                                                 int64
	renderRetried, renderWanted                                           int64
	wantedRender                                                          map[int64]bool // pages counted in renderWanted
	// freshness: see Summary
	recrawled, notModified, refreshed, changed, unconfirmed int64
}

// newRunCounts are zero counts.
func newRunCounts() runCounts {
	return runCounts{errs: make(map[string]int64), filtered: make(map[string]int64), blocked: make(map[string]int64),
		redirects: make(map[string]int64)}
}

// New opens (or creates) the state in cfg.StateDir, binds the intake and
// returns a Dispatcher ready to Load and Run. Tasks leased by a previous
// process are queued again.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Mappings == nil {
		return nil, errors.New("dispatcher: no mappings")
	}
	if cfg.Store == nil {
		return nil, errors.New("dispatcher: no store")
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.Depth < 0 {
		cfg.Depth = 0
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 2 * time.Minute
	}
	if cfg.HostInFlight <= 0 {
		cfg.HostInFlight = 2
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 2 * time.Second
	}
	if cfg.MemberLease <= 0 {
		cfg.MemberLease = DefaultMemberLease
	}
	cfg.MemberLease = max(cfg.MemberLease, 3*cfg.Heartbeat)
	if cfg.RecrawlAfter < 0 {
		return nil, errors.New("dispatcher: negative recrawl age")
	}
	if cfg.Refresh && cfg.RecrawlAfter == 0 {
		return nil, errors.New("dispatcher: refresh needs a recrawl age (the age of the values to re-check)")
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
		members:       make(map[string]*member),
		domains:       cluster.NewBalancer(),
		renderDomains: cluster.NewBalancer(),
		refused:       make(map[string]bool),
		failed:        make(chan sendFail, 64),
		recCache:      make(map[int64]*recState),
		hosts:         make(map[string]*hostCount),
		run:           newRunCounts(),
		retried:       make(map[string]int64),

		refusalLogged: make(map[string]loggedRefusal),
		admit:         cluster.Admission{Keys: cfg.Keys, Authorized: cfg.Authorized, Insecure: cfg.Insecure},
		quar:          cluster.NewQuarantine(log),

		filter:      filter,
		badTopSites: nbad,
		started:     time.Now(),
		led:         led,
	}
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
			// restart queues it again), so it counts here.
			v += int64(len(d.w.leased))
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
	for _, m := range d.members {
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
		err2 = d.saveTotals(ctx)
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
