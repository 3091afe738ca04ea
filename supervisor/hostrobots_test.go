package supervisor

import (
	"context"
	"strings"
	"testing"
	"time"

	"backfill/fetch"
	"backfill/testweb"
)

// TestFetchRobots reads a host's robots.txt as the workers do, for the
// tools that fetch outside a crawl.
func TestFetchRobots(t *testing.T) {
	web, err := testweb.Start(testweb.Options{CrawlDelay: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	const ua = "backfill/0.1 (+https://backfill.invalid/robots-test)"
	f := fetch.New(fetch.Config{UserAgent: ua, Resolve: web.Resolve(), AllowLoopback: true})
	defer f.Close()
	ctx := context.Background()
	r, err := FetchRobots(ctx, f.Do, ua, "http://people.example/p/alice")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Allowed("http://people.example/p/alice") || r.Allowed("http://people.example/private/bob") {
		t.Error("robots.txt disallows /private/ only")
	}
	if r.CrawlDelay() != 2*time.Second || r.Reason() != "" {
		t.Errorf("Crawl-delay %s, reason %q", r.CrawlDelay(), r.Reason())
	}
	// A host that cannot be reached disallows everything, and says why.
	down, err := FetchRobots(ctx, f.Do, ua, "http://127.0.0.1:1/x")
	if err != nil {
		t.Fatal(err)
	}
	if down.Allowed("http://127.0.0.1:1/x") || !strings.Contains(down.Reason(), "unreachable") {
		t.Errorf("unreachable host: allowed %v, reason %q", down.Allowed("http://127.0.0.1:1/x"), down.Reason())
	}
	if _, err := FetchRobots(ctx, f.Do, ua, "http://[::1"); err == nil {
		t.Error("a URL that does not parse")
	}
}
