package resolver

import "time"

// Stats counts what a Cache and its Resolver did since they were made.
type Stats struct {
	Lookups   int64 `json:"lookups"`              // look-ups answered: Hits + Stored + Misses + Coalesced
	Hits      int64 `json:"hits"`                 // answered from memory or the hosts file
	Stored    int64 `json:"stored"`               // answered from the Store (an earlier process asked)
	Misses    int64 `json:"misses"`               // asked of the resolver
	Coalesced int64 `json:"coalesced"`            // waited for a look-up of the same name already asked
	StoreErrs int64 `json:"store_errs,omitempty"` // Store reads or writes that failed (the look-up went on)

	Queries   int64         `json:"queries"`             // DNS queries sent (each attempt)
	Answers   int64         `json:"answers"`             // queries answered
	Timeouts  int64         `json:"timeouts"`            // queries not answered in time
	Truncated int64         `json:"truncated,omitempty"` // UDP answers truncated and asked again over TCP
	InFlight  int           `json:"in_flight"`           // queries in flight now
	Waiting   int           `json:"waiting"`             // queries waiting for the window or the pace
	Pace      float64       `json:"pace"`                // the slowest server pace now, queries a second (0: none yet)
	Latency   time.Duration `json:"latency"`             // mean time to an answer
	Window    float64       `json:"window"`              // the smallest server window now
	Cuts      int64         `json:"cuts,omitempty"`      // times a server's window was cut by time-outs (and the cut kept)
	Undone    int64         `json:"undone,omitempty"`    // cuts undone: slowing down did not lower the loss (loss.go)
	Loss      float64       `json:"loss,omitempty"`      // the largest share of queries a server's path loses at random
}

// Stats reads the resolver's counters (the look-up ones stay zero).
func (r *Resolver) Stats() Stats {
	s := Stats{
		Queries: r.queries.Load(), Answers: r.answers.Load(), Timeouts: r.timeouts.Load(),
		Truncated: r.truncated.Load(),
	}
	if s.Answers > 0 {
		s.Latency = time.Duration(r.latency.Load() / s.Answers)
	}
	for i, sv := range r.servers {
		ls := sv.lim.state()
		s.InFlight += ls.inflight
		s.Waiting += ls.waiting
		s.Cuts += ls.cuts
		s.Undone += ls.undone
		s.Loss = max(s.Loss, ls.loss)
		if i == 0 || ls.window < s.Window {
			s.Window = ls.window
		}
		if i == 0 || ls.rate < s.Pace {
			s.Pace = ls.rate
		}
	}
	return s
}

// Stats reads the cache's counters and its resolver's.
func (c *Cache) Stats() Stats {
	s := c.r.Stats()
	s.Hits, s.Stored, s.Misses, s.Coalesced = c.hits.Load(), c.stored.Load(), c.misses.Load(), c.coalesced.Load()
	s.StoreErrs = c.storeErrs.Load()
	s.Lookups = s.Hits + s.Stored + s.Misses + s.Coalesced
	return s
}
