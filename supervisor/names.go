package supervisor

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"

	"backfill/fetch"
	"backfill/resolver"
	"backfill/wire"
)

// lookups resolves the names of hosts before their turn, so that no
// worker waits on DNS: the scheduler holds a host whose name is not in the
// resolver's cache back, like a host waiting out its delay, and starts a
// look-up here; when it ends (an answer, or a failure the cache keeps
// briefly) the host joins the ready heap and its worker's fetch finds the
// answer in the cache. The resolver bounds the queries in flight and
// coalesces look-ups of one name; the goroutines waiting on it are bounded
// by the hosts with work, at most Capacity.
type lookups struct {
	names   *resolver.Cache
	fetcher *fetch.Fetcher // NeedsLookup: pinned, literal and localhost hosts need none
	sched   *scheduler
	// refused says why a host is never to be asked anything (the user's
	// blacklist, or one made during the run), "" when it may be: such a
	// host's name is not looked up either, its turn answers its tasks.
	refused func(hostName string) string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newLookups(names *resolver.Cache, f *fetch.Fetcher, sched *scheduler, refused func(string) string) *lookups {
	ctx, cancel := context.WithCancel(context.Background())
	return &lookups{names: names, fetcher: f, sched: sched, refused: refused, ctx: ctx, cancel: cancel}
}

// lookupName is the DNS name of a scheduler host ("host[:port]").
func lookupName(hostName string) string {
	if h, _, err := net.SplitHostPort(hostName); err == nil {
		return h
	}
	return hostName
}

// needs implements nameWait. A host without a port in its name is reached
// on 80 or 443; a pin of either leaves it to the fetch.
func (l *lookups) needs(hostName string) bool {
	if l.refused(hostName) != "" {
		return false
	}
	if _, _, err := net.SplitHostPort(hostName); err == nil {
		if !l.fetcher.NeedsLookup(hostName) {
			return false
		}
	} else if !l.fetcher.NeedsLookup(net.JoinHostPort(hostName, "80")) || !l.fetcher.NeedsLookup(net.JoinHostPort(hostName, "443")) {
		return false
	}
	return !l.names.Fresh(lookupName(hostName))
}

// start implements nameWait. It is called with the scheduler's lock held,
// so the look-up runs on its own goroutine.
func (l *lookups) start(hostName string) {
	l.wg.Go(func() {
		l.names.Lookup(l.ctx, lookupName(hostName))
		l.sched.resolved(hostName)
	})
}

// stop ends the look-ups in progress and waits for their goroutines.
func (l *lookups) stop() {
	l.cancel()
	l.wg.Wait()
}

// stopLookups ends the name look-ups, if any; after the scheduler stopped,
// so none starts again.
func (s *Supervisor) stopLookups() {
	if s.lookups != nil {
		s.lookups.stop()
	}
}

// dnsSource names this process's resolver in heartbeats.
var dnsSource = func() string {
	h, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", h, os.Getpid())
}()

// dnsStats is the resolver's counters as a heartbeat carries them, nil
// without Config.Names.
func (s *Supervisor) dnsStats() *wire.DNSStats { return DNSStats(s.cfg.Names) }

// DNSStats is what c (and its resolver) did, as heartbeats and summaries
// carry it; nil for a nil c. Its Source names c in this process.
func DNSStats(c *resolver.Cache) *wire.DNSStats {
	if c == nil {
		return nil
	}
	st := c.Stats()
	return &wire.DNSStats{
		Source:  fmt.Sprintf("%s/%p", dnsSource, c),
		Lookups: st.Lookups, Cached: st.Hits + st.Stored + st.Coalesced, Queries: st.Queries,
		Timeouts: st.Timeouts, InFlight: st.InFlight, LatencyMS: float64(st.Latency.Microseconds()) / 1000,
	}
}
