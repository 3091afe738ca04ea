package learn

import (
	"context"
	"errors"
	"sync"
	"time"

	"backfill/etl"
	"backfill/store"
)

// PageCacheFile is the name, inside a state directory with no crawl
// store in it, of the file the teacher pages learning fetched are kept in
// (a store.PageFile). Where a crawl's store is, they are kept among the
// crawl's pages instead, and each reads what the other fetched.
const PageCacheFile = "learn-pages.db"

// DefaultRecrawlAfter is the recrawl age of kept pages a command uses
// unless told otherwise: a template rarely changes within a week, and a
// rule learned from a stale page is checked by its fixtures anyway.
const DefaultRecrawlAfter = 7 * 24 * time.Hour

// KeptSource is a Source that reads a teacher page from kept pages
// (store.Pages: a crawl's store, or a page file of its own) when it was
// kept there less than MaxAge ago, and otherwise fetches it from Source
// and keeps it. Pages are kept under their URL as the crawl normalizes
// it, so a page the crawl fetched is read here and the other way round;
// a page the crawl kept as the browser rendered it is not learned from
// (a rule learned on a rendered page may find nothing in the HTML). A
// page that cannot be kept, or that was kept damaged, is still learned
// from (fetched again when damaged); Counts tells how many, and the
// first error.
type KeptSource struct {
	Pages  store.Pages
	Source Source
	// MaxAge is the recrawl age: a page kept longer ago is fetched
	// again. 0: a kept page is read however old.
	MaxAge time.Duration
	// MaxBytes, when positive, is the bound (compressed) the kept pages
	// are held under after each page kept, oldest first: for pages
	// learning owns. 0 leaves bounding them to their owner (a crawl's
	// store: the crawl trims it to its --keep-pages).
	MaxBytes int64

	mu     sync.Mutex
	counts KeptCounts
}

// KeptCounts counts what a KeptSource did.
type KeptCounts struct {
	Kept    int   // pages read from the kept pages
	Fetched int   // pages fetched from their host
	Failed  int   // pages neither read nor fetched
	Unkept  int   // pages fetched that could not be kept, or were kept damaged
	Err     error // the first reason of Unkept
}

// Fetch returns rawURL's kept page, or fetches and keeps it.
func (s *KeptSource) Fetch(ctx context.Context, rawURL string) (*Page, error) {
	key := rawURL
	if n, err := etl.NormalizeURL(rawURL); err == nil {
		key = n
	}
	var notBefore time.Time
	if s.MaxAge > 0 {
		notBefore = time.Now().Add(-s.MaxAge)
	}
	kept, err := s.Pages.Page(ctx, key)
	switch {
	case err == nil && !kept.Rendered && !kept.FetchedAt.Before(notBefore):
		s.count(func(c *KeptCounts) { c.Kept++ })
		return &Page{URL: kept.Address(), ContentType: kept.ContentType, Body: kept.Body}, nil
	case err != nil && !errors.Is(err, store.ErrNotFound):
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s.unkept(err)
	}
	p, err := s.Source.Fetch(ctx, rawURL)
	if err != nil {
		s.count(func(c *KeptCounts) { c.Failed++ })
		return nil, err
	}
	s.count(func(c *KeptCounts) { c.Fetched++ })
	if err := s.keep(ctx, key, p); err != nil && ctx.Err() == nil {
		s.unkept(err)
	}
	return p, nil
}

// keep puts p under key, then holds the kept pages under MaxBytes.
func (s *KeptSource) keep(ctx context.Context, key string, p *Page) error {
	n, err := s.Pages.PutPages(ctx, []store.Page{{Key: key, URL: p.URL, Status: 200, ContentType: p.ContentType,
		Body: p.Body, FetchedAt: time.Now()}})
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("learn: keep " + key + ": over the size one page may take")
	}
	if s.MaxBytes > 0 {
		_, err = s.Pages.TrimPages(ctx, s.MaxBytes)
	}
	return err
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
