package resolver

import "github.com/prometheus/client_golang/prometheus"

var (
	descLookups = prometheus.NewDesc("backfill_dns_lookups_total",
		"Names looked up, by how they were answered: memory, store (kept by an earlier process), coalesced (a look-up of the name in progress), asked.",
		[]string{"source"}, nil)
	descQueries = prometheus.NewDesc("backfill_dns_queries_total",
		"DNS queries sent, retries after time-outs included.", nil, nil)
	descTimeouts = prometheus.NewDesc("backfill_dns_timeouts_total",
		"DNS queries no server answered in time.", nil, nil)
	descInFlight = prometheus.NewDesc("backfill_dns_queries_in_flight",
		"DNS queries in flight.", nil, nil)
	descLatency = prometheus.NewDesc("backfill_dns_latency_seconds",
		"Mean time from sending a DNS query to its answer.", nil, nil)
	descStoreErrs = prometheus.NewDesc("backfill_dns_store_errors_total",
		"Reads or writes of the DNS cache's file that failed (the look-up went on without it).", nil, nil)
	descWaiting = prometheus.NewDesc("backfill_dns_queries_waiting",
		"DNS queries waiting for room under the servers' windows and paces.", nil, nil)
	descPace = prometheus.NewDesc("backfill_dns_pace",
		"Queries a second the slowest-paced server is sent now (0: not paced yet: none has dropped a query).", nil, nil)
	descWindow = prometheus.NewDesc("backfill_dns_window",
		"Queries the busiest-cut server may have in flight now (at most the configured bound; halved by time-outs).", nil, nil)
)

// Collector returns the cache's Prometheus collector: register it once
// per process (the cache is the process's, shared by its supervisors).
func (c *Cache) Collector() prometheus.Collector { return collector{c} }

type collector struct{ c *Cache }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLookups, descQueries, descTimeouts, descInFlight, descWaiting, descPace, descLatency, descWindow, descStoreErrs} {
		ch <- d
	}
}

func (col collector) Collect(ch chan<- prometheus.Metric) {
	st := col.c.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(descLookups, st.Hits, "memory")
	counter(descLookups, st.Stored, "store")
	counter(descLookups, st.Coalesced, "coalesced")
	counter(descLookups, st.Misses, "asked")
	counter(descQueries, st.Queries)
	counter(descTimeouts, st.Timeouts)
	counter(descStoreErrs, st.StoreErrs)
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(st.InFlight))
	ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(st.Waiting))
	ch <- prometheus.MustNewConstMetric(descPace, prometheus.GaugeValue, st.Pace)
	ch <- prometheus.MustNewConstMetric(descLatency, prometheus.GaugeValue, st.Latency.Seconds())
	ch <- prometheus.MustNewConstMetric(descWindow, prometheus.GaugeValue, st.Window)
}
