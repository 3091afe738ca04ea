package learn

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"backfill/fetch"
)

// HostRules is what a host's robots.txt says to us.
type HostRules interface {
	Allowed(rawURL string) bool
	CrawlDelay() time.Duration // 0 when robots.txt sets none
	Reason() string            // why everything is disallowed, when it is
}

// PoliteSource fetches teacher pages on demand as a crawl would: the
// host's robots.txt first (once per host), then one request at a time per
// host with the Crawl-delay (or Delay, when robots.txt sets none) between
// two requests, robots.txt's own included. Safe for concurrent use for
// different hosts.
type PoliteSource struct {
	Fetcher *fetch.Fetcher
	// Robots reads the robots.txt of rawURL's host (a request to it).
	Robots func(ctx context.Context, rawURL string) (HostRules, error)
	// Delay is the pause between two requests to one host when its
	// robots.txt sets no Crawl-delay.
	Delay time.Duration
	// MaxDelay is the longest Crawl-delay honoured; a host asking more is
	// not fetched from. 0: any.
	MaxDelay time.Duration

	mu    sync.Mutex
	hosts map[string]*politeHost
}

type politeHost struct {
	mu    sync.Mutex // one request at a time
	rules HostRules
	err   error
	last  time.Time // when the last request to the host ended
}

// Fetch fetches rawURL when its host's robots.txt allows it, after the
// host's delay. A non-2xx answer is an error.
func (s *PoliteSource) Fetch(ctx context.Context, rawURL string) (*Page, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("fetch %s: not an absolute URL", rawURL)
	}
	key := strings.ToLower(u.Scheme + "://" + u.Host)
	s.mu.Lock()
	if s.hosts == nil {
		s.hosts = map[string]*politeHost{}
	}
	h := s.hosts[key]
	if h == nil {
		h = &politeHost{}
		s.hosts[key] = h
	}
	s.mu.Unlock()

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.rules == nil && h.err == nil {
		h.rules, h.err = s.Robots(ctx, rawURL)
		h.last = time.Now()
	}
	if h.err != nil {
		return nil, h.err
	}
	if !h.rules.Allowed(rawURL) {
		why := ""
		if r := h.rules.Reason(); r != "" {
			why = " (" + r + ")"
		}
		return nil, fmt.Errorf("robots.txt of %s disallows %s%s", u.Host, rawURL, why)
	}
	delay := s.Delay
	if cd := h.rules.CrawlDelay(); cd > 0 {
		if s.MaxDelay > 0 && cd > s.MaxDelay {
			return nil, fmt.Errorf("%s asks a Crawl-delay of %s, more than the %s honoured", u.Host, cd, s.MaxDelay)
		}
		delay = cd
	}
	if wait := time.Until(h.last.Add(delay)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	res, err := s.Fetcher.Get(ctx, rawURL)
	h.last = time.Now()
	if err != nil {
		return nil, err
	}
	return &Page{URL: res.URL, ContentType: res.ContentType, Body: res.Body}, nil
}
