package learn

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"backfill/testweb"
)

// openTestCache opens a page cache in a fresh directory with the given
// bounds (0: the default).
func openTestCache(t *testing.T, hostPages int, maxBytes int64) *PageCache {
	t.Helper()
	c, err := OpenPageCache(context.Background(), filepath.Join(t.TempDir(), PageCacheFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if hostPages > 0 {
		c.hostPages = hostPages
	}
	if maxBytes > 0 {
		c.maxBytes = maxBytes
	}
	return c
}

// keptKeys lists the URLs kept, sorted.
func keptKeys(t *testing.T, c *PageCache) []string {
	t.Helper()
	rows, err := c.db.Query(`SELECT key FROM pages`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	return keys
}

// testPage is a page of rawURL whose body is n bytes that compress alike
// for every n.
func testPage(rawURL string, n int) *Page {
	return &Page{URL: rawURL, ContentType: "text/html; charset=utf-8", Body: []byte(strings.Repeat("<p>x</p>", n/8+1)[:n])}
}

// TestPageCacheBounds: pages over a host's bound, or over the byte bound,
// go oldest first; a page kept again replaces itself.
func TestPageCacheBounds(t *testing.T) {
	gz, err := gzipBytes(testPage("http://a.example/", 4000).Body)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(gz)) // every test page's kept size
	cases := []struct {
		name      string
		hostPages int
		maxBytes  int64
		puts      []string // in fetch order, a second apart
		want      []string
	}{
		{"under the bounds", 0, 0, []string{"http://a.example/1", "http://a.example/2", "http://b.example/1"},
			[]string{"http://a.example/1", "http://a.example/2", "http://b.example/1"}},
		{"host bound: its oldest go, other hosts stay", 2, 0,
			[]string{"http://a.example/1", "http://b.example/1", "http://a.example/2", "http://a.example/3"},
			[]string{"http://a.example/2", "http://a.example/3", "http://b.example/1"}},
		{"host bound counts host and port as the crawl does", 1, 0,
			[]string{"http://a.example/1", "http://a.example:80/2", "http://a.example:8080/3"},
			[]string{"http://a.example:80/2", "http://a.example:8080/3"}},
		{"byte bound: the oldest go, whatever their host", 0, 2 * size,
			[]string{"http://a.example/1", "http://b.example/1", "http://c.example/1"},
			[]string{"http://b.example/1", "http://c.example/1"}},
		{"a page kept again is one page, and new", 0, 2 * size,
			[]string{"http://a.example/1", "http://b.example/1", "http://a.example/1", "http://c.example/1"},
			[]string{"http://a.example/1", "http://c.example/1"}},
		{"a page over the byte bound is not kept", 0, size - 1,
			[]string{"http://a.example/1"}, nil},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := openTestCache(t, tc.hostPages, tc.maxBytes)
			at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			for _, u := range tc.puts {
				at = at.Add(time.Second)
				if err := c.Put(ctx, u, testPage(u, 4000), at); err != nil {
					t.Fatal(err)
				}
			}
			if got := keptKeys(t, c); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPageCacheGet: a kept page comes back as it was fetched, unless it
// is older than asked for or damaged.
func TestPageCacheGet(t *testing.T) {
	ctx := context.Background()
	c := openTestCache(t, 0, 0)
	const key = "http://a.example/p/1"
	p := &Page{URL: "http://a.example/p/1/", ContentType: "text/html", Body: []byte("<p>Lisbon, Portugal</p>")}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	if err := c.Put(ctx, key, p, at); err != nil {
		t.Fatal(err)
	}
	got, fetched, err := c.Get(ctx, key, at)
	if err != nil || got.URL != p.URL || got.ContentType != p.ContentType || string(got.Body) != string(p.Body) || !fetched.Equal(at) {
		t.Errorf("Get = %+v at %v, %v; want %+v at %v", got, fetched, err, p, at)
	}
	if _, _, err := c.Get(ctx, key, at.Add(time.Nanosecond)); !errors.Is(err, errNotKept) {
		t.Errorf("a page older than asked for: %v, want errNotKept", err)
	}
	if _, _, err := c.Get(ctx, "http://a.example/p/2", time.Time{}); !errors.Is(err, errNotKept) {
		t.Errorf("a page never kept: %v, want errNotKept", err)
	}
	for _, damage := range []string{`UPDATE pages SET body = x'00010203'`, `UPDATE pages SET raw_size = raw_size - 1`} {
		if _, err := c.db.Exec(damage); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Get(ctx, key, time.Time{}); err == nil || errors.Is(err, errNotKept) || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), key) {
			t.Errorf("after %s: %v, want the page named damaged", damage, err)
		}
	}
}

// TestKeptSource: a page fetched once is read from the cache the next
// time (the web sees no request), unless it is older than MaxAge; a page
// kept damaged is fetched again.
func TestKeptSource(t *testing.T) {
	web, polite := startPolite(t, testweb.Options{})
	c := openTestCache(t, 0, 0)
	ctx := context.Background()
	pages := func() int {
		n := 0
		for _, r := range web.Log() {
			if r.Path != "/robots.txt" {
				n++
			}
		}
		return n
	}
	const u = "http://people.example/p/alice"
	steps := []struct {
		name   string
		maxAge time.Duration
		damage bool
		want   KeptCounts // after the step
		asked  int        // pages the web has been asked for after the step
	}{
		{"first: fetched and kept", 0, false, KeptCounts{Fetched: 1}, 1},
		{"again: read from the cache", 0, false, KeptCounts{Kept: 1}, 1},
		{"again, within the recrawl age", time.Hour, false, KeptCounts{Kept: 1}, 1},
		{"older than the recrawl age: fetched again", time.Nanosecond, false, KeptCounts{Fetched: 1}, 2},
		{"kept damaged: fetched again", 0, true, KeptCounts{Fetched: 1, Unkept: 1}, 3},
		{"kept again after the damage", 0, false, KeptCounts{Kept: 1}, 3},
	}
	for _, st := range steps {
		if st.damage {
			if _, err := c.db.Exec(`UPDATE pages SET body = x'00'`); err != nil {
				t.Fatal(err)
			}
		}
		src := &KeptSource{Cache: c, Source: polite, MaxAge: st.maxAge}
		p, err := src.Fetch(ctx, u)
		if err != nil || !strings.Contains(string(p.Body), "Alice Moreau") {
			t.Fatalf("%s: %v", st.name, err)
		}
		got := src.Counts()
		if (got.Err != nil) != (st.want.Unkept > 0) {
			t.Errorf("%s: error %v with %d unkept", st.name, got.Err, got.Unkept)
		}
		got.Err = nil
		if got != st.want || pages() != st.asked {
			t.Errorf("%s: counts %+v, web asked for %d pages; want %+v, %d", st.name, got, pages(), st.want, st.asked)
		}
	}
	src := &KeptSource{Cache: c, Source: polite}
	if _, err := src.Fetch(ctx, "http://people.example/p/nobody"); err == nil || src.Counts().Failed != 1 {
		t.Errorf("a page that is not there: %v, counts %+v", err, src.Counts())
	}
	if _, _, err := c.Get(ctx, "http://people.example/p/nobody", time.Time{}); !errors.Is(err, errNotKept) {
		t.Errorf("a failed fetch is kept: %v", err)
	}
}
