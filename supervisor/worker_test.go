package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"backfill/store"
	"backfill/wire"
)

func TestTaskHost(t *testing.T) {
	cases := []struct {
		url, want string
		bad       bool
	}{
		{url: "http://A.Test/x", want: "a.test"},
		{url: "http://a.test:80/x", want: "a.test"},
		{url: "https://a.test:443/", want: "a.test"},
		{url: "http://a.test:8080/", want: "a.test:8080"},
		{url: "https://a.test:80/", want: "a.test:80"},
		{url: "http://[::1]:8080/", want: "[::1]:8080"},
		{url: "ftp://a.test/", bad: true},
		{url: "http:///path", bad: true},
		{url: "http://a.test/%zz", bad: true},
		{url: "", bad: true},
	}
	for _, tc := range cases {
		got, err := taskHost(tc.url)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("taskHost(%q) = %q, %v; want %q, error %v", tc.url, got, err, tc.want, tc.bad)
		}
	}
}

func TestFitFrame(t *testing.T) {
	t.Parallel()
	small := &wire.Result{TaskID: "t", URL: "http://a.test/", Links: []wire.Link{{URL: "http://a.test/x"}}}
	if got := fitFrame(small); got != small {
		t.Error("a small result was changed")
	}

	huge := &wire.Result{TaskID: "t", URL: "http://a.test/"}
	for i := range 90000 {
		huge.Links = append(huge.Links, wire.Link{URL: fmt.Sprintf("http://a.test/%s/%d", strings.Repeat("p", 80), i)})
	}
	// A control character takes six bytes in JSON: 1.5 MiB of them is 9 MiB.
	huge.Fields = []wire.Field{{Mapping: "m", Name: "bio", Values: []string{strings.Repeat("\x01", 3<<19), "second"}}}
	got := fitFrame(huge)
	b, err := wire.Encode(wire.KindResult, got)
	if err != nil || len(b) > wire.MaxFrame {
		t.Fatalf("trimmed result still does not fit: %d bytes, %v", len(b), err)
	}
	if got.Error == "" || got.TaskID != "t" {
		t.Errorf("trimmed result: error %q task %q", got.Error, got.TaskID)
	}
	if len(got.Links) == 0 || got.Links[0] != huge.Links[0] {
		t.Error("trimming dropped the first links instead of the last")
	}
	if f := got.Fields; len(f) != 1 || len(f[0].Values) != 2 || f[0].Values[1] != "second" || len(f[0].Values[0]) != 64<<10 {
		t.Errorf("field values not capped as expected: %d fields", len(f))
	}
}

// boomCache is a real SQLite host cache that panics on the first
// last-crawl read for boom.test, i.e. during the host's first turn, before
// any task is taken.
type boomCache struct {
	store.HostCache
	reads atomic.Int32
}

func (c *boomCache) LastCrawl(ctx context.Context, host string) (time.Time, error) {
	if host == "boom.test" && c.reads.Add(1) == 1 {
		panic("cache exploded")
	}
	return c.HostCache.LastCrawl(ctx, host)
}

func TestPanicIsContained(t *testing.T) {
	t.Parallel()
	a := newSite(t, "a.test", "", map[string]string{"/people/ann": annPage})
	boom := newSite(t, "boom.test", "", map[string]string{"/people/ann": annPage})
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d, a, boom)
	cfg.Cache = &boomCache{HostCache: cfg.Cache}
	r := start(t, cfg)
	register(t, d)
	d.task("boom", 1, "http://boom.test/people/ann")
	d.task("ann", 1, "http://a.test/people/ann")
	got := d.collect(2, 10*time.Second)
	if res := got["boom"]; res.Class != ClassPanic || !strings.Contains(res.Error, "cache exploded") {
		t.Errorf("boom: class %q error %q, want a panic answer", res.Class, res.Error)
	}
	if res := got["ann"]; res.Class != "" {
		t.Errorf("ann: class %q: %s", res.Class, res.Error)
	}
	if st := r.sup.Stats(); st.Failed[ClassPanic] != 1 || st.Fetched != 1 {
		t.Errorf("stats %+v, want one panic and one page", st)
	}
}

// readCountingCache is a real SQLite host cache that counts last-crawl
// reads.
type readCountingCache struct {
	store.HostCache
	reads atomic.Int32
}

func (c *readCountingCache) LastCrawl(ctx context.Context, host string) (time.Time, error) {
	c.reads.Add(1)
	return c.HostCache.LastCrawl(ctx, host)
}

// TestCatchUpReadsOnlyWhatSpaces: a turn reads the host's last request
// from the cache (another supervisor may have made a later one) only when
// that time can space out the next request: not for a host whose rules
// ask for no delay.
func TestCatchUpReadsOnlyWhatSpaces(t *testing.T) {
	now := time.Now()
	later := now.Add(time.Hour)
	tests := []struct {
		name         string
		defaultDelay time.Duration
		robots       *robotsRules
		reads        int32
	}{
		{name: "rules not known yet", robots: nil, reads: 1},
		{name: "no delay", robots: &robotsRules{allowAll: true, expires: later}, reads: 0},
		{name: "the default delay", defaultDelay: time.Second, robots: &robotsRules{allowAll: true, expires: later}, reads: 1},
		{name: "a Crawl-delay", robots: &robotsRules{allowAll: true, delay: time.Second, expires: later}, reads: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := &readCountingCache{HostCache: openCache(t)}
			s := &Supervisor{cfg: Config{DefaultDelay: tt.defaultDelay, MaxCrawlDelay: time.Minute},
				log: slog.New(slog.DiscardHandler), cache: cache, lastPending: map[string]time.Time{}}
			// Our last request to it is older than a flush interval:
			// the cache may know a later one.
			h := &host{name: "a.test", last: now.Add(-time.Minute), robots: tt.robots}
			s.catchUp(context.Background(), h, now)
			if got := cache.reads.Load(); got != tt.reads {
				t.Errorf("%d last-crawl reads, want %d", got, tt.reads)
			}
		})
	}
}
