package resolver

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for the zero values of CacheConfig.
const (
	DefaultMinTTL     = 5 * time.Minute
	DefaultMaxTTL     = 24 * time.Hour
	DefaultNegative   = 15 * time.Minute
	DefaultFailure    = 30 * time.Second
	DefaultMaxFailure = time.Hour
	DefaultMaxEntries = 100_000
)

// CacheConfig says how long answers are kept and where.
type CacheConfig struct {
	// Min and Max bound how long an answer (positive or negative) is
	// kept, whatever its TTL: a name with a 30-second TTL is not asked
	// again for every page of its host.
	Min, Max time.Duration
	// Negative is kept for a negative answer whose zone gave no SOA.
	Negative time.Duration
	// Failure is how long a server failure or time-out is remembered, in
	// memory only: long enough that the tasks waiting on the name fail
	// at once instead of asking again, short enough that the next wave
	// asks. Each further failure of the name in a row doubles it, up to
	// MaxFailure: a name that keeps timing out is not asked of the
	// servers every Failure for the rest of the run. Being in memory
	// only, a failure is asked again by the next run.
	Failure, MaxFailure time.Duration
	// MaxEntries bounds the answers held in memory; the Store keeps the
	// rest.
	MaxEntries int
	// Store keeps positive and negative answers across restarts; nil
	// keeps them in memory only.
	Store Store
	// Hosts answers its names before anything else is asked, as the
	// machine's own resolver does (ReadHosts of DefaultHostsFile); the
	// survey, which studies DNS itself, leaves it nil.
	Hosts Hosts
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// storeTimeout bounds one read or write of the Store: a shared store that
// stops answering costs a name that long, then it is asked of DNS as if
// the store had nothing.
const storeTimeout = 5 * time.Second

// Store keeps answers beyond the life of a process. Load returns the answer
// stored for name if it has not expired by now.
type Store interface {
	Load(ctx context.Context, name string, now time.Time) (Answer, bool, error)
	Save(ctx context.Context, name string, a Answer, expires time.Time) error
}

// Cache answers look-ups from memory, then from its Store, then by asking
// its Resolver, one query per name however many callers wait for it.
type Cache struct {
	r   *Resolver
	cfg CacheConfig

	mu      sync.Mutex
	entries map[string]entry
	flights map[string]*flight

	hits, stored, misses, coalesced, storeErrs atomic.Int64
}

type entry struct {
	a       Answer
	expires time.Time
	fails   int // failures of the name in a row, this one included
}

// flight is one look-up in progress that others wait for.
type flight struct {
	done chan struct{}
	a    Answer
}

// NewCache puts a cache in front of r.
func NewCache(r *Resolver, cfg CacheConfig) *Cache {
	if cfg.Min <= 0 {
		cfg.Min = DefaultMinTTL
	}
	if cfg.Max <= 0 {
		cfg.Max = DefaultMaxTTL
	}
	cfg.Max = max(cfg.Max, cfg.Min)
	if cfg.Negative <= 0 {
		cfg.Negative = DefaultNegative
	}
	if cfg.Failure <= 0 {
		cfg.Failure = DefaultFailure
	}
	if cfg.MaxFailure <= 0 {
		cfg.MaxFailure = DefaultMaxFailure
	}
	cfg.MaxFailure = max(cfg.MaxFailure, cfg.Failure)
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Cache{r: r, cfg: cfg, entries: make(map[string]entry), flights: make(map[string]*flight)}
}

// Resolver is the resolver the cache asks.
func (c *Cache) Resolver() *Resolver { return c.r }

// key is the form a name is cached under.
func key(name string) string { return strings.TrimSuffix(strings.ToLower(name), ".") }

// Fresh reports whether name has an answer in memory that has not expired:
// a look-up of it now returns at once.
func (c *Cache) Fresh(name string) bool {
	k := key(name)
	if _, ok := c.cfg.Hosts[k]; ok {
		return true
	}
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	return ok && now.Before(e.expires)
}

// Lookup returns name's answer: from the hosts file, memory, the Store,
// or asked.
func (c *Cache) Lookup(ctx context.Context, name string) Answer {
	k := key(name)
	if a, ok := c.cfg.Hosts.answer(k); ok {
		c.hits.Add(1)
		a.At, a.Cached = c.cfg.Now(), true
		return a
	}
	for {
		now := c.cfg.Now()
		c.mu.Lock()
		if e, ok := c.entries[k]; ok && now.Before(e.expires) {
			c.mu.Unlock()
			c.hits.Add(1)
			a := e.a
			a.Cached = true
			return a
		}
		if f, ok := c.flights[k]; ok {
			c.mu.Unlock()
			c.coalesced.Add(1)
			select {
			case <-f.done:
			case <-ctx.Done():
				return cutShort(ctx)
			}
			if isCutShort(f.a) && ctx.Err() == nil {
				continue // the caller that asked gave up; this one has not
			}
			return f.a
		}
		f := &flight{done: make(chan struct{})}
		c.flights[k] = f
		c.mu.Unlock()
		f.a = c.fill(ctx, k, now)
		c.mu.Lock()
		delete(c.flights, k)
		c.mu.Unlock()
		close(f.done)
		return f.a
	}
}

// fill finds k's answer in the Store or asks, and remembers it.
func (c *Cache) fill(ctx context.Context, k string, now time.Time) Answer {
	if c.cfg.Store != nil {
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		a, ok, err := c.cfg.Store.Load(sctx, k, now)
		cancel()
		if err != nil {
			c.storeErrs.Add(1)
		}
		if ok {
			c.stored.Add(1)
			a.Cached = true
			c.remember(k, a, a.At.Add(c.keep(a, 0)), 0)
			return a
		}
	}
	c.misses.Add(1)
	a := c.r.Lookup(ctx, k)
	a.At = now
	if ctx.Err() != nil && a.Class != "" {
		return a // cut short: says nothing about the name
	}
	fails := 0
	if a.Failed() {
		fails = c.failsBefore(k) + 1
	}
	expires := now.Add(c.keep(a, fails))
	c.remember(k, a, expires, fails)
	if c.cfg.Store != nil && !a.Failed() {
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		if err := c.cfg.Store.Save(sctx, k, a, expires); err != nil {
			c.storeErrs.Add(1)
		}
		cancel()
	}
	return a
}

// failsBefore is how many times in a row k failed before now, as far as
// memory holds.
func (c *Cache) failsBefore(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[k].fails
}

// keep is how long a is good for; fails counts the failures in a row that
// a ends, when it is one.
func (c *Cache) keep(a Answer, fails int) time.Duration {
	ttl := time.Duration(a.TTL) * time.Second
	switch {
	case a.Failed():
		d := c.cfg.Failure
		for i := 1; i < fails && d < c.cfg.MaxFailure; i++ {
			d *= 2
		}
		return min(d, c.cfg.MaxFailure)
	case a.Negative() && ttl == 0:
		ttl = c.cfg.Negative
	}
	return min(max(ttl, c.cfg.Min), c.cfg.Max)
}

// remember holds a in memory until expires, making room first: expired
// entries go, then whatever the map gives first.
func (c *Cache) remember(k string, a Answer, expires time.Time, fails int) {
	a.Cached = false
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.cfg.MaxEntries {
		now := c.cfg.Now()
		for n, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, n)
			}
		}
		for n := range c.entries {
			if len(c.entries) < c.cfg.MaxEntries {
				break
			}
			delete(c.entries, n)
		}
	}
	c.entries[k] = entry{a: a, expires: expires, fails: fails}
}

// Addrs returns host's addresses, or an *Error classing why there are
// none. An IP literal is its own address.
func (c *Cache) Addrs(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{ip}, nil
	}
	a := c.Lookup(ctx, host)
	if err := a.Err(key(host)); err != nil {
		return nil, err
	}
	return a.Addrs(), nil
}
