package supervisor

import (
	"context"
	"sync"
	"time"

	"backfill/store"
)

// memCache is the host cache used when Config.Cache is nil: one process's
// memory. It keeps politeness within the process, but a host that moves to
// another supervisor does not take its history along; clusters pass the
// shared store instead.
//
// It is bounded like the rest of the supervisor's per-host state: robots
// entries and soft-404 verdicts of at most maxHosts hosts each, the least
// recently used forgotten (a forgotten robots.txt is fetched again when
// its host comes back, after the host's delay); last-crawl times for as
// long as they may space out a request (horizon), which is what the
// scheduler relies on when it forgets a host within its delay.
type memCache struct {
	horizon time.Duration

	mu      sync.Mutex
	robots  *lru[store.Robots]
	soft404 *lru[store.Soft404]
	last    map[string]time.Time
	sweepAt int // drop stale last-crawl times when the map grows beyond this
}

const memCacheSweep = 4096

func newMemCache(maxHosts int, horizon time.Duration) *memCache {
	return &memCache{horizon: horizon, robots: newLRU[store.Robots](maxHosts, nil),
		soft404: newLRU[store.Soft404](maxHosts, nil), last: make(map[string]time.Time), sweepAt: memCacheSweep}
}

// sweep drops the last-crawl times older than the horizon once the map
// has doubled since the last sweep, so the cost stays amortized. Callers
// hold mu.
func (c *memCache) sweep() {
	if len(c.last) <= c.sweepAt {
		return
	}
	cutoff := time.Now().Add(-c.horizon)
	for h, t := range c.last {
		if t.Before(cutoff) {
			delete(c.last, h)
		}
	}
	c.sweepAt = max(memCacheSweep, 2*len(c.last))
}

func (c *memCache) Robots(_ context.Context, host string) (store.Robots, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.robots.get(host)
	if !ok {
		return store.Robots{}, store.ErrNotFound
	}
	return r, nil
}

func (c *memCache) PutRobots(_ context.Context, host string, r store.Robots) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.robots.put(host, r)
	return nil
}

func (c *memCache) LastCrawl(_ context.Context, host string) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.last[host]
	if !ok {
		return time.Time{}, store.ErrNotFound
	}
	return t, nil
}

func (c *memCache) PutLastCrawl(_ context.Context, host string, at time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.After(c.last[host]) {
		c.last[host] = at
	}
	c.sweep()
	return nil
}

func (c *memCache) Soft404(_ context.Context, host string) (store.Soft404, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.soft404.get(host)
	if !ok {
		return store.Soft404{}, store.ErrNotFound
	}
	return v, nil
}

func (c *memCache) PutSoft404(_ context.Context, host string, v store.Soft404) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.soft404.put(host, v)
	return nil
}
