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
type memCache struct {
	mu      sync.Mutex
	robots  map[string]store.Robots
	last    map[string]time.Time
	soft404 map[string]store.Soft404
	sweepAt int // sweep stale entries when a map grows beyond this
}

const memCacheSweep = 4096

func newMemCache() *memCache {
	return &memCache{robots: make(map[string]store.Robots), last: make(map[string]time.Time),
		soft404: make(map[string]store.Soft404), sweepAt: memCacheSweep}
}

// sweep drops expired robots entries and soft-404 verdicts and last-crawl
// times older than any delay honoured, then sets the next sweep at twice
// what is left, so the cost stays amortized. Callers hold mu.
func (c *memCache) sweep() {
	if len(c.robots) <= c.sweepAt && len(c.last) <= c.sweepAt && len(c.soft404) <= c.sweepAt {
		return
	}
	now := time.Now()
	for h, e := range c.robots {
		if e.Expires.Before(now) {
			delete(c.robots, h)
		}
	}
	for h, e := range c.soft404 {
		if e.Expires.Before(now) {
			delete(c.soft404, h)
		}
	}
	cutoff := now.Add(-MaxRobotsTTL)
	for h, t := range c.last {
		if t.Before(cutoff) {
			delete(c.last, h)
		}
	}
	c.sweepAt = max(memCacheSweep, 2*len(c.robots), 2*len(c.last), 2*len(c.soft404))
}

func (c *memCache) Robots(_ context.Context, host string) (store.Robots, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.robots[host]
	if !ok {
		return store.Robots{}, store.ErrNotFound
	}
	return r, nil
}

func (c *memCache) PutRobots(_ context.Context, host string, r store.Robots) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.robots[host] = r
	c.sweep()
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
	v, ok := c.soft404[host]
	if !ok {
		return store.Soft404{}, store.ErrNotFound
	}
	return v, nil
}

func (c *memCache) PutSoft404(_ context.Context, host string, v store.Soft404) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.soft404[host] = v
	c.sweep()
	return nil
}
