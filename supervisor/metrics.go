package supervisor

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"backfill/fetch"
)

// Robots outcomes: what a robots.txt request came to, as counted in
// Heartbeat.Robots and the backfill_robots_fetches_total metric.
const (
	RobotsRules       = "rules"       // 2xx: its rules apply
	RobotsMissing     = "missing"     // 4xx, or too many redirects: everything allowed
	RobotsUnavailable = "unavailable" // 5xx, 429 or garbled: everything disallowed until a retry succeeds
	RobotsUnreachable = "unreachable" // the host could not be reached
)

var robotsOutcomes = [...]string{RobotsRules, RobotsMissing, RobotsUnavailable, RobotsUnreachable}

// robotsOutcome says what rules r, fetched with the given status, came to.
func robotsOutcome(r *robotsRules, status int) int {
	switch {
	case r.unreachable != "":
		return 3
	case r.disallowAll:
		return 2
	case status >= 200 && status <= 299:
		return 0
	}
	return 1
}

// meter holds what the supervisor counts only for operators: page
// requests by status class and their bytes, robots.txt outcomes, and the
// latency histograms. The rest of its metrics are read from the counters
// it keeps anyway (see Collector).
type meter struct {
	status [6]atomic.Int64 // page requests by status/100; 0: no HTTP answer
	bytes  atomic.Int64
	robots [len(robotsOutcomes)]atomic.Int64

	fetchSeconds  prometheus.Histogram
	renderSeconds prometheus.Histogram
}

func newMeter() *meter {
	return &meter{
		fetchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "backfill_fetch_duration_seconds",
			Help:    "Time from sending a page request to having its body (robots.txt, probes and a rendered page's own requests excluded).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12), // 10ms … 20s
		}),
		renderSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "backfill_render_duration_seconds",
			Help:    "Time to render a fetched page in the browser, the requests its scripts make included.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 10), // 100ms … 51s
		}),
	}
}

// page counts one page request that took took: its status class, its
// bytes, and its latency. (A render's time is observed where the browser
// renders the fetched page: renderPage.)
func (m *meter) page(resp *fetch.Response, took time.Duration) {
	i := 0
	if resp != nil && resp.Status >= 100 && resp.Status <= 599 {
		i = resp.Status / 100
		m.bytes.Add(int64(len(resp.Body)))
	}
	m.status[i].Add(1)
	m.fetchSeconds.Observe(took.Seconds())
}

var statusClasses = [6]string{"none", "1xx", "2xx", "3xx", "4xx", "5xx"}

var (
	descFetches = prometheus.NewDesc("backfill_fetches_total",
		"Page requests made, by the class of their HTTP status; none: no HTTP answer.",
		[]string{"status_class"}, nil)
	descFetchBytes = prometheus.NewDesc("backfill_fetch_bytes_total",
		"Bytes of page bodies received (after decoding, within the size cap).", nil, nil)
	descPages = prometheus.NewDesc("backfill_supervisor_pages_total",
		"Pages fetched and run through the mappings.", nil, nil)
	descReanswered = prometheus.NewDesc("backfill_supervisor_reanswered_total",
		"Tasks sent again under a new lease (a dispatcher restarted before committing their results) and answered from the answer already sent, without a request.", nil, nil)
	descFailures = prometheus.NewDesc("backfill_supervisor_failures_total",
		"Tasks answered with a failure, by failure class.", []string{"class"}, nil)
	descRobots = prometheus.NewDesc("backfill_robots_fetches_total",
		"robots.txt requests, by outcome: rules, missing (allow all), unavailable (disallow all), unreachable.",
		[]string{"outcome"}, nil)
	descRendered = prometheus.NewDesc("backfill_renders_total",
		"Pages loaded in the browser.", nil, nil)
	descRenderFailed = prometheus.NewDesc("backfill_render_failures_total",
		"Browser loads that failed.", nil, nil)
	descRenderWaiting = prometheus.NewDesc("backfill_render_queue",
		"Pages waiting for a free browser tab.", nil, nil)
	descHeld = prometheus.NewDesc("backfill_supervisor_tasks_held",
		"Tasks held by the supervisor, queued or in progress.", nil, nil)
	descCapacity = prometheus.NewDesc("backfill_supervisor_capacity",
		"Most tasks the supervisor holds at once.", nil, nil)
	descHosts = prometheus.NewDesc("backfill_supervisor_hosts",
		"Hosts with tasks: ready for a request now, waiting for their delay (or back-off) to end, or busy (a request in progress).",
		[]string{"state"}, nil)
	descBackoff = prometheus.NewDesc("backfill_hosts_backoff",
		"Hosts whose requests are held back because they are in trouble (Retry-After, back-off).", nil, nil)
	descBlacklisted = prometheus.NewDesc("backfill_hosts_blacklisted_total",
		"Hosts and addresses blacklisted during the run for failing again and again.", nil, nil)
)

// collector reads the supervisor's counters when scraped.
type collector struct{ s *Supervisor }

// Collector returns the supervisor's Prometheus collector. Register it
// once per supervisor; a process running several labels each (see
// metrics.Labeled).
func (s *Supervisor) Collector() prometheus.Collector { return collector{s} }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFetches, descFetchBytes, descPages, descReanswered, descFailures, descRobots,
		descRendered, descRenderFailed, descRenderWaiting, descHeld, descCapacity, descHosts, descBackoff, descBlacklisted} {
		ch <- d
	}
	c.s.meter.fetchSeconds.Describe(ch)
	c.s.meter.renderSeconds.Describe(ch)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	m := s.meter
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	for i, name := range statusClasses {
		counter(descFetches, m.status[i].Load(), name)
	}
	counter(descFetchBytes, m.bytes.Load())
	st := s.Stats()
	counter(descPages, st.Fetched)
	counter(descReanswered, st.Reanswered)
	for class, n := range st.Failed {
		counter(descFailures, n, class)
	}
	for i, name := range robotsOutcomes {
		counter(descRobots, m.robots[i].Load(), name)
	}
	if r := st.Render; r != nil {
		counter(descRendered, r.Rendered)
		counter(descRenderFailed, r.Failed)
		gauge(descRenderWaiting, r.Waiting)
	}
	gauge(descHeld, st.InFlight)
	gauge(descCapacity, s.cfg.Capacity)
	now := time.Now()
	ready, waiting, busy := s.sched.states(now)
	gauge(descHosts, ready, "ready")
	gauge(descHosts, waiting, "waiting")
	gauge(descHosts, busy, "busy")
	gauge(descBackoff, s.health.inBackoff(now))
	counter(descBlacklisted, st.Blacklisted)
	m.fetchSeconds.Collect(ch)
	if s.render != nil {
		m.renderSeconds.Collect(ch)
	}
}
