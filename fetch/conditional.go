package fetch

import (
	"context"
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// Validators are what a conditional request sends: the ETag and the
// Last-Modified date of the page's last fetch, as its server sent them.
// An empty one is not sent.
type Validators struct {
	ETag         string // sent as If-None-Match
	LastModified string // sent as If-Modified-Since
}

// maxValidator bounds a validator sent back to a server; a longer one is
// not a validator any server meant, and is not sent.
const maxValidator = 1024

// GetConditional fetches rawURL like Get, sending v's validators as
// If-None-Match and If-Modified-Since (on every hop of a redirect: they
// belong to the page the redirects led to last time). A 304 Not Modified
// is the answer, not a failure: it is returned as a Response with
// NotModified set, Status 304 and no body, and a nil error. Validators
// that could not be sent as header values (control characters, over 1
// KiB) are dropped; with none left the request is an ordinary Get, and a
// 304 to it is a bad status as always.
func (f *Fetcher) GetConditional(ctx context.Context, rawURL string, v Validators) (*Response, error) {
	v = v.usable()
	if !v.conditional() {
		return f.get(ctx, rawURL, nil)
	}
	return f.get(ctx, rawURL, &v)
}

// usable is v without the validators that cannot be sent.
func (v Validators) usable() Validators {
	ok := func(s string) string {
		s = strings.TrimSpace(s)
		if s == "" || len(s) > maxValidator || !httpguts.ValidHeaderFieldValue(s) {
			return ""
		}
		return s
	}
	return Validators{ETag: ok(v.ETag), LastModified: ok(v.LastModified)}
}

// conditional reports whether v makes a request conditional (nil does not).
func (v *Validators) conditional() bool {
	return v != nil && (v.ETag != "" || v.LastModified != "")
}

// set writes v's validators into a request's header.
func (v *Validators) set(h http.Header) {
	if v == nil {
		return
	}
	if v.ETag != "" {
		h.Set("If-None-Match", v.ETag)
	}
	if v.LastModified != "" {
		h.Set("If-Modified-Since", v.LastModified)
	}
}
