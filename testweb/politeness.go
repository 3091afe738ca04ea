package testweb

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Politeness is what a request log says of a crawl's politeness from the
// servers' side: the URLs asked for more than once, and the requests that
// reached their host sooner than its delay after the end of the host's
// previous response (or while that response was still being written).
// CheckPoliteness makes it.
type Politeness struct {
	Requests  int
	Intervals int // requests that followed an earlier one to their host
	// Repeats are the requests for a URL (host and path with query)
	// already asked for, in arrival order, each with the first request.
	Repeats []Repeat
	// Under are the intervals shorter than the host's delay, in arrival
	// order; Shortest is the shortest interval of all (zero Next when
	// there was none).
	Under    []Interval
	Shortest Interval
}

// Repeat is a request for a URL asked for before.
type Repeat struct{ First, Again Request }

// Interval is the time from the end of a host's previous response (Prev,
// the one that ended last among the earlier requests) to the arrival of
// its next request (Next). Gap is negative when Prev was still being
// answered; Open says Prev had not ended when the log was read.
type Interval struct {
	Prev, Next Request
	Gap        time.Duration
	Open       bool
}

// CheckPoliteness checks every request of log against the one before it
// on its host, with delay giving each host's delay; robots.txt and every
// other request count alike, since each takes the host's time.
func CheckPoliteness(log []Request, delay func(host string) time.Duration) Politeness {
	log = slices.Clone(log)
	slices.SortStableFunc(log, func(a, b Request) int { return a.Time.Compare(b.Time) })
	p := Politeness{Requests: len(log)}
	first := map[string]Request{}
	last := map[string]Request{} // per host: the earlier request that ended last
	for _, r := range log {
		url := r.Host + r.Path
		if f, ok := first[url]; ok {
			p.Repeats = append(p.Repeats, Repeat{First: f, Again: r})
		} else {
			first[url] = r
		}
		prev, ok := last[r.Host]
		if !ok {
			last[r.Host] = r
			continue
		}
		p.Intervals++
		iv := Interval{Prev: prev, Next: r, Open: prev.Done.IsZero()}
		if !iv.Open {
			iv.Gap = r.Time.Sub(prev.Done)
		}
		if iv.Open || iv.Gap < delay(r.Host) {
			p.Under = append(p.Under, iv)
		}
		if !iv.Open && (p.Shortest.Next.Time.IsZero() || iv.Gap < p.Shortest.Gap) {
			p.Shortest = iv
		}
		// An open response ends after any other; of two ended ones, the
		// later end is what the next request must wait on.
		if !iv.Open && (r.Done.IsZero() || r.Done.After(prev.Done)) {
			last[r.Host] = r
		}
	}
	return p
}

// RepeatedURLs are the distinct URLs of p.Repeats, in order.
func (p Politeness) RepeatedURLs() []string {
	var urls []string
	seen := map[string]bool{}
	for _, r := range p.Repeats {
		u := r.Again.Host + r.Again.Path
		if !seen[u] {
			seen[u] = true
			urls = append(urls, u)
		}
	}
	return urls
}

// String says it in one line: the requests, the URLs requested twice
// (the first few named), and the intervals under the delay with the
// shortest interval of all.
func (p Politeness) String() string {
	const named = 5
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests, %d for a URL already requested", p.Requests, len(p.Repeats))
	if urls := p.RepeatedURLs(); len(urls) > 0 {
		more := ""
		if len(urls) > named {
			urls, more = urls[:named], fmt.Sprintf(" and %d more", len(urls)-named)
		}
		fmt.Fprintf(&b, " (%s%s)", strings.Join(urls, " "), more)
	}
	fmt.Fprintf(&b, ", %d of %d intervals under the host's delay", len(p.Under), p.Intervals)
	if s := p.Shortest; !s.Next.Time.IsZero() {
		fmt.Fprintf(&b, ", shortest %s (%s: %s → %s)", s.Gap.Round(time.Millisecond), s.Next.Host, s.Prev.Path, s.Next.Path)
	}
	return b.String()
}
