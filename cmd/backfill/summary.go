package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"backfill/dispatcher"
	"backfill/fetch"
	"backfill/sqlitedb"
	"backfill/wire"
)

// writeSummary reports a run: as text on w, with what to do when runErr
// (what stopped it, nil when none did) says the disk is full, and as
// JSON in path when path is not empty.
func writeSummary(w io.Writer, s *dispatcher.Summary, path string, runErr error, stateDir string) error {
	printSummary(w, s)
	if sqlitedb.IsFull(runErr) {
		fmt.Fprintf(w, "the disk is full: free space where the state directory (%s) and the results store are, then run the same command again: the crawl resumes where it stopped\n", stateDir)
	}
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}

func printSummary(w io.Writer, s *dispatcher.Summary) {
	if !s.Finished {
		fmt.Fprint(w, "\nthe crawl stopped before it finished; so far:")
	}
	fmt.Fprintf(w, "\nrecords: %d  complete: %d (already complete: %d)  partial: %d  untouched: %d  malformed lines: %d\n",
		s.Records, s.Complete, s.Skipped, s.Partial, s.Untouched, s.BadLines)
	fmt.Fprintf(w, "pages fetched: %d  extractions reused: %d  late results ignored: %d  field errors: %d\n",
		s.Pages, s.Reused, s.Late, s.FieldErrors)
	if line := remapLine(s); line != "" {
		fmt.Fprintln(w, line)
	}
	if s.Disagreeing > 0 {
		fmt.Fprintf(w, "pages about someone else (values refused, links followed): %d\n", s.Disagreeing)
	}
	restarts := ""
	if s.Restarts > 0 {
		restarts = fmt.Sprintf("  (the whole crawl: %d dispatcher restart(s))", s.Restarts)
	}
	fmt.Fprintf(w, "working time: %s  pages/s: %.1f%s\n", s.Elapsed.Round(time.Millisecond), s.PagesPerSec, restarts)
	if s.DNS != nil && s.DNS.Lookups > 0 {
		fmt.Fprintf(w, "dns: %s\n", dnsLine(*s.DNS))
	}
	if line := politenessLine(s.Politeness); line != "" {
		fmt.Fprintln(w, line)
	}
	if s.Refused > 0 {
		fmt.Fprintf(w, "refused: %d  (%s)\n", s.Refused, countsLine(s.RefusedBy))
	}
	if line := recheckLine(s.Rechecks); line != "" {
		fmt.Fprintln(w, line)
	}
	if s.Forged > 0 || len(s.Quarantined) > 0 {
		fmt.Fprintf(w, "forged frames refused: %d  members quarantined: %d (no tasks; frames refused until the dispatcher restarts with the key authorized)\n",
			s.Forged, len(s.Quarantined))
		for _, q := range s.Quarantined {
			fmt.Fprintf(w, "  %s  key %s  from %s: %s (%d frames refused)\n", cmp.Or(q.Member, "-"), q.Key, cmp.Or(q.Address, "?"), q.Why, q.Count)
		}
	}
	if s.Adopted > 0 {
		fmt.Fprintf(w, "answers to the previous dispatcher process applied (not fetched again): %d\n", s.Adopted)
	}
	if s.Recrawled > 0 || s.NotModified > 0 || s.Refreshed+s.Changed+s.Unconfirmed > 0 {
		fmt.Fprintf(w, "pages fetched again (older than --recrawl-after): %d  not modified (304, cached extraction applied): %d\n",
			s.Recrawled, s.NotModified)
	}
	if s.Refreshed+s.Changed+s.Unconfirmed > 0 {
		fmt.Fprintf(w, "fields refreshed: %d unchanged  %d changed (old value kept in history)  %d not found again (old value kept)\n",
			s.Refreshed, s.Changed, s.Unconfirmed)
	}
	if s.StoreRetried > 0 || s.StorePending > 0 || s.StoreRefused > 0 {
		fmt.Fprintf(w, "store writes: %d written  %d retried  %d pending (kept in the state, pushed on the next start)  %d refused (record unknown to the store)\n",
			s.StoreWritten, s.StoreRetried, s.StorePending, s.StoreRefused)
	}
	if len(s.Retried) > 0 {
		fmt.Fprintf(w, "failed pages of earlier runs fetched again: %s\n", countsLine(s.Retried))
	}
	if s.RetryKept > 0 || s.RetryExhausted > 0 {
		fmt.Fprintf(w, "failed pages of earlier runs not fetched again: %d permanent (404, 410, robots.txt rules…)  %d failed --retry-attempts times; --retry-failed fetches them again\n",
			s.RetryKept, s.RetryExhausted)
	}
	if s.RenderRetried > 0 {
		fmt.Fprintf(w, "pages rendered because their HTML was a JavaScript shell: %d\n", s.RenderRetried)
	}
	if s.Waiting > 0 {
		fmt.Fprintf(w, "pages left waiting for a render node: %d (their mappings say render: start supervisors with --render)\n", s.Waiting)
	}
	if s.RenderWanted > 0 {
		fmt.Fprintf(w, "pages that need JavaScript, left unrendered: %d (start supervisors with --render on a machine with Chromium)\n", s.RenderWanted)
	}
	if len(s.Errors) > 0 {
		classes := make([]string, 0, len(s.Errors))
		for c := range s.Errors {
			classes = append(classes, c)
		}
		sort.Strings(classes)
		parts := make([]string, len(classes))
		for i, c := range classes {
			parts[i] = fmt.Sprintf("%s=%d", c, s.Errors[c])
		}
		fmt.Fprintf(w, "errors by class: %s\n", strings.Join(parts, " "))
	}
	if hint := guardSummary(s.BlockedBy); hint != "" {
		fmt.Fprintln(w, hint)
	}
	if s.InsecureTLS > 0 {
		fmt.Fprintf(w, "pages fetched despite a bad TLS certificate (--insecure-tls): %d (export --provenance gives each value's tls_error)\n", s.InsecureTLS)
	}
	if s.Duplicates > 0 {
		fmt.Fprintf(w, "duplicate pages (text already seen at another URL; values applied, links not followed): %d\n", s.Duplicates)
	}
	if s.Requests > 0 {
		fmt.Fprintf(w, "requests for pages: %d  per complete record: %.1f\n", s.Requests, s.RequestsPerComplete)
	}
	if len(s.Pruned) > 0 {
		fmt.Fprintf(w, "links pruned (could not pay; one per record that left them): %s\n", countsLine(s.Pruned))
	}
	if len(s.Filtered) > 0 || s.BadTopSites > 0 {
		fmt.Fprintf(w, "links not followed: %s  (link farms: %d, malformed top-sites lines: %d)\n",
			countsLine(s.Filtered), s.LinkFarms, s.BadTopSites)
	}
	if len(s.Reasons) > 0 {
		fmt.Fprintln(w, "incomplete records by reason (export --provenance says why for each):")
		for _, r := range dispatcher.ReasonOrder() {
			c, ok := s.Reasons[r]
			if !ok {
				continue
			}
			more := ""
			if c.Records > len(c.IDs) {
				more = fmt.Sprintf(" … and %d more", c.Records-len(c.IDs))
			}
			fmt.Fprintf(w, "  %-18s %d: %s%s\n", r, c.Records, strings.Join(c.IDs, ", "), more)
		}
	}
}

