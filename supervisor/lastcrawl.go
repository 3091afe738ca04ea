package supervisor

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// The last-crawl batcher: the end of every request to a host, kept for
// whoever crawls the host next (another supervisor, this one restarted),
// buffered and written to the host cache in batches (see "Politeness" in
// the package doc).

// lastCrawlBatcher is a host cache that writes many last-crawl times at
// once (the SQLite store does, in one transaction).
type lastCrawlBatcher interface {
	PutLastCrawls(ctx context.Context, times map[string]time.Time) error
}

// recordLastCrawl buffers the end of a request to host for the cache. The
// supervisor keeps the times of the hosts it crawls in memory (the
// scheduler's host state), which is what its own politeness runs on; the
// cache is for whoever crawls the host next. Writing it on every request
// put one write transaction per page on the store's single writer, which
// every worker then queued for; flushLoop writes the buffer in one batch
// per lastCrawlFlush instead. The buffer holds at most one entry per host
// crawled within one interval.
func (s *Supervisor) recordLastCrawl(host string, end time.Time) {
	end = end.UTC() // as the cache keeps it; a batch is not changed once taken
	s.lastMu.Lock()
	if end.After(s.lastPending[host]) {
		s.lastPending[host] = end
	}
	s.lastMu.Unlock()
}

// pendingLastCrawl is the time buffered for host and not yet in the
// cache, if any: a host the scheduler forgot and that comes back within
// a flush interval finds its latest request here.
func (s *Supervisor) pendingLastCrawl(host string) (time.Time, bool) {
	s.lastMu.Lock()
	defer s.lastMu.Unlock()
	at, ok := s.lastPending[host]
	if f, fok := s.lastFlushing[host]; fok && f.After(at) {
		at, ok = f, true
	}
	return at, ok
}

// lastCrawlHorizon is how long a last-crawl time may matter to
// politeness: the longest delay honoured, padded as an inherited time is
// (nextStart). An older time spaces out no request.
func lastCrawlHorizon(cfg Config) time.Duration {
	return max(cfg.DefaultDelay, cfg.MaxCrawlDelay) + lastCrawlFlush
}

// reserve writes to the cache that a request to h starts now, before it
// goes out, when the host has a delay to keep. The write-behind of
// recordLastCrawl is not enough when the host changes owner: a supervisor
// killed before its next flush takes its latest requests with it, and the
// host's next owner (or its own restarted self, which gets its hosts back
// at once) would read an older time and request the host again too soon.
// A reservation is in the cache before the request can reach the host, so
// whoever crawls the host next keeps the delay from at least its start.
// Reservations of concurrent workers share one write (flushMu).
func (s *Supervisor) reserve(ctx context.Context, h *host, delay time.Duration) {
	if delay <= 0 {
		return // nothing to space out
	}
	s.recordLastCrawl(h.name, time.Now())
	fctx, cancel := context.WithTimeout(ctx, cacheTimeout)
	s.flushLastCrawls(fctx)
	cancel()
}

// flushLoop writes the buffered last-crawl times every lastCrawlFlush
// until ctx is done (Run writes what is left once the workers stop).
func (s *Supervisor) flushLoop(ctx context.Context) {
	tick := time.NewTicker(lastCrawlFlush)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			fctx, cancel := context.WithTimeout(ctx, cacheTimeout)
			s.flushLastCrawls(fctx)
			cancel()
		}
	}
}

// flushLastCrawls writes the buffered times to the cache: in one batch
// when the cache can, else host by host. Times that fail are put back to
// be tried at the next flush (unless a later time came meanwhile); a
// panicking cache is contained and its batch given up, since the times
// only help a future owner of the hosts. A flush cut short because the
// supervisor is stopping (ctx cancelled, not timed out) is no failure of
// the cache: its times go back for Run's last flush, unreported.
func (s *Supervisor) flushLastCrawls(ctx context.Context) {
	stopping := func() bool { return errors.Is(ctx.Err(), context.Canceled) }
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.lastMu.Lock()
	batch := s.lastPending
	if len(batch) == 0 {
		s.lastMu.Unlock()
		return
	}
	s.lastPending = make(map[string]time.Time, len(batch))
	s.lastFlushing = batch
	s.lastMu.Unlock()

	failed := make(map[string]time.Time)
	defer func() {
		s.lastMu.Lock()
		s.lastFlushing = nil
		s.lastMu.Unlock()
		if v := recover(); v != nil {
			s.log.Error("panic while writing last-crawl times recovered", "hosts", len(batch), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			return
		}
		if len(failed) > 0 && (ctx.Err() == nil || stopping()) {
			// Kept for the next flush while they may still matter, so
			// a cache that stays down does not make the buffer grow
			// with every host crawled.
			stale := time.Now().Add(-lastCrawlHorizon(s.cfg))
			for h, at := range failed {
				if at.After(stale) {
					s.recordLastCrawl(h, at)
				}
			}
		}
	}()
	if b, ok := s.cache.(lastCrawlBatcher); ok {
		if err := b.PutLastCrawls(ctx, batch); err != nil {
			if !stopping() {
				s.cacheFailed("put last crawls", fmt.Sprintf("%d hosts", len(batch)), err)
			}
			failed = batch
		}
		return
	}
	for h, at := range batch {
		if err := s.cache.PutLastCrawl(ctx, h, at); err != nil {
			if !stopping() {
				s.cacheFailed("put last crawl", h, err)
			}
			failed[h] = at
		}
	}
}
