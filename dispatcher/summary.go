package dispatcher

import (
	"context"
	"fmt"
	"maps"
	"time"

	"backfill/cluster"
	"backfill/wire"
)

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
	// Rechecks says what re-checks did: pages fetched again by another
	// member, agreeing or not, and the answers contradicted (recheck.go).
	Rechecks RecheckCounts `json:"rechecks"`
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
	// refused because a match key disagreed, supervisors' registrations
	// (mapping digest differs, key not authorized: every Hello and
	// Heartbeat), handshakes of unauthorized keys and intake frames that
	// did not decode. RefusedBy splits it: "match-key", "registration",
	// "handshake", "malformed-frame".
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
	// InsecureTLS counts the pages fetched over a connection whose
	// certificate failed verification, under the supervisors'
	// --insecure-tls: each of their values says so in its provenance.
	InsecureTLS int64 `json:"insecure_tls"`

	// Pruned counts the links not followed for a record because they
	// could not pay, by reason (the Prune* constants; a link of a page
	// counts once for each record that left it). Requests counts the
	// requests made for the tasks answered (a page and the redirects
	// followed on its host; the supervisors' robots.txt and soft-404
	// probes are theirs), and RequestsPerComplete divides them by the
	// records the crawl completed (a page filled their last target;
	// those with nothing to fill are not counted).
	Pruned              map[string]int64 `json:"pruned"`
	Requests            int64            `json:"requests"`
	RequestsPerComplete float64          `json:"requests_per_complete"`
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

	// Remap says what a change of mappings since the crawl's last run did
	// to the pages fetched before (remap.go); Pages counts what the run
	// fetched besides.
	Remap Remap `json:"remap"`

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
	// ETA is how long the crawl will take at least, and what bounds it
	// (eta.go).
	ETA ETA
}

func (d *Dispatcher) progress(start time.Time) Progress {
	return Progress{
		Records:  d.nRecords,
		Complete: d.nComplete,
		Partial:  d.nPartial,
		Queued:   d.queuedN,
		InFlight: len(d.w.leased),
		Waiting:  d.w.waitingRender(),
		Members:  d.members.Len(),
		Pages:    d.total(&d.run.pages),
		Elapsed:  time.Since(start),
		ETA:      d.eta(time.Now()),
	}
}

// summary reads the record counts and outcomes from the state, writes the
// outcomes to the store, adds the crawl's counters, and ends the Run's
// share of the totals.
func (d *Dispatcher) summary(ctx context.Context) (*Summary, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := &Summary{
		Restarts:    int(d.base.starts - 1),
		BadLines:    d.badLines,
		Pages:       d.total(&d.run.pages),
		Reused:      d.total(&d.run.reused),
		Disagreeing: d.total(&d.run.disagreeing),
		Late:        d.total(&d.run.late),
		Forged:      d.total(&d.run.forged),
		Quarantined: d.members.Quarantine().List(),
		Rechecks:    d.recheckCounts(),
		Adopted:     d.total(&d.run.adopted),
		Expired:     d.total(&d.run.expired),
		Errors:      sumMaps(d.base.errs, d.run.errs),
		BlockedBy:   sumMaps(d.base.blocked, d.run.blocked),
		FieldErrors: d.total(&d.run.fieldErrs),
		Waiting:     d.w.waitingRender(),
		Filtered:    sumMaps(d.base.filtered, d.run.filtered),
		Pruned:      sumMaps(d.base.pruned, d.run.pruned),
		Requests:    d.total(&d.run.requests),

		RequestsPerComplete: d.requestsPerComplete(),
		LinkFarms:           d.total(&d.run.linkFarms),
		Duplicates:          d.total(&d.run.duplicates),
		BadTopSites:         d.badTopSites,
		Elapsed:             d.elapsed(),

		Retried:        maps.Clone(d.retried),
		RetryKept:      d.retryKept,
		RetryExhausted: d.retryExhausted,

		RenderRetried: d.total(&d.run.renderRetried),
		RenderWanted:  d.base.n["render_wanted"] + d.renderWantedTotal(),

		Recrawled:   d.total(&d.run.recrawled),
		NotModified: d.total(&d.run.notModified),
		Refreshed:   d.total(&d.run.refreshed),
		Changed:     d.total(&d.run.changed),
		Unconfirmed: d.total(&d.run.unconfirmed),
		Remap:       d.remapTotals(),
		InsecureTLS: d.total(&d.run.insecureTLS),
		DNS:         d.dnsTotal(),
		Politeness:  d.politeness(),
	}
	s.RefusedBy = map[string]int64{}
	for why, n := range map[string]int64{"match-key": d.total(&d.run.keyRefused), "registration": d.total(&d.run.refused),
		"handshake": d.recv.Refused(), "malformed-frame": d.total(&d.run.malformed)} {
		if n > 0 {
			s.RefusedBy[why] = n
			s.Refused += n
		}
	}
	s.ElapsedSeconds = s.Elapsed.Seconds()
	if s.Elapsed > 0 {
		s.PagesPerSec = float64(s.Pages) / s.Elapsed.Seconds()
	}
	d.foldTotals()
	// The records as this process counts them, should the state not be
	// read (or written: a full disk) below.
	s.Records, s.Complete, s.Partial = d.nRecords, d.nComplete, d.nPartial
	s.Untouched = s.Records - s.Complete - s.Partial
	if d.closed {
		return s, nil
	}
	if err := d.saveTotals(ctx, true); err != nil {
		return s, err
	}
	err := d.st.conn.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(complete), 0), COALESCE(SUM(skipped), 0),
		COALESCE(SUM(complete = 0 AND nfilled > 0), 0), COALESCE(SUM(complete = 0 AND nfilled = 0), 0) FROM records`).
		Scan(&s.Records, &s.Complete, &s.Skipped, &s.Partial, &s.Untouched)
	if err != nil {
		return s, fmt.Errorf("dispatcher: summary: %w", err)
	}
	if s.Reasons, err = d.outcomes(ctx, true); err != nil {
		return s, err
	}
	s.UntouchedIDs, err = column[string](d.st.conn.QueryContext(ctx, `SELECT id FROM records WHERE complete = 0 AND nfilled = 0 ORDER BY seq LIMIT 50`))
	return s, err
}
