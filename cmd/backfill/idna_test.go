package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestUnicodeHostOneDelayClock: one host spelt in Unicode by one record
// and in punycode by another is one host to the crawl. The server, pinned
// under its Unicode spelling, is asked for both pages under the punycode
// name and never for two of them closer together than the delay.
func TestUnicodeHostOneDelayClock(t *testing.T) {
	const delay = time.Second
	type request struct {
		at         time.Time
		host, path string
	}
	var mu sync.Mutex
	var log []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		log = append(log, request{time.Now(), r.Host, r.URL.Path})
		mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r) // no robots.txt: everything allowed, the default delay
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte("<html><body><p>a page of the bookshop</p></body></html>"))
	}))
	defer srv.Close()

	dir := t.TempDir()
	records := filepath.Join(dir, "records.csv")
	if err := os.WriteFile(records, []byte("id,name,email,homepage\n1,Ada,,http://Bücher.example/a\n2,Bob,,http://xn--bcher-kva.example/b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--records", records, "--state-dir", filepath.Join(dir, "state"),
		"--delay", delay.String(), "--workers", "4", "--allow-loopback", "--contact", "https://backfill.invalid/idna-test",
		"--resolve", "bücher.example:80:" + srv.Listener.Addr().String()}
	var stdout, stderr bytes.Buffer
	if code := mainExit(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("run: exit %d\n%s", code, stderr.String())
	}

	mu.Lock()
	defer mu.Unlock()
	var pages []request
	for _, r := range log {
		if r.host != "xn--bcher-kva.example" {
			t.Errorf("request for %s%s: want the host's ASCII name", r.host, r.path)
		}
		if r.path == "/a" || r.path == "/b" {
			pages = append(pages, r)
		}
	}
	var paths []string
	for _, p := range pages {
		paths = append(paths, p.path)
	}
	slices.Sort(paths)
	if !slices.Equal(paths, []string{"/a", "/b"}) {
		t.Fatalf("pages requested: %v; want /a and /b once each", log)
	}
	if gap := pages[1].at.Sub(pages[0].at); gap < delay {
		t.Errorf("%s and %s requested %v apart, less than the delay %v: two clocks for one host", pages[0].path, pages[1].path, gap, delay)
	}
}
