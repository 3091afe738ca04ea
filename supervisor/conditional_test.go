package supervisor

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"backfill/wire"
)

// validatorSite serves /people/a with an ETag and /people/b with a
// Last-Modified date, answers matching conditional requests with 304, and
// logs the validators each page request carried.
type validatorSite struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string // "path inm ims"
}

var modified = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newValidatorSite(t *testing.T) *validatorSite {
	s := &validatorSite{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		inm, ims := r.Header.Get("If-None-Match"), r.Header.Get("If-Modified-Since")
		s.mu.Lock()
		s.got = append(s.got, r.URL.Path+" "+inm+" "+ims)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/people/a":
			w.Header().Set("ETag", `"a-1"`)
			if inm == `"a-1"` {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		case "/people/b":
			w.Header().Set("Last-Modified", modified.Format(http.TimeFormat))
			if t, err := http.ParseTime(ims); err == nil && !t.Before(modified) {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		default:
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`<html><body><h1 class="name">Ada</h1><span class="email">ada@a.test</span></body></html>`))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *validatorSite) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// A task carrying validators is fetched conditionally; a 304 comes back as
// a Result marked NotModified, without fields; a 200 carries the page's
// new validators for the next time.
func TestConditionalFetch(t *testing.T) {
	t.Parallel()
	web := newValidatorSite(t)
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d)
	cfg.Fetch.Resolve = map[string]string{"cond.test:80": web.srv.Listener.Addr().String()}
	cfg.DefaultDelay = NoDelay
	start(t, cfg)
	register(t, d)

	lm := modified.Format(http.TimeFormat)
	cases := []struct {
		id, path, etag, lastMod string
		notModified             bool
		wantETag, wantLM        string
		sent                    string
	}{
		{"first-a", "/people/a", "", "", false, `"a-1"`, "", "/people/a  "},
		{"etag-same", "/people/a", `"a-1"`, "", true, `"a-1"`, "", `/people/a "a-1" `},
		{"etag-old", "/people/a", `"a-0"`, "", false, `"a-1"`, "", `/people/a "a-0" `},
		{"first-b", "/people/b", "", "", false, "", lm, "/people/b  "},
		{"since-same", "/people/b", "", lm, true, "", lm, "/people/b  " + lm},
		{"since-older", "/people/b", "", modified.Add(-time.Hour).Format(http.TimeFormat), false, "", lm,
			"/people/b  " + modified.Add(-time.Hour).Format(http.TimeFormat)},
	}
	for i, c := range cases {
		task := wire.Task{ID: c.id, Lease: int64(i + 1), URL: "http://cond.test" + c.path, Host: "cond.test", ETag: c.etag, LastModified: c.lastMod}
		if err := d.out.Send(wire.KindTask, task, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		// One at a time, so the request log lines up with the cases.
		r := d.collect(1, 10*time.Second)[c.id]
		if r.Class != "" {
			t.Fatalf("%s: class %q: %s", c.id, r.Class, r.Error)
		}
		if r.NotModified != c.notModified {
			t.Errorf("%s: NotModified = %v, want %v (status %d)", c.id, r.NotModified, c.notModified, r.Status)
		}
		if c.notModified && (r.Status != http.StatusNotModified || len(r.Fields) > 0 || len(r.Links) > 0) {
			t.Errorf("%s: a 304 result has status %d, fields %v, links %v", c.id, r.Status, r.Fields, r.Links)
		}
		if !c.notModified && len(r.Fields) == 0 {
			t.Errorf("%s: a fetched page yielded no fields", c.id)
		}
		if r.ETag != c.wantETag || r.LastModified != c.wantLM {
			t.Errorf("%s: validators %q %q, want %q %q", c.id, r.ETag, r.LastModified, c.wantETag, c.wantLM)
		}
		log := web.log()
		if got := log[len(log)-1]; got != c.sent {
			t.Errorf("%s: request %q, want %q", c.id, got, c.sent)
		}
	}
	pages := 0
	for _, l := range web.log() {
		if strings.HasPrefix(l, "/people/") {
			pages++
		}
	}
	if pages != len(cases) {
		t.Errorf("%d page requests, want %d: %s", pages, len(cases), strings.Join(web.log(), "; "))
	}
}
