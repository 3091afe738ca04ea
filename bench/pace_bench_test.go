//go:build unix

package bench

import (
	"slices"
	"time"

	"backfill/testweb"
)

// hostPace says how closely a crawl kept to its hosts' delays while they
// had work, from a web's request log: the rate over a whole run also
// falls as hosts run out of pages, which is the web's doing, not the
// crawler's.
type hostPace struct {
	gaps  int           // intervals from a response's end to the host's next request
	extra time.Duration // their sum less the delay each: time a host with work was left waiting
	// first is the mean time from the run's start to a host's first
	// request.
	first time.Duration
	// kept is the share of a host-with-work's time spent in requests or
	// in its delay: (responses + delays) / (responses + gaps), over every
	// interval.
	kept float64
}

// paceOf reads log (requests made after start) for hostPace at delay.
func paceOf(log []testweb.Request, start time.Time, delay time.Duration) hostPace {
	byHost := map[string][]testweb.Request{}
	for _, q := range log {
		if !q.Done.IsZero() {
			byHost[q.Host] = append(byHost[q.Host], q)
		}
	}
	var p hostPace
	var firsts, busy, gapsSum time.Duration
	for _, qs := range byHost {
		slices.SortFunc(qs, func(a, b testweb.Request) int { return a.Time.Compare(b.Time) })
		firsts += qs[0].Time.Sub(start)
		for i, q := range qs {
			busy += q.Done.Sub(q.Time)
			if i == 0 {
				continue
			}
			gap := q.Time.Sub(qs[i-1].Done)
			p.gaps++
			gapsSum += gap
			p.extra += max(gap-delay, 0)
		}
	}
	if len(byHost) > 0 {
		p.first = firsts / time.Duration(len(byHost))
	}
	if d := busy + gapsSum; d > 0 {
		p.kept = float64(busy+time.Duration(p.gaps)*delay) / float64(d)
	}
	return p
}

// meanExtra is the mean wait past the delay an interval.
func (p hostPace) meanExtra() time.Duration {
	return p.extra / time.Duration(max(p.gaps, 1))
}
