package dispatcher

import "backfill/wire"

// What the supervisors report of politeness in their heartbeats: the
// most requests ever in flight to one host and the requests repeated.
// (Redirects the dispatcher counts from the Results themselves, in
// runCounts.redirects: see countRedirects.) Each
// supervisor process counts from its start, so the latest heartbeat of
// each process (name and start) is kept, at most maxPoliteSources of
// them.

// maxPoliteSources bounds the supervisor processes whose counters are
// kept; past it the oldest go (a crawl's members, restarts included, are
// far fewer).
const maxPoliteSources = 4096

type politeNote struct {
	hostInFlight int
	repeated     int64
	retried      int64
}

// notePolite keeps a heartbeat's politeness counters. Callers hold mu.
func (d *Dispatcher) notePolite(h *wire.Heartbeat) {
	if h.HostInFlight == 0 && h.Repeated == 0 && h.Retried == 0 {
		return
	}
	if d.polite == nil {
		d.polite = make(map[string]politeNote)
	}
	src := h.Supervisor + "@" + h.Started.String()
	if _, ok := d.polite[src]; !ok && len(d.polite) >= maxPoliteSources {
		for k := range d.polite {
			delete(d.polite, k) // any one: the bound is never reached in practice
			break
		}
	}
	d.polite[src] = politeNote{hostInFlight: h.HostInFlight, repeated: h.Repeated, retried: h.Retried}
}

// Politeness is how polite the crawl was, for the summary, the status
// and the metrics.
type Politeness struct {
	// Redirects counts pages' redirects by what became of them
	// (wire.Redirect*): those the supervisors made or refused on a page's
	// own host, and those to other hosts the dispatcher followed or
	// refused.
	Redirects map[string]int64 `json:"redirects,omitempty"`
	// HostInFlight is the most requests ever in flight to one host at
	// once (1 when every host had one at a time).
	HostInFlight int `json:"host_in_flight"`
	// Repeated counts requests that went out again without being asked
	// (0: nothing below the politeness rules retries on its own).
	Repeated int64 `json:"repeated"`
	// Retried counts pages asked again, as requests of their own under
	// the rules, because a kept-alive connection lost the request before
	// any answer.
	Retried int64 `json:"retried,omitempty"`
	// Deferred counts tasks a supervisor handed back unfetched, its host
	// not ready for a while (wire.ClassDeferred), to be sent again when
	// it is: what waited in the dispatcher's queue instead of a lease.
	Deferred int64 `json:"deferred,omitempty"`
}

// politeness sums the dispatcher's and the supervisors' counters.
// Callers hold mu.
func (d *Dispatcher) politeness() Politeness {
	p := Politeness{Redirects: sumMaps(d.base.redirects, d.run.redirects), Deferred: d.total(&d.run.deferred)}
	for _, n := range d.polite {
		p.HostInFlight = max(p.HostInFlight, n.hostInFlight)
		p.Repeated += n.repeated
		p.Retried += n.retried
	}
	if len(p.Redirects) == 0 {
		p.Redirects = nil
	}
	return p
}

// countRedirects counts what the supervisor did with a page's redirects,
// as its Result says: the hops it made on the page's host (Chain), the
// one to another host it handed back (Redirect; the dispatcher's own
// verdict on it is counted by redirectResult), and the one it refused.
func (d *Dispatcher) countRedirects(t *task, r *wire.Result) {
	if n := len(r.Chain); n > 0 {
		d.run.redirects[wire.RedirectFollowed] += int64(n)
	}
	if r.Redirect != "" {
		d.run.redirects[wire.RedirectOtherHost]++
	}
	if r.HopRefused != "" {
		d.run.redirects[r.HopRefused]++
	}
}
