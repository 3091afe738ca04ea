package resolver_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"backfill/resolver"
)

// TestCollector: the cache's metrics count what it did: two look-ups of
// one name are one asked and one from memory, and one query.
func TestCollector(t *testing.T) {
	s := startServer(t)
	s.Add("www.a.test", pub1)
	c := resolver.NewCache(newResolver(t, s, resolver.Config{}), resolver.CacheConfig{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Collector())
	for range 2 {
		if _, err := c.Addrs(context.Background(), "www.a.test"); err != nil {
			t.Fatal(err)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			if m.Counter != nil {
				got[name] = m.GetCounter().GetValue()
			} else {
				got[name] = m.GetGauge().GetValue()
			}
		}
	}
	want := map[string]float64{
		"backfill_dns_lookups_total/asked":  1,
		"backfill_dns_lookups_total/memory": 1,
		"backfill_dns_queries_total":        1,
		"backfill_dns_timeouts_total":       0,
		"backfill_dns_queries_in_flight":    0,
		"backfill_dns_store_errors_total":   0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}
