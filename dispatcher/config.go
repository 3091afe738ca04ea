package dispatcher

import (
	"errors"
	"log/slog"
	"time"

	"backfill/etl"
	"backfill/records"
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
	// DefaultDelay is the delay the ETA (eta.go) assumes for a host not
	// heard of yet until a supervisor says its own (wire.Hello); 0: none.
	DefaultDelay time.Duration
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

	// Re-checks (see recheck.go). RecheckShare is the share of each
	// member's value-giving answers fetched again by another member and
	// compared: default DefaultRecheckShare on a secured cluster (Keys),
	// none on a plaintext one, whose members are the dispatcher's own;
	// negative: none. RecheckStrikes is how many answers of a member two
	// other members' fetches must contradict for it to be quarantined and
	// every answer it gave fetched again (default
	// DefaultRecheckStrikes).
	RecheckShare   float64
	RecheckStrikes int

	// Security (see security.go). With Keys, the intake is a CURVE server
	// that accepts only supervisors whose public key is in Authorized, and
	// tasks go only to task sockets holding one of those keys. Without,
	// the intake and every supervisor endpoint must be loopback unless
	// Insecure.
	// Names names the authorized keys (key → name, wire.LoadRoster): a
	// member's name is its key's, whatever its Hello says; a key without
	// one is named after the key (cluster.KeyName).
	Keys       wire.Keys
	Authorized []string
	Names      map[string]string
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
	// ID says where records' ids come from: a column (records.DefaultID
	// when empty), or records.IDLine, their line numbers. A file without
	// the column is refused; a record with an empty id is malformed.
	ID records.ID

	Logger   *slog.Logger // nil discards
	Progress func(Progress)
}

// DefaultExpectTimeout is how long Run waits for Config.Expect
// supervisors when Config.ExpectTimeout is zero.
const DefaultExpectTimeout = 2 * time.Minute

// DefaultListen is the intake endpoint when Config.Listen is empty.
const DefaultListen = "tcp://127.0.0.1:5550"

// withDefaults is cfg with its zero values given their defaults, or an
// error for a Config New cannot work with.
func withDefaults(cfg Config) (Config, error) {
	if cfg.Mappings == nil {
		return cfg, errors.New("dispatcher: no mappings")
	}
	if cfg.Store == nil {
		return cfg, errors.New("dispatcher: no store")
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
	switch {
	case cfg.RecheckShare < 0:
		cfg.RecheckShare = 0
	case cfg.RecheckShare == 0 && !cfg.Keys.IsZero():
		cfg.RecheckShare = DefaultRecheckShare
	}
	cfg.RecheckShare = min(cfg.RecheckShare, 1)
	if cfg.RecheckStrikes <= 0 {
		cfg.RecheckStrikes = DefaultRecheckStrikes
	}
	if cfg.RecrawlAfter < 0 {
		return cfg, errors.New("dispatcher: negative recrawl age")
	}
	if cfg.Refresh && cfg.RecrawlAfter == 0 {
		return cfg, errors.New("dispatcher: refresh needs a recrawl age (the age of the values to re-check)")
	}
	return cfg, nil
}
