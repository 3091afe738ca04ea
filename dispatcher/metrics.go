package dispatcher

import (
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The dispatcher's metrics. They are read from the counters it keeps
// anyway, under its mutex, when Prometheus scrapes (see Collector); only
// the store write latency is observed as the crawl goes. The counters are
// the crawl's totals (totals.go): they go on across restarts of the
// dispatcher and never fall within a process.
var (
	descRecords = prometheus.NewDesc("backfill_records",
		"Records in the crawl.", nil, nil)
	descComplete = prometheus.NewDesc("backfill_records_complete",
		"Records whose target fields are all filled (those with nothing to fill included).", nil, nil)
	descPartial = prometheus.NewDesc("backfill_records_partial",
		"Records with some but not all target fields filled.", nil, nil)
	descFrontier = prometheus.NewDesc("backfill_frontier_tasks",
		"Tasks queued in the frontier, not yet sent (on disk and in memory).", nil, nil)
	descWindow = prometheus.NewDesc("backfill_frontier_window_tasks",
		"Queued tasks held in memory, ready to be routed.", nil, nil)
	descHostQueues = prometheus.NewDesc("backfill_frontier_hosts",
		"Hosts with tasks in memory: ready to send, or waiting (their in-flight limit, their supervisor's capacity, or a supervisor able to take them).",
		[]string{"state"}, nil)
	descLeased = prometheus.NewDesc("backfill_tasks_leased",
		"Tasks out on lease to supervisors.", nil, nil)
	descWaitingRender = prometheus.NewDesc("backfill_tasks_waiting_render",
		"Render tasks no live supervisor can take.", nil, nil)
	descExpired = prometheus.NewDesc("backfill_leases_expired_total",
		"Leases that ran out and whose tasks were sent again.", nil, nil)
	descLate = prometheus.NewDesc("backfill_results_late_total",
		"Results for anything but a task's current lease, ignored.", nil, nil)
	descForged = prometheus.NewDesc("backfill_results_forged_total",
		"Frames refused as forged: answers to a lease their sender did not hold, registrations under another member's name.", nil, nil)
	descQuarantined = prometheus.NewDesc("backfill_members_quarantined",
		"Member keys quarantined for forging, or for answers other members' fetches contradicted: refused and given no work until a restart with the key authorised lifts them.", nil, nil)
	descRechecks = prometheus.NewDesc("backfill_rechecks_total",
		"Re-checks of members' answers (a page fetched again by another member), by outcome: fetched, agreed, disputed, unsettled, failed, dropped, contradicted.",
		[]string{"outcome"}, nil)
	descPurged = prometheus.NewDesc("backfill_pages_purged_total",
		"Pages answered by a member found lying (or purged by an operator), queued again to be fetched by others.", nil, nil)
	descRefused = prometheus.NewDesc("backfill_members_refused_total",
		"Registrations refused and intake frames that did not decode, by category (mappings, security, incomplete, unreachable, malformed).",
		[]string{"category"}, nil)
	descPagesDone = prometheus.NewDesc("backfill_pages_total",
		"Pages fetched and extracted whose results the dispatcher applied.", nil, nil)
	descReused = prometheus.NewDesc("backfill_extractions_reused_total",
		"Cached extractions applied to another record instead of fetching the page again.", nil, nil)
	descFailed = prometheus.NewDesc("backfill_failures_total",
		"Tasks answered with a failure, by class (the classes of the run summary).", []string{"class"}, nil)
	descFilled = prometheus.NewDesc("backfill_fields_filled_total",
		"Record fields that got their first value, by field name.", []string{"field"}, nil)
	descStoreWritten = prometheus.NewDesc("backfill_store_values_written_total",
		"Values the results store acknowledged.", nil, nil)
	descStoreErrors = prometheus.NewDesc("backfill_store_write_errors_total",
		"Failed pushes to the results store: retried (kept and tried again) or refused (the store has no such record).",
		[]string{"kind"}, nil)
	descMembers = prometheus.NewDesc("backfill_members",
		"Supervisors registered and alive.", nil, nil)
	descJoined = prometheus.NewDesc("backfill_members_joined_total",
		"Supervisors that joined (again, after a restart).", nil, nil)
	descLost = prometheus.NewDesc("backfill_members_lost_total",
		"Supervisors dropped, by reason (silent, restarted).", []string{"reason"}, nil)
	descMemberInFlight = prometheus.NewDesc("backfill_member_tasks_in_flight",
		"Tasks leased to each supervisor.", []string{"member"}, nil)
	descMemberRate = prometheus.NewDesc("backfill_member_pages_per_second",
		"Each supervisor's pages (fetched or failed) per second, from its heartbeats.", []string{"member"}, nil)
	descMemberHeartbeat = prometheus.NewDesc("backfill_member_last_heartbeat_timestamp_seconds",
		"When each supervisor was last heard from.", []string{"member"}, nil)
	descRobotsOutcomes = prometheus.NewDesc("backfill_crawl_robots_fetches_total",
		"robots.txt requests of every supervisor of the crawl, by outcome, as their heartbeats report them.",
		[]string{"outcome"}, nil)
	descRedirects = prometheus.NewDesc("backfill_redirects_total",
		"Redirects (and meta refreshes) by what became of them: followed, to another host, refused by robots, blacklist, address, loop, too many.",
		[]string{"outcome"}, nil)
	descHostInFlightMax = prometheus.NewDesc("backfill_host_requests_in_flight_max",
		"The most requests ever in flight to one host at once, over every supervisor (politeness allows 1).", nil, nil)
	descRepeated = prometheus.NewDesc("backfill_requests_repeated_total",
		"Requests that went out again without being asked (nothing below the politeness rules may retry: 0).", nil, nil)
	descRequests = prometheus.NewDesc("backfill_page_requests_total",
		"Requests made for the tasks answered: a page and the redirects followed on its host (robots.txt and soft-404 probes aside).", nil, nil)
	descPerComplete = prometheus.NewDesc("backfill_requests_per_complete_record",
		"Requests for pages per record a page completed, over the crawl.", nil, nil)
	descPruned = prometheus.NewDesc("backfill_links_pruned_total",
		"Links not followed for a record because they could not pay, by reason (last-depth, barren-host, unlikely); one per record that left them.",
		[]string{"reason"}, nil)
	descETA = prometheus.NewDesc("backfill_eta_seconds",
		"How long the crawl will take at least: the larger of the busiest host's requests left × its cycle (its delay and the mean response time) and every request left at the rate the hosts with work and the supervisors' workers allow.", nil, nil)
	descETAEstimate = prometheus.NewDesc("backfill_eta_estimate_seconds",
		"The ETA's bound, or the requests left at the pace of the last 30 s of answers when that says longer.", nil, nil)
	descETAHost = prometheus.NewDesc("backfill_eta_host_seconds",
		"The busiest host's requests left × its cycle, named.", []string{"host"}, nil)
	descETARate = prometheus.NewDesc("backfill_eta_rate_seconds",
		"Every request left at the rate allowed.", nil, nil)
	descRequestsLeft = prometheus.NewDesc("backfill_requests_left",
		"Requests the crawl knows it has still to make: pages queued, out on lease or among the records not seeded yet, and the robots.txt and probes of hosts not heard of.", nil, nil)
	descHostsLeft = prometheus.NewDesc("backfill_hosts_with_work",
		"Hosts with pages left.", nil, nil)
	descRateAllowed = prometheus.NewDesc("backfill_requests_allowed_per_second",
		"Requests a second the hosts with work allow (one per cycle each), or the supervisors' workers when fewer.", nil, nil)
)

// metricsView is what one scrape reads, copied under the mutex.
type metricsView struct {
	records, complete, partial  int
	frontier, window, leased    int
	waitingRender               int
	readyHosts, hosts           int
	expired, late, pages, reuse int64
	forged                      int64
	quarantined                 int
	rechecks                    RecheckCounts
	refused                     map[string]int64
	errs, lost, robots, filled  map[string]int64
	joined                      int64
	members                     []MemberStatus
	polite                      Politeness
	score                       FrontierStatus
	eta                         ETA
}

// collector reads the dispatcher's counters when scraped.
type collector struct{ d *Dispatcher }

// Collector returns the dispatcher's Prometheus collector; register it
// once.
func (d *Dispatcher) Collector() prometheus.Collector { return collector{d} }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRecords, descComplete, descPartial, descFrontier, descWindow,
		descHostQueues, descLeased, descWaitingRender, descExpired, descLate, descForged, descQuarantined, descRechecks, descPurged, descRefused, descPagesDone, descReused,
		descFailed, descFilled, descStoreWritten, descStoreErrors, descMembers, descJoined, descLost,
		descMemberInFlight, descMemberRate, descMemberHeartbeat, descRobotsOutcomes,
		descRedirects, descHostInFlightMax, descRepeated, descRequests, descPerComplete, descPruned,
		descETA, descETAEstimate, descETAHost, descETARate, descRequestsLeft, descHostsLeft, descRateAllowed} {
		ch <- d
	}
	c.d.ob.seconds.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	d.mu.Lock()
	v := metricsView{
		records: d.nRecords, complete: d.nComplete, partial: d.nPartial,
		frontier: d.queuedN, window: len(d.w.queued), leased: len(d.w.leased),
		waitingRender: d.w.waitingRender(), readyHosts: d.w.ready.Len(), hosts: len(d.w.hosts),
		expired: d.total(&d.run.expired), late: d.total(&d.run.late), pages: d.total(&d.run.pages), reuse: d.total(&d.run.reused),
		errs: sumMaps(d.base.errs, d.run.errs), lost: maps.Clone(d.led.lost), robots: maps.Clone(d.led.h.Robots),
		filled: maps.Clone(d.led.filled),
		joined: d.led.joined,
		forged: d.total(&d.run.forged), quarantined: d.members.Quarantine().Len(),
		rechecks: d.recheckCounts(), refused: d.members.Refusals().Counts(),
		polite: d.politeness(),
		score:  d.frontierStatus(),
		eta:    d.eta(time.Now()),
	}
	for _, m := range d.members.All() {
		v.members = append(v.members, m.status())
	}
	d.mu.Unlock()

	counter := func(desc *prometheus.Desc, n int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(n), labels...)
	}
	gauge := func(desc *prometheus.Desc, n float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, n, labels...)
	}
	gauge(descRecords, float64(v.records))
	gauge(descComplete, float64(v.complete))
	gauge(descPartial, float64(v.partial))
	gauge(descFrontier, float64(v.frontier))
	gauge(descWindow, float64(v.window))
	gauge(descHostQueues, float64(v.readyHosts), "ready")
	gauge(descHostQueues, float64(v.hosts-v.readyHosts), "waiting")
	gauge(descLeased, float64(v.leased))
	gauge(descWaitingRender, float64(v.waitingRender))
	counter(descExpired, v.expired)
	counter(descLate, v.late)
	counter(descForged, v.forged)
	gauge(descQuarantined, float64(v.quarantined))
	for outcome, n := range map[string]int64{"fetched": v.rechecks.Fetched, "agreed": v.rechecks.Agreed, "disputed": v.rechecks.Disputed,
		"unsettled": v.rechecks.Unsettled, "failed": v.rechecks.Failed, "dropped": v.rechecks.Dropped, "contradicted": v.rechecks.Contradicted} {
		counter(descRechecks, n, outcome)
	}
	counter(descPurged, v.rechecks.Purged)
	for category, n := range v.refused {
		counter(descRefused, n, category)
	}
	counter(descPagesDone, v.pages)
	counter(descReused, v.reuse)
	for class, n := range v.errs {
		counter(descFailed, n, class)
	}
	for field, n := range v.filled {
		counter(descFilled, n, field)
	}
	counter(descStoreWritten, d.ob.written.Load())
	counter(descStoreErrors, d.ob.retried.Load(), "retried")
	counter(descStoreErrors, d.ob.refused.Load(), "refused")
	d.ob.seconds.Collect(ch)
	gauge(descMembers, float64(len(v.members)))
	counter(descJoined, v.joined)
	for reason, n := range v.lost {
		counter(descLost, n, reason)
	}
	for _, m := range v.members {
		gauge(descMemberInFlight, float64(m.InFlight), m.Name)
		gauge(descMemberRate, m.Rate, m.Name)
		gauge(descMemberHeartbeat, float64(m.LastSeen.UnixNano())/1e9, m.Name)
	}
	for outcome, n := range v.robots {
		counter(descRobotsOutcomes, n, outcome)
	}
	for outcome, n := range v.polite.Redirects {
		counter(descRedirects, n, outcome)
	}
	gauge(descHostInFlightMax, float64(v.polite.HostInFlight))
	counter(descRepeated, v.polite.Repeated)
	counter(descRequests, v.score.Requests)
	gauge(descPerComplete, v.score.RequestsPerComplete)
	for reason, n := range v.score.Pruned {
		counter(descPruned, n, reason)
	}
	gauge(descETA, v.eta.Seconds)
	gauge(descETAEstimate, v.eta.Estimate)
	if v.eta.Host != "" {
		gauge(descETAHost, v.eta.HostSeconds, v.eta.Host)
	}
	gauge(descETARate, v.eta.RateSeconds)
	gauge(descRequestsLeft, float64(v.eta.Requests))
	gauge(descHostsLeft, float64(v.eta.Hosts))
	gauge(descRateAllowed, v.eta.Rate)
}
