package fetch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// A redirect or a meta refresh sends the client to another URL, which may
// be on another host: a request there is the other host's to allow, under
// its own robots.txt and delay. So a caller that keeps hosts' rules makes
// one request at a time with Do, which follows nothing and says where a
// response points (Response.Next), and decides itself whether and when the
// next request goes; Chain keeps the hops' loop and length checks in one
// place for every such caller. Get and GetConditional follow hops
// themselves, for callers with no rules to keep.

// Hop says how a response points elsewhere. Append only: it crosses the
// wire.
type Hop uint8

const (
	HopNone     Hop = iota
	HopRedirect     // an HTTP 3xx with a Location
	HopRefresh      // a <meta http-equiv=refresh> or Refresh header within MaxRefreshWait
)

func (h Hop) String() string {
	switch h {
	case HopRedirect:
		return "redirect"
	case HopRefresh:
		return "refresh"
	}
	return "none"
}

// Request is how Do makes one request. The zero Request is a plain GET
// under the Fetcher's Config.
type Request struct {
	// Validators make the request conditional (see GetConditional).
	Validators *Validators
	// MaxBody caps the bytes kept of this response, below Config.MaxBody
	// (a robots.txt is read to a smaller cap than a page); 0: MaxBody.
	MaxBody int64
	// IgnoreMetaRefresh: a page's meta refresh is not a hop (robots.txt
	// has none, RFC 9309).
	IgnoreMetaRefresh bool
}

func (r Request) maxBody(max int64) int64 {
	if r.MaxBody > 0 && r.MaxBody < max {
		return r.MaxBody
	}
	return max
}

// Do makes exactly one request for rawURL, under Config.Timeout, and
// follows nothing. A response that sends the client elsewhere comes back
// with Next set to the target (an absolute http(s) URL, the fragment
// dropped) and Hop saying how: an HTTP redirect as its status and header
// with no body, a meta refresh as the page that carries it. The caller
// checks the hop with a Chain and makes the next request when the target
// host allows it. Errors are classified as Get's are; a 3xx without a
// usable Location is ClassRedirect.
func (f *Fetcher) Do(parent context.Context, rawURL string, r Request) (*Response, error) {
	start := time.Now()
	if f == nil || f.ts == nil {
		return nil, &Error{Class: ClassOther, URL: rawURL, Err: errors.New("fetcher not built with New")}
	}
	if strings.TrimSpace(f.cfg.UserAgent) == "" {
		return nil, &Error{Class: ClassOther, URL: rawURL, Err: errors.New("no user agent configured (Config.UserAgent is required)")}
	}
	u, err := parseTarget(rawURL)
	if err != nil {
		return nil, &Error{Class: ClassURL, URL: rawURL, Err: err}
	}
	if r.Validators != nil {
		v := r.Validators.usable()
		r.Validators = nil
		if v.conditional() {
			r.Validators = &v
		}
	}
	ctx, cancel := context.WithTimeoutCause(parent, f.cfg.Timeout, errTotalTimeout)
	defer cancel()
	resp, ferr := f.onceNoted(ctx, parent, u, r)
	if resp != nil {
		resp.Elapsed = time.Since(start)
	}
	if ferr != nil {
		ferr.URL = rawURL
		return resp, ferr
	}
	return resp, nil
}

// The two ways a Chain refuses a hop, wrapped in its ClassRedirect error.
var (
	ErrRedirectLoop     = errors.New("redirect loop")
	ErrTooManyRedirects = errors.New("too many redirects")
)

// Chain is the URLs one fetch has been sent through so far, first to
// last, and the longest it may grow: the loop and length checks of
// following hops, whoever follows them (Get itself, or a caller of Do
// that makes each hop a request of its own, possibly in another process:
// a Chain is rebuilt from its URLs with ChainOf).
type Chain struct {
	urls []string
	max  int
}

// NewChain starts a chain at first that allows max hops.
func NewChain(first string, max int) *Chain {
	return &Chain{urls: []string{first}, max: max}
}

// ChainOf rebuilds a chain from its URLs, first to last.
func ChainOf(urls []string, max int) *Chain {
	return &Chain{urls: append([]string(nil), urls...), max: max}
}

// Add records a hop to next. It fails with ClassRedirect, recording
// nothing, when next was visited already (a loop) or the chain would pass
// its length.
func (c *Chain) Add(next string) *Error {
	last := c.urls[len(c.urls)-1]
	if len(c.urls) > c.max {
		return &Error{Class: ClassRedirect, URL: c.urls[0], Err: fmt.Errorf("%w: more than %d (last %s → %s)", ErrTooManyRedirects, c.max, last, next)}
	}
	for _, v := range c.urls {
		if v == next {
			return &Error{Class: ClassRedirect, URL: c.urls[0], Err: fmt.Errorf("%w: %s → %s was already visited", ErrRedirectLoop, last, next)}
		}
	}
	c.urls = append(c.urls, next)
	return nil
}

// Hops is the number of hops recorded.
func (c *Chain) Hops() int { return len(c.urls) - 1 }

// URLs are the chain's URLs, first to last; the caller must not change
// them.
func (c *Chain) URLs() []string { return c.urls }
