package fetch

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"
)

// conditionalSite serves one page with an ETag and a Last-Modified date,
// answers a matching conditional request with 304 (as net/http's
// ServeContent does), and records the validators each request sent.
type conditionalSite struct {
	mu   sync.Mutex
	seen []Validators
}

const pageETag = `"page-v1"`

var pageModified = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func (s *conditionalSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.seen = append(s.seen, Validators{ETag: r.Header.Get("If-None-Match"), LastModified: r.Header.Get("If-Modified-Since")})
	s.mu.Unlock()
	if r.URL.Path == "/moved" {
		http.Redirect(w, r, "/page", http.StatusFound)
		return
	}
	w.Header().Set("ETag", pageETag)
	w.Header().Set("Last-Modified", pageModified.Format(http.TimeFormat))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	inm, ims := r.Header.Get("If-None-Match"), r.Header.Get("If-Modified-Since")
	if inm == pageETag || (inm == "" && ims != "" && !mustParseHTTPTime(ims).Before(pageModified)) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Write([]byte("<html><body><p>the page</p></body></html>"))
}

func mustParseHTTPTime(s string) time.Time {
	t, err := http.ParseTime(s)
	if err != nil {
		return time.Time{}
	}
	return t
}

func (s *conditionalSite) log() []Validators {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Validators(nil), s.seen...)
}

func TestGetConditional(t *testing.T) {
	noLeak(t)
	lm := pageModified.Format(http.TimeFormat)
	cases := []struct {
		name        string
		path        string
		v           Validators
		notModified bool
		sent        Validators // what the final hop sent
	}{
		{"matching etag", "/page", Validators{ETag: pageETag}, true, Validators{ETag: pageETag}},
		{"other etag", "/page", Validators{ETag: `"page-v0"`}, false, Validators{ETag: `"page-v0"`}},
		{"last-modified only", "/page", Validators{LastModified: lm}, true, Validators{LastModified: lm}},
		{"older last-modified", "/page", Validators{LastModified: pageModified.Add(-time.Hour).Format(http.TimeFormat)}, false,
			Validators{LastModified: pageModified.Add(-time.Hour).Format(http.TimeFormat)}},
		{"both", "/page", Validators{ETag: pageETag, LastModified: lm}, true, Validators{ETag: pageETag, LastModified: lm}},
		{"through a redirect", "/moved", Validators{ETag: pageETag}, true, Validators{ETag: pageETag}},
		{"unsendable validators dropped", "/page", Validators{ETag: "\"a\r\nX-Injected: 1\""}, false, Validators{}},
		{"none", "/page", Validators{}, false, Validators{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := &conditionalSite{}
			cfg := baseConfig()
			base := site(&cfg, newHTTPServer(t, cs))
			f := New(cfg)
			defer f.Close()
			resp, err := f.GetConditional(context.Background(), base+c.path, c.v)
			if err != nil {
				t.Fatalf("GetConditional: %v", err)
			}
			if resp.NotModified != c.notModified {
				t.Fatalf("NotModified = %v, want %v (status %d)", resp.NotModified, c.notModified, resp.Status)
			}
			if c.notModified {
				if resp.Status != http.StatusNotModified || len(resp.Body) != 0 {
					t.Errorf("304 answer: status %d, %d body bytes", resp.Status, len(resp.Body))
				}
			} else if resp.Status != http.StatusOK || len(resp.Body) == 0 {
				t.Errorf("status %d with %d body bytes, want the page", resp.Status, len(resp.Body))
			}
			if got := resp.Header.Get("Etag"); got != pageETag {
				t.Errorf("ETag header %q, want %q", got, pageETag)
			}
			log := cs.log()
			if len(log) == 0 || log[len(log)-1] != c.sent {
				t.Errorf("validators sent %+v, want %+v last", log, c.sent)
			}
		})
	}
}

// A 304 is a success only as the answer to a conditional request: to a
// plain Get it is a bad status, as it always was.
func TestNotModifiedWithoutValidatorsIsBadStatus(t *testing.T) {
	noLeak(t)
	cfg := baseConfig()
	base := site(&cfg, newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotModified)
	})))
	f := New(cfg)
	defer f.Close()
	for _, get := range []func() (*Response, error){
		func() (*Response, error) { return f.Get(context.Background(), base+"/") },
		func() (*Response, error) { return f.GetConditional(context.Background(), base+"/", Validators{}) },
	} {
		resp, err := get()
		var fe *Error
		if !errors.As(err, &fe) || fe.Class != ClassStatus {
			t.Fatalf("err = %v, want a bad-status error", err)
		}
		if resp != nil && resp.NotModified {
			t.Fatal("unconditional request answered NotModified")
		}
	}
}
