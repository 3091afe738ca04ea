package supervisor

import (
	"fmt"
	"testing"
	"time"
)

// TestPaces: the ledger counts requests, finds the gap closest to its
// delay and the busiest clock minute, reports a bounded selection and
// stays within maxPaces.
func TestPaces(t *testing.T) {
	p := newPaces()
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	// slow.example: 3 requests 10s apart with a 10s delay, the second
	// taking 2s; quick.example: gaps of 5s then 1s for a 2s delay.
	p.note("slow.example", t0, t0.Add(time.Second), 10*time.Second)
	p.note("slow.example", t0.Add(10*time.Second), t0.Add(12*time.Second), 10*time.Second)
	p.note("slow.example", t0.Add(20*time.Second), t0.Add(20500*time.Millisecond), 10*time.Second)
	p.note("quick.example", t0, t0.Add(100*time.Millisecond), 2*time.Second)
	p.note("quick.example", t0.Add(5*time.Second), t0.Add(5100*time.Millisecond), 2*time.Second)
	p.note("quick.example", t0.Add(6*time.Second), t0.Add(6100*time.Millisecond), 2*time.Second)
	rep := p.report()
	byHost := map[string]int{}
	for i, hp := range rep {
		byHost[hp.Host] = i
	}
	slow, quick := rep[byHost["slow.example"]], rep[byHost["quick.example"]]
	if slow.Requests != 3 || slow.MinGap != 10 || slow.GapDelay != 10 || slow.MaxSeconds != 2 || slow.Seconds != 3.5 || slow.PeakMinute != 3 {
		t.Errorf("slow.example: %+v", slow)
	}
	if quick.MinGap != 1 || quick.GapDelay != 2 {
		t.Errorf("quick.example: shortest gap %v for delay %v, want 1 for 2", quick.MinGap, quick.GapDelay)
	}
	// A new minute starts a new count.
	p.note("slow.example", t0.Add(70*time.Second), t0.Add(71*time.Second), 10*time.Second)
	if got := p.report()[byHost["slow.example"]].PeakMinute; got != 3 {
		t.Errorf("busiest minute %d after a request in the next minute, want 3", got)
	}

	for i := range 3 * maxPaces {
		p.note(fmt.Sprintf("h%d.example", i), t0.Add(time.Duration(i)*time.Millisecond), t0.Add(time.Duration(i+1)*time.Millisecond), time.Second)
	}
	if len(p.m) > maxPaces || len(p.minute) > maxPaces {
		t.Errorf("ledger holds %d hosts (%d minute counts), bound %d", len(p.m), len(p.minute), maxPaces)
	}
	if n := len(p.report()); n > reportBusiest+reportSlowest+reportTightest {
		t.Errorf("a heartbeat reports %d hosts", n)
	}
}

// BenchmarkRequestBookkeeping is what the operators' view adds to every
// page request: the pace ledger's note and the meter's count and
// histogram observation (hosts cycling as a crawl's do).
func BenchmarkRequestBookkeeping(b *testing.B) {
	p, m := newPaces(), newMeter()
	hosts := make([]string, 1000)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d.example", i)
	}
	t0 := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := t0.Add(time.Duration(i) * time.Millisecond)
		p.note(hosts[i%len(hosts)], start, start.Add(time.Millisecond), time.Second)
		m.page(nil, time.Millisecond)
	}
}
