package supervisor

import (
	"context"
	"strings"
	"sync"

	"backfill/fetch"
)

// renderCache keeps what rendered pages fetched, by URL, so that the
// script bundle (or the configuration JSON) that every page of a site
// loads is requested once, not once per page: each request costs the
// host a turn of its delay. Requests for a URL already on its way wait for
// that one answer. Successful (2xx) answers are kept, the oldest dropped
// first beyond the byte budget or renderCacheEntries answers (empty
// answers cost no bytes but an entry all the same); an answer the site
// marks no-store, and every failure, are not kept. Safe for concurrent
// use.
type renderCache struct {
	max int64 // bytes of bodies kept

	mu      sync.Mutex
	entries map[string]*cacheEntry
	order   []string // kept entries, oldest first
	bytes   int64
}

// renderCacheEntries bounds the answers kept, whatever their size.
const renderCacheEntries = 4096

type cacheEntry struct {
	ready chan struct{} // closed once resp and err are set
	resp  *fetch.Response
	err   error
	kept  bool
}

func newRenderCache(max int64) *renderCache {
	return &renderCache{max: max, entries: make(map[string]*cacheEntry)}
}

// get returns the answer for rawURL: from the cache, from a request for
// it already in progress, or from fetch. hit reports that no new request
// was made for this call.
func (c *renderCache) get(ctx context.Context, rawURL string, fetchFn func(context.Context, string) (*fetch.Response, error)) (resp *fetch.Response, err error, hit bool) {
	c.mu.Lock()
	if e := c.entries[rawURL]; e != nil {
		c.mu.Unlock()
		select {
		case <-e.ready:
			if e.kept || e.err == nil {
				return e.resp, e.err, true
			}
			// The request it waited for failed: its own context (another
			// page's) may be what ended it. Try once more on its own.
			return c.get(ctx, rawURL, fetchFn)
		case <-ctx.Done():
			return nil, &fetch.Error{Class: fetch.ClassCanceled, URL: rawURL, Err: context.Cause(ctx)}, true
		}
	}
	e := &cacheEntry{ready: make(chan struct{})}
	c.entries[rawURL] = e
	c.mu.Unlock()

	e.resp, e.err = fetchFn(ctx, rawURL)
	c.mu.Lock()
	if e.err == nil && cacheable(e.resp) {
		e.kept = true
		c.bytes += int64(len(e.resp.Body))
		c.order = append(c.order, rawURL)
		for (c.bytes > c.max || len(c.order) > renderCacheEntries) && len(c.order) > 0 {
			old := c.order[0]
			c.order = c.order[1:]
			if oe := c.entries[old]; oe != nil {
				c.bytes -= int64(len(oe.resp.Body))
				delete(c.entries, old)
			}
		}
	} else {
		delete(c.entries, rawURL)
	}
	c.mu.Unlock()
	close(e.ready)
	return e.resp, e.err, false
}

// cacheable reports a successful answer the site lets be stored.
func cacheable(resp *fetch.Response) bool {
	if resp == nil || resp.Status < 200 || resp.Status > 299 || resp.Truncated {
		return false
	}
	for _, v := range resp.Header.Values("Cache-Control") {
		if strings.Contains(strings.ToLower(v), "no-store") {
			return false
		}
	}
	return true
}
