package supervisor

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"backfill/wire"
)

// Bounds of the pace ledger and of what one heartbeat reports of it.
const (
	// maxPaces is how many hosts the ledger keeps; past it, the half
	// least recently asked is forgotten (their figures reached the
	// dispatcher in earlier heartbeats).
	maxPaces = 4096
	// Per heartbeat: the busiest hosts, the slowest to answer and those
	// asked closest together for their delay.
	reportBusiest  = 20
	reportSlowest  = 10
	reportTightest = 10
	// reportBackoff: hosts in back-off per heartbeat.
	reportBackoff = 10
)

// paces is the ledger of how this supervisor's requests went, host by
// host: the figures behind the run report's politeness table and the
// status page's slowest hosts. Every request (page, robots.txt, soft-404
// probe, render) is noted once it ended. Safe for concurrent use.
type paces struct {
	mu sync.Mutex
	m  map[string]*wire.HostPace
	// minute is each host's current clock minute and its requests so far.
	minute map[string]minuteCount
}

type minuteCount struct {
	at int64 // Unix minute
	n  int
}

func newPaces() *paces {
	return &paces{m: make(map[string]*wire.HostPace), minute: make(map[string]minuteCount)}
}

// note records one request to host that started at start, ended at end,
// and was owed delay since the start of the one before.
func (p *paces) note(host string, start, end time.Time, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hp := p.m[host]
	if hp == nil {
		if len(p.m) >= maxPaces {
			p.forgetOldest()
		}
		hp = &wire.HostPace{Host: host, First: start}
		p.m[host] = hp
	} else if gap := start.Sub(hp.Last).Seconds(); hp.Requests > 0 && gap >= 0 {
		// The tightest gap relative to its delay is the one that tells
		// whether politeness held; without a delay, the shortest.
		d := delay.Seconds()
		if hp.Requests == 1 || tighter(gap, d, hp.MinGap, hp.GapDelay) {
			hp.MinGap, hp.GapDelay = gap, d
		}
	}
	hp.Requests++
	hp.Last = start
	took := end.Sub(start).Seconds()
	hp.Seconds += took
	hp.MaxSeconds = max(hp.MaxSeconds, took)
	m := start.Unix() / 60
	mc := p.minute[host]
	if mc.at != m {
		mc = minuteCount{at: m}
	}
	mc.n++
	p.minute[host] = mc
	hp.PeakMinute = max(hp.PeakMinute, mc.n)
}

// tighter reports whether a gap of g with delay d is closer to breaking
// politeness than g0 with d0.
func tighter(g, d, g0, d0 float64) bool {
	if d > 0 && d0 > 0 {
		return g/d < g0/d0
	}
	return g < g0
}

// forgetOldest drops the half of the ledger asked least recently.
// Callers hold mu.
func (p *paces) forgetOldest() {
	all := make([]*wire.HostPace, 0, len(p.m))
	for _, hp := range p.m {
		all = append(all, hp)
	}
	slices.SortFunc(all, func(a, b *wire.HostPace) int { return a.Last.Compare(b.Last) })
	for _, hp := range all[:len(all)/2] {
		delete(p.m, hp.Host)
		delete(p.minute, hp.Host)
	}
}

// report is the heartbeat's selection: the busiest hosts, the slowest to
// answer (by mean) and the tightest gaps, each host once, busiest first.
func (p *paces) report() []wire.HostPace {
	p.mu.Lock()
	all := make([]wire.HostPace, 0, len(p.m))
	for _, hp := range p.m {
		all = append(all, *hp)
	}
	p.mu.Unlock()
	pick := make(map[string]bool)
	var out []wire.HostPace
	take := func(n int, cmpf func(a, b wire.HostPace) int, ok func(wire.HostPace) bool) {
		slices.SortFunc(all, cmpf)
		for _, hp := range all {
			if n == 0 {
				return
			}
			if !ok(hp) {
				continue
			}
			n--
			if !pick[hp.Host] {
				pick[hp.Host] = true
				out = append(out, hp)
			}
		}
	}
	any := func(wire.HostPace) bool { return true }
	take(reportBusiest, func(a, b wire.HostPace) int {
		return cmp.Or(cmp.Compare(b.Requests, a.Requests), cmp.Compare(a.Host, b.Host))
	}, any)
	take(reportSlowest, func(a, b wire.HostPace) int {
		return cmp.Or(cmp.Compare(b.Seconds/float64(b.Requests), a.Seconds/float64(a.Requests)), cmp.Compare(a.Host, b.Host))
	}, any)
	take(reportTightest, func(a, b wire.HostPace) int {
		if tighter(a.MinGap, a.GapDelay, b.MinGap, b.GapDelay) {
			return -1
		}
		if tighter(b.MinGap, b.GapDelay, a.MinGap, a.GapDelay) {
			return 1
		}
		return cmp.Compare(a.Host, b.Host)
	}, func(hp wire.HostPace) bool { return hp.Requests > 1 })
	slices.SortFunc(out, func(a, b wire.HostPace) int {
		return cmp.Or(cmp.Compare(b.Requests, a.Requests), cmp.Compare(a.Host, b.Host))
	})
	return out
}
