package learn

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backfill/fetch"
	"backfill/store"
	"backfill/supervisor"
	"backfill/testweb"
)

// testUserAgent is the User-Agent of the tests' requests.
const testUserAgent = "backfill/0.1 (+https://backfill.invalid/learn-test)"

// startPolite starts the small fixture web with opts, and a PoliteSource
// for it that reads robots.txt as a supervisor does; both end with the
// test.
func startPolite(t *testing.T, opts testweb.Options) (*testweb.Web, *PoliteSource) {
	t.Helper()
	web, err := testweb.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { web.Close() })
	f := fetch.New(fetch.Config{UserAgent: testUserAgent, Resolve: web.Resolve(), AllowLoopback: true})
	t.Cleanup(func() { f.Close() })
	return web, &PoliteSource{Fetcher: f, Robots: robotsReader(testUserAgent)}
}

// robotsReader reads robots.txt as a supervisor does.
func robotsReader(ua string) func(context.Context, string, func(context.Context, string, fetch.Request) (*fetch.Response, error)) (HostRules, error) {
	return func(ctx context.Context, u string, do func(context.Context, string, fetch.Request) (*fetch.Response, error)) (HostRules, error) {
		return supervisor.FetchRobots(ctx, do, ua, u)
	}
}

// TestPoliteSource fetches teacher pages from the small fixture web, whose
// robots.txt asks a Crawl-delay of a second and disallows /private/: the
// server's log must show robots.txt first, the delay kept, nothing
// disallowed asked for.
func TestPoliteSource(t *testing.T) {
	web, src := startPolite(t, testweb.Options{CrawlDelay: testweb.DefaultCrawlDelay})
	ctx := context.Background()
	for _, u := range []string{"http://people.example/p/alice", "http://people.example/p/carol"} {
		p, err := src.Fetch(ctx, u)
		if err != nil || p.URL != u || !strings.Contains(string(p.Body), "class=\"fn\"") || !strings.HasPrefix(p.ContentType, "text/html") {
			t.Fatalf("%s: %v, %+v", u, err, p)
		}
	}
	if _, err := src.Fetch(ctx, "http://people.example/private/bob"); err == nil || !strings.Contains(err.Error(), "robots.txt of people.example disallows") {
		t.Errorf("disallowed page: %v", err)
	}
	if _, err := src.Fetch(ctx, "http://people.example/p/nobody"); err == nil {
		t.Error("a 404 is a page to learn from")
	}
	strict := &PoliteSource{Fetcher: src.Fetcher, Robots: src.Robots, MaxDelay: 500 * time.Millisecond}
	if _, err := strict.Fetch(ctx, "http://staff.example.org/staff/erin.html"); err == nil || !strings.Contains(err.Error(), "Crawl-delay") {
		t.Errorf("a Crawl-delay over the maximum: %v", err)
	}

	var last time.Time
	var paths []string
	for _, r := range web.Log() {
		if r.Host != "people.example" {
			continue
		}
		paths = append(paths, r.Path)
		if !last.IsZero() && r.Time.Sub(last) < time.Duration(testweb.DefaultCrawlDelay)*time.Second {
			t.Errorf("%s asked %s after the previous request, Crawl-delay is %ds", r.Path, r.Time.Sub(last), testweb.DefaultCrawlDelay)
		}
		last = r.Time
		if r.UserAgent != testUserAgent {
			t.Errorf("User-Agent %q", r.UserAgent)
		}
	}
	if strings.Join(paths, " ") != "/robots.txt /p/alice /p/carol /p/nobody" {
		t.Errorf("people.example was asked for %v", paths)
	}
}

// TestPoliteSourceKeepsTheCrawlsDelay: with a crawl's host cache, a host
// the crawl asked a moment ago is first asked (robots.txt included) no
// earlier than the crawl's time, taken CrawlLag later, plus the delay;
// every request learning makes is recorded there for the crawl.
func TestPoliteSourceKeepsTheCrawlsDelay(t *testing.T) {
	web, src := startPolite(t, testweb.Options{})
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutLastCrawl(ctx, "people.example", time.Now()); err != nil {
		t.Fatal(err)
	}
	crawled, err := st.LastCrawl(ctx, "people.example") // as kept: to the millisecond
	if err != nil {
		t.Fatal(err)
	}
	const delay, lag = 300 * time.Millisecond, 200 * time.Millisecond
	src.Delay, src.Crawl, src.CrawlLag = delay, st, lag
	for _, u := range []string{"http://people.example/p/alice", "http://people.example/p/carol"} {
		if _, err := src.Fetch(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	log := web.Log()
	if len(log) != 3 || log[0].Path != "/robots.txt" {
		t.Fatalf("the web was asked %+v", log)
	}
	if earliest := crawled.Add(lag + delay); log[0].Time.Before(earliest) {
		t.Errorf("first request at %v, before the crawl's last request (%v) + lag + delay = %v", log[0].Time, crawled, earliest)
	}
	recorded, err := st.LastCrawl(ctx, "people.example")
	if err != nil || recorded.Before(log[len(log)-1].Time.Truncate(time.Millisecond)) {
		t.Errorf("last crawl recorded %v (%v); the last request arrived at %v", recorded, err, log[len(log)-1].Time)
	}
}
