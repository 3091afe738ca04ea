package fetch

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestUnicodeHost: a host written in Unicode is requested in its ASCII
// form (the Host header, the name looked up), found under a Resolve pin
// written either way, and keyed like its punycode spelling; a host with
// no ASCII form is a bad URL naming it.
func TestUnicodeHost(t *testing.T) {
	noLeak(t)
	var mu sync.Mutex
	var hosts []string
	addr := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<p>page</p>"))
	}))
	for _, pin := range []string{"bücher.example:80", "xn--bcher-kva.example:80"} {
		cfg := baseConfig()
		cfg.Resolve = map[string]string{pin: addr}
		f := New(cfg)
		for _, u := range []string{"http://Bücher.example/a", "http://xn--bcher-kva.example/b"} {
			resp, err := f.Get(context.Background(), u)
			if err != nil {
				t.Fatalf("pinned as %s: %s: %v", pin, u, err)
			}
			if !strings.HasPrefix(resp.URL, "http://xn--bcher-kva.example/") {
				t.Errorf("pinned as %s: %s fetched as %s", pin, u, resp.URL)
			}
		}
		f.Close()
	}
	mu.Lock()
	for _, h := range hosts {
		if h != "xn--bcher-kva.example" {
			t.Errorf("the server was asked for host %q", h)
		}
	}
	mu.Unlock()

	f := New(baseConfig())
	defer f.Close()
	const bad = "http://xn--zz.example/page"
	_, err := f.Get(context.Background(), bad)
	if ClassOf(err) != ClassURL || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "invalid host name") {
		t.Errorf("%s: %v; want a bad-url error naming it and the host", bad, err)
	}
}
