package learn

import (
	"context"
	"errors"
	"sync"
	"time"
)

// DefaultRecrawlAfter is the recrawl age of kept pages a command uses
// unless told otherwise: a template rarely changes within a week, and a
// rule learned from a stale page is checked by its fixtures anyway.
const DefaultRecrawlAfter = 7 * 24 * time.Hour

// KeptSource is a Source that reads a teacher page from a PageCache when
// it was kept there less than MaxAge ago, and otherwise fetches it from
// Source and keeps it. A page that cannot be kept, or that was kept
// damaged, is still learned from (fetched again when damaged); Counts
// tells how many, and the first error.
type KeptSource struct {
	Cache  *PageCache
	Source Source
	// MaxAge is the recrawl age: a page kept longer ago is fetched
	// again. 0: a kept page is read however old.
	MaxAge time.Duration

	mu     sync.Mutex
	counts KeptCounts
}

// KeptCounts counts what a KeptSource did.
type KeptCounts struct {
	Kept    int   // pages read from the cache
	Fetched int   // pages fetched from their host
	Failed  int   // pages neither read nor fetched
	Unkept  int   // pages fetched that could not be kept, or were kept damaged
	Err     error // the first reason of Unkept
}

// Fetch returns rawURL's kept page, or fetches and keeps it.
func (s *KeptSource) Fetch(ctx context.Context, rawURL string) (*Page, error) {
	var notBefore time.Time
	if s.MaxAge > 0 {
		notBefore = time.Now().Add(-s.MaxAge)
	}
	p, _, err := s.Cache.Get(ctx, rawURL, notBefore)
	if err == nil {
		s.count(func(c *KeptCounts) { c.Kept++ })
		return p, nil
	}
	if !errors.Is(err, errNotKept) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s.unkept(err)
	}
	p, err = s.Source.Fetch(ctx, rawURL)
	if err != nil {
		s.count(func(c *KeptCounts) { c.Failed++ })
		return nil, err
	}
	s.count(func(c *KeptCounts) { c.Fetched++ })
	if err := s.Cache.Put(ctx, rawURL, p, time.Now()); err != nil && ctx.Err() == nil {
		s.unkept(err)
	}
	return p, nil
}

// Counts returns what was done so far.
func (s *KeptSource) Counts() KeptCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

func (s *KeptSource) count(f func(*KeptCounts)) {
	s.mu.Lock()
	f(&s.counts)
	s.mu.Unlock()
}

func (s *KeptSource) unkept(err error) {
	s.count(func(c *KeptCounts) {
		c.Unkept++
		if c.Err == nil {
			c.Err = err
		}
	})
}
