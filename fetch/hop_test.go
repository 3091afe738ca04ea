package fetch

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestDo: one call is one request; a hop is reported, never followed.
func TestDo(t *testing.T) {
	cases := []struct {
		name      string
		handler   http.HandlerFunc
		req       Request
		wantClass Class
		wantNext  string // relative to the site's origin
		wantHop   Hop
		wantBody  string
		truncated bool
	}{
		{name: "page", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<p>here</p>")
		}, wantBody: "<p>here</p>"},
		{name: "redirect not followed", handler: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/start" {
				http.Redirect(w, r, "/end#frag", http.StatusMovedPermanently)
				return
			}
			t.Errorf("Do followed the redirect to %s", r.URL)
		}, wantNext: "/end", wantHop: HopRedirect},
		{name: "redirect to another host", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://other.example/x", http.StatusFound)
		}, wantNext: "https://other.example/x", wantHop: HopRedirect},
		{name: "meta refresh is the page and its hop", handler: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/start" {
				t.Errorf("Do followed the refresh to %s", r.URL)
			}
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<meta http-equiv="refresh" content="0; url=/next">`)
		}, wantNext: "/next", wantHop: HopRefresh, wantBody: `<meta http-equiv="refresh" content="0; url=/next">`},
		{name: "meta refresh ignored on request", req: Request{IgnoreMetaRefresh: true}, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<meta http-equiv="refresh" content="0; url=/next">`)
		}, wantBody: `<meta http-equiv="refresh" content="0; url=/next">`},
		{name: "3xx without location", handler: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusFound)
		}, wantClass: ClassRedirect},
		{name: "request body cap", req: Request{MaxBody: 4}, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, "abcdefgh")
		}, wantBody: "abcd", truncated: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noLeak(t)
			var requests atomic.Int64
			cfg := baseConfig()
			addr := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				tc.handler(w, r)
			}))
			origin := site(&cfg, addr)
			f := New(cfg)
			t.Cleanup(f.Close)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := f.Do(ctx, origin+"/start", tc.req)
			if got := ClassOf(err); got != tc.wantClass {
				t.Fatalf("class %q, want %q (%v)", got, tc.wantClass, err)
			}
			if n := requests.Load(); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
			if tc.wantClass != "" {
				return
			}
			want := tc.wantNext
			if strings.HasPrefix(want, "/") {
				want = origin + want
			}
			if r.Next != want || r.Hop != tc.wantHop {
				t.Errorf("next %q (%v), want %q (%v)", r.Next, r.Hop, want, tc.wantHop)
			}
			if string(r.Body) != tc.wantBody || r.Truncated != tc.truncated {
				t.Errorf("body %q truncated %v, want %q %v", r.Body, r.Truncated, tc.wantBody, tc.truncated)
			}
			if r.URL != origin+"/start" {
				t.Errorf("URL %q", r.URL)
			}
		})
	}
}

func TestChain(t *testing.T) {
	cases := []struct {
		name  string
		max   int
		hops  []string
		fails int // index of the hop that fails, -1 for none
		want  string
	}{
		{"within the limit", 3, []string{"b", "c", "d"}, -1, ""},
		{"one too many", 2, []string{"b", "c", "d"}, 2, "too many redirects: more than 2"},
		{"loop to the start", 5, []string{"b", "a"}, 1, "redirect loop"},
		{"loop in the middle", 5, []string{"b", "c", "b"}, 2, "redirect loop"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChain("a", tc.max)
			for i, h := range tc.hops {
				err := c.Add(h)
				if i != tc.fails {
					if err != nil {
						t.Fatalf("hop %d (%s): %v", i, h, err)
					}
					continue
				}
				if err == nil || err.Class != ClassRedirect || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("hop %d (%s): %v, want %s", i, h, err, tc.want)
				}
				if c.Hops() != i {
					t.Errorf("a refused hop was recorded: %v", c.URLs())
				}
				return
			}
			if c.Hops() != len(tc.hops) {
				t.Errorf("hops %d", c.Hops())
			}
			again := ChainOf(c.URLs(), tc.max)
			if err := again.Add("a"); err == nil {
				t.Errorf("a rebuilt chain forgot its start")
			}
		})
	}
}
