package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"backfill/store"
)

func init() {
	for _, pc := range pageCases {
		cases = append(cases, testCase{pc.name, func(ctx context.Context, t *testing.T, s store.Store) { pc.run(ctx, t, s) }})
	}
}

type pageCase struct {
	name string
	run  func(ctx context.Context, t *testing.T, s store.Pages)
}

// RunPages runs the cases of Pages against a fresh one from open (a
// store.PageFile: a store passes them in Run), closing it after each.
func RunPages(t *testing.T, open func(t *testing.T) interface {
	store.Pages
	Close() error
}) {
	t.Helper()
	for _, pc := range pageCases {
		t.Run(pc.name, func(t *testing.T) {
			p := open(t)
			t.Cleanup(func() {
				if err := p.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
			defer cancel()
			pc.run(ctx, t, p)
		})
	}
}

// testPage is a page of key fetched at, whose body is n bytes of text
// that compress alike for every key.
func testPage(key string, n int, at time.Time) store.Page {
	return store.Page{Key: key, Status: 200, ContentType: "text/html",
		Body: []byte(strings.Repeat("<p>x</p>", n/8+1)[:n]), FetchedAt: at}
}

func putPages(ctx context.Context, t *testing.T, p store.Pages, pages ...store.Page) int {
	t.Helper()
	n, err := p.PutPages(ctx, pages)
	if err != nil {
		t.Fatalf("PutPages: %v", err)
	}
	return n
}

// keptKeys lists the keys kept, in order, through EachPage.
func keptKeys(ctx context.Context, t *testing.T, p store.Pages) []string {
	t.Helper()
	var keys []string
	if err := store.EachPage(ctx, p, func(pg store.Page) error { keys = append(keys, pg.Key); return nil }); err != nil {
		t.Fatalf("EachPage: %v", err)
	}
	return keys
}

func samePage(got, want store.Page) bool {
	return got.Key == want.Key && got.URL == want.URL && got.Status == want.Status && got.ContentType == want.ContentType &&
		bytes.Equal(got.Body, want.Body) && got.Rendered == want.Rendered && got.FetchedAt.Equal(want.FetchedAt)
}

// pageCases are the cases every Pages passes, a store's or a PageFile's.
var pageCases = []pageCase{
	{"pages/none kept", func(ctx context.Context, t *testing.T, s store.Pages) {
		if _, err := s.Page(ctx, "http://a.example/"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Page on an empty store: %v, want ErrNotFound", err)
		}
		if st, err := s.PageStats(ctx); err != nil || st != (store.PageStats{}) {
			t.Errorf("PageStats = %+v, %v; want none", st, err)
		}
		if keys := keptKeys(ctx, t, s); len(keys) != 0 {
			t.Errorf("kept %v", keys)
		}
	}},
	{"pages/come back as kept", func(ctx context.Context, t *testing.T, s store.Pages) {
		pages := []store.Page{
			{Key: "http://a.example/p/1", URL: "http://a.example/p/1/", Status: 200, ContentType: "text/html",
				Body: []byte("<p>Lisbon, Portugal — ünïcödé</p>"), FetchedAt: base},
			{Key: "http://b.example/app", Status: 200, ContentType: "text/html", Body: []byte("<div id=app>rendered</div>"),
				Rendered: true, FetchedAt: base.Add(time.Second)},
			{Key: "http://c.example/empty", Status: 204, ContentType: "text/plain", Body: []byte{}, FetchedAt: base.Add(2 * time.Second)},
			{Key: "http://a.example/same", URL: "http://a.example/same", Status: 200, ContentType: "application/json",
				Body: []byte(`{"a":1}`), FetchedAt: base.Add(3 * time.Second)},
		}
		if n := putPages(ctx, t, s, pages...); n != len(pages) {
			t.Errorf("kept %d of %d", n, len(pages))
		}
		pages[3].URL = "" // a URL that is the key is not kept twice
		for _, want := range pages {
			got, err := s.Page(ctx, want.Key)
			if err != nil || !samePage(got, want) {
				t.Errorf("Page(%s) = %+v, %v\nwant %+v", want.Key, got, err, want)
			}
			if addr := got.Address(); (want.URL != "" && addr != want.URL) || (want.URL == "" && addr != want.Key) {
				t.Errorf("%s: Address = %s", want.Key, addr)
			}
		}
		if got := keptKeys(ctx, t, s); fmt.Sprint(got) != "[http://a.example/p/1 http://a.example/same http://b.example/app http://c.example/empty]" {
			t.Errorf("EachPage gave %v, want key order", got)
		}
	}},
	{"pages/kept again replaces", func(ctx context.Context, t *testing.T, s store.Pages) {
		const key = "http://a.example/p"
		putPages(ctx, t, s, testPage(key, 1000, base))
		newer := store.Page{Key: key, Status: 200, ContentType: "text/html", Body: []byte("<p>new</p>"), FetchedAt: base.Add(time.Hour)}
		putPages(ctx, t, s, newer)
		if got, err := s.Page(ctx, key); err != nil || !samePage(got, newer) {
			t.Errorf("Page = %+v, %v; want the newer", got, err)
		}
		if st, err := s.PageStats(ctx); err != nil || st.Pages != 1 {
			t.Errorf("PageStats = %+v, %v; want one page", st, err)
		}
	}},
	{"pages/many pages list in batches", func(ctx context.Context, t *testing.T, s store.Pages) {
		const n = 150 // more than two of EachPage's reads
		var pages []store.Page
		for i := range n {
			pages = append(pages, testPage(fmt.Sprintf("http://h%d.example/%03d", i%7, i), 200, base.Add(time.Duration(i)*time.Millisecond)))
		}
		putPages(ctx, t, s, pages...)
		keys := keptKeys(ctx, t, s)
		if len(keys) != n {
			t.Fatalf("EachPage gave %d pages, want %d", len(keys), n)
		}
		for i := 1; i < len(keys); i++ {
			if keys[i-1] >= keys[i] {
				t.Fatalf("EachPage out of order at %d: %s then %s", i, keys[i-1], keys[i])
			}
		}
	}},
	{"pages/trim lets the oldest go", func(ctx context.Context, t *testing.T, s store.Pages) {
		put := func(keys ...string) {
			for i, k := range keys {
				putPages(ctx, t, s, testPage(k, 4000, base.Add(time.Duration(i)*time.Second)))
			}
		}
		put("http://a.example/1", "http://b.example/1", "http://c.example/1", "http://d.example/1")
		st, err := s.PageStats(ctx)
		if err != nil || st.Pages != 4 || st.Bytes <= 0 {
			t.Fatalf("PageStats = %+v, %v", st, err)
		}
		size := st.Bytes / 4 // the pages compress alike
		if n, err := s.TrimPages(ctx, st.Bytes); err != nil || n != 0 {
			t.Errorf("TrimPages at the size kept = %d, %v; want none gone", n, err)
		}
		if n, err := s.TrimPages(ctx, 2*size); err != nil || n != 2 {
			t.Errorf("TrimPages(2 pages) = %d, %v; want 2 gone", n, err)
		}
		if got := keptKeys(ctx, t, s); fmt.Sprint(got) != "[http://c.example/1 http://d.example/1]" {
			t.Errorf("kept %v, want the two newest", got)
		}
		if n, err := s.TrimPages(ctx, 0); err != nil || n != 2 {
			t.Errorf("TrimPages(0) = %d, %v; want the rest gone", n, err)
		}
	}},
	{"pages/bad pages", func(ctx context.Context, t *testing.T, s store.Pages) {
		for _, p := range []store.Page{
			{Key: "not a url", FetchedAt: base},
			{Key: "/relative", FetchedAt: base},
			{Key: "http://a.example/no-time"},
		} {
			if _, err := s.PutPages(ctx, []store.Page{p}); err == nil {
				t.Errorf("PutPages(%q) kept it", p.Key)
			}
		}
		if keys := keptKeys(ctx, t, s); len(keys) != 0 {
			t.Errorf("kept %v", keys)
		}
	}},
	{"pages/a page too large is left out", func(ctx context.Context, t *testing.T, s store.Pages) {
		// Random-looking bytes do not compress: over MaxKeptPage packed.
		big := make([]byte, store.MaxKeptPage+1024)
		x := uint32(1)
		for i := range big {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			big[i] = byte(x)
		}
		n, err := s.PutPages(ctx, []store.Page{
			{Key: "http://a.example/big", Status: 200, ContentType: "text/plain", Body: big, FetchedAt: base},
			testPage("http://a.example/small", 100, base),
		})
		if err != nil || n != 1 {
			t.Errorf("PutPages = %d, %v; want the small one kept", n, err)
		}
		if got := keptKeys(ctx, t, s); fmt.Sprint(got) != "[http://a.example/small]" {
			t.Errorf("kept %v", got)
		}
	}},
	{"pages/concurrent writers", func(ctx context.Context, t *testing.T, s store.Pages) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Go(func() {
				for i := range 10 {
					p := testPage(fmt.Sprintf("http://w%d.example/%d", w, i), 500, base.Add(time.Duration(i)*time.Millisecond))
					if _, err := s.PutPages(ctx, []store.Page{p}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("PutPages: %v", err)
		}
		if st, err := s.PageStats(ctx); err != nil || st.Pages != 80 {
			t.Errorf("PageStats = %+v, %v; want 80 pages", st, err)
		}
	}},
}