// remapLine says what a change of mappings since the last run did: the
// kept pages re-extracted without a request, and what was fetched; ""
// when the mappings did not change.
func remapLine(s *dispatcher.Summary) string {
	if !s.Remap.Changed {
		return ""
	}
	line := fmt.Sprintf("mappings changed: %d pages re-extracted, %d fetched", s.Remap.Reextracted, s.Pages)
	if s.Remap.Refetched > 0 {
		line += fmt.Sprintf(" (%d of them not kept, fetched again)", s.Remap.Refetched)
	}
	return line
}

// recheckLine says what re-checks of members' answers did, "" when none
// was made.
func recheckLine(r dispatcher.RecheckCounts) string {
	if r.Fetched == 0 && r.Dropped == 0 && r.Purged == 0 {
		return ""
	}
	line := fmt.Sprintf("re-checked answers: %d pages fetched again by another member  %d agreed  %d disputed (%d unsettled)  %d failed  %d not made",
		r.Fetched, r.Agreed, r.Disputed, r.Unsettled, r.Failed, r.Dropped)
	if r.Contradicted > 0 || r.Purged > 0 {
		line += fmt.Sprintf("  answers contradicted: %d  members quarantined for it: %d  their pages queued again: %d", r.Contradicted, r.Liars, r.Purged)
	}
	return line
}

// politenessLine says how polite the crawl was: the most requests in
// flight to one host, requests repeated and redirects by outcome; ""
// before any supervisor reported.
func politenessLine(p dispatcher.Politeness) string {
	if p.HostInFlight == 0 && p.Repeated == 0 && len(p.Redirects) == 0 {
		return ""
	}
	line := fmt.Sprintf("politeness: at most %d request(s) in flight to one host  requests repeated: %d", p.HostInFlight, p.Repeated)
	if p.Retried > 0 {
		line += fmt.Sprintf("  asked again after a kept-alive connection lost them: %d", p.Retried)
	}
	if p.Deferred > 0 {
		line += fmt.Sprintf("  tasks handed back until their host was ready: %d", p.Deferred)
	}
	if len(p.Redirects) > 0 {
		line += "  redirects: " + countsLine(p.Redirects)
	}
	return line
}

// guardFlags name the flag that lifts each refusal of the address guard
// (fetch.RefusalOf), as `mappings try` and `survey ports` name them.
var guardFlags = map[string]string{
	fetch.RefusedLoopback: "--allow-loopback to fetch loopback addresses",
	fetch.RefusedPrivate:  "--allow-private to fetch private network addresses",
}

// guardSummary explains the blocked-address count: what the address guard
// refused and the flag that lifts it, "" when it refused nothing.
func guardSummary(by map[string]int64) string {
	var parts []string
	for _, k := range []string{fetch.RefusedLoopback, fetch.RefusedPrivate, fetch.RefusedOther} {
		n := by[k]
		if n == 0 {
			continue
		}
		if flag, ok := guardFlags[k]; ok {
			parts = append(parts, fmt.Sprintf("%d %s (pass %s)", n, k, flag))
		} else {
			parts = append(parts, fmt.Sprintf("%d link-local, reserved or denied (no flag lifts it)", n))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "pages the address guard refused: " + strings.Join(parts, ", ")
}

// countsLine renders counts by key as "a=1 b=2", keys sorted.
func countsLine(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// dnsLine says what the supervisors' name resolution did, in one line.
func dnsLine(d wire.DNSStats) string {
	return fmt.Sprintf("%d look-ups (%d cached)  %d queries (%d timed out)  %d in flight  mean answer %.1fms",
		d.Lookups, d.Cached, d.Queries, d.Timeouts, d.InFlight, d.LatencyMS)
}
