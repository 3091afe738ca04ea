package learn

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"backfill/backoff"
	"backfill/fetch"
	"backfill/store"
)

// HostRules is what a host's robots.txt says to us.
type HostRules interface {
	Allowed(rawURL string) bool
	CrawlDelay() time.Duration // 0 when robots.txt sets none
	Reason() string            // why everything is disallowed, when it is
	// Unavailable is the error of a robots.txt that could not be had,
	// which disallows everything until it can be; nil otherwise.
	Unavailable() error
}

// PoliteSource fetches teacher pages on demand as a crawl would: the
// host's robots.txt first (once per host), then one request at a time per
// host with the Crawl-delay (or Delay, when robots.txt sets none) between
// two requests, robots.txt's own included. A redirect is followed as a
// request of its own under its target host's rules (robots.txt, delay),
// up to the Fetcher's redirect limit and never in a loop; the Fetcher
// refuses a blacklisted name before it is looked up (fetch.Config's
// DenyNames). Safe for concurrent use for different hosts.
type PoliteSource struct {
	Fetcher *fetch.Fetcher
	// Robots reads the robots.txt of rawURL's host, each of its requests
	// made with do, which keeps the host's delay.
	Robots func(ctx context.Context, rawURL string, do func(ctx context.Context, rawURL string, r fetch.Request) (*fetch.Response, error)) (HostRules, error)
	// MaxRedirects bounds a page's chain of redirects; 0:
	// fetch.DefaultMaxRedirects.
	MaxRedirects int
	// Delay is the pause between two requests to one host when its
	// robots.txt sets no Crawl-delay.
	Delay time.Duration
	// MaxDelay is the longest Crawl-delay honoured; a host asking more is
	// not fetched from. 0: any.
	MaxDelay time.Duration
	// Crawl, when set, is a crawl's host cache (the store's): before
	// each request to a host its last-crawl time there is read, and the
	// host's delay runs from it when it is later than our own last
	// request; each request's end is written there, so a crawl after
	// (or during) learning waits for the host too. Only its last-crawl
	// times are used.
	Crawl store.HostCache
	// CrawlLag is how far the crawl's last-crawl times may trail its
	// requests (its supervisors write them behind): a time read from
	// Crawl that is later than our own last request is taken as that
	// much later, as a supervisor takes a time another one wrote.
	CrawlLag time.Duration

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
// host's delay, and each redirect's target the same way. A non-2xx answer
// is an error.
func (s *PoliteSource) Fetch(ctx context.Context, rawURL string) (*Page, error) {
	res, err := s.Get(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	return &Page{URL: res.URL, ContentType: res.ContentType, Body: res.Body}, nil
}

// Get is Fetch with the fetcher's answer: the last response, and with a
// non-2xx status both the response and the fetcher's error (as
// fetch.Fetcher.Get returns them).
func (s *PoliteSource) Get(ctx context.Context, rawURL string) (*fetch.Response, error) {
	max := s.MaxRedirects
	if max <= 0 {
		max = fetch.DefaultMaxRedirects
	}
	chain := fetch.NewChain(rawURL, max)
	for cur := rawURL; ; {
		res, err := s.fetchOne(ctx, cur)
		if err != nil || res.Next == "" {
			return res, err
		}
		if err := chain.Add(res.Next); err != nil {
			err.URL = rawURL
			return nil, err
		}
		cur = res.Next
	}
}

// fetchOne makes the one request for rawURL under its host's rules, and
// follows nothing.
func (s *PoliteSource) fetchOne(ctx context.Context, rawURL string) (*fetch.Response, error) {
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
	hostKey := fetch.HostKey(u)
	if h.rules == nil && h.err == nil {
		// robots.txt's requests keep the delay robots.txt has yet to
		// tell: ours.
		h.rules, h.err = s.Robots(ctx, rawURL, func(ctx context.Context, rawURL string, r fetch.Request) (*fetch.Response, error) {
			return s.request(ctx, h, hostKey, s.Delay, rawURL, r)
		})
	}
	if h.err != nil {
		return nil, h.err
	}
	if err := h.rules.Unavailable(); err != nil {
		return nil, err
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
	return s.request(ctx, h, hostKey, delay, rawURL, fetch.Request{})
}

// request makes one request to the host h (whose lock the caller holds)
// once delay has passed since its last one, and notes its end.
func (s *PoliteSource) request(ctx context.Context, h *politeHost, hostKey string, delay time.Duration, rawURL string, r fetch.Request) (*fetch.Response, error) {
	if err := s.wait(ctx, h, hostKey, delay); err != nil {
		return nil, err
	}
	res, err := s.Fetcher.Do(ctx, rawURL, r)
	if rerr := s.requested(ctx, h, hostKey); rerr != nil {
		return nil, rerr
	}
	return res, err
}

// wait returns once delay has passed since the host's last request, ours
// or (from Crawl) the crawl's, or when ctx ends.
func (s *PoliteSource) wait(ctx context.Context, h *politeHost, hostKey string, delay time.Duration) error {
	last := h.last
	if s.Crawl != nil {
		at, err := s.Crawl.LastCrawl(ctx, hostKey)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			// Without the crawl's time the delay cannot be kept.
			return fmt.Errorf("last crawl of %s: %w", hostKey, err)
		case at.After(h.last):
			// Not our own time come back (the store keeps the later of
			// two): the crawl's, perhaps written behind.
			last = at.Add(s.CrawlLag)
		}
	}
	if wait := time.Until(last.Add(delay)); wait > 0 && !backoff.Sleep(ctx, wait) {
		return ctx.Err()
	}
	return nil
}

// requested notes that a request to the host ended now, here and in
// Crawl.
func (s *PoliteSource) requested(ctx context.Context, h *politeHost, hostKey string) error {
	h.last = time.Now()
	if s.Crawl == nil {
		return nil
	}
	if err := s.Crawl.PutLastCrawl(ctx, hostKey, h.last); err != nil {
		return fmt.Errorf("record the last crawl of %s: %w", hostKey, err)
	}
	return nil
}
