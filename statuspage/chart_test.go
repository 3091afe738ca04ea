package statuspage_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"backfill/dispatcher"
	"backfill/metrics"
	"backfill/statuspage"
	"backfill/supervisor/browsertest"
)

// TestRateChartSmooth serves a status whose pages come in bursts (six
// every third second: 2 pages/s, as a crawl of a few hosts with a delay
// between requests looks) and reads the pages/s line the page draws: it
// follows the steady rate instead of jumping between zero and the burst.
func TestRateChartSmooth(t *testing.T) {
	bctx := browsertest.Start(t, "statuspage-rate")
	t0 := time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)
	var tl []dispatcher.Sample
	for i := range 120 {
		tl = append(tl, dispatcher.Sample{At: t0.Add(time.Duration(i) * time.Second), Records: 100, Pages: int64(6 * (i / 3))})
	}
	st := dispatcher.Status{Dispatcher: "host", Run: "r", State: dispatcher.StateRunning,
		Started: t0, Updated: tl[len(tl)-1].At, Records: 100, Pages: tl[len(tl)-1].Pages, Timeline: tl}
	srv, err := metrics.Listen(metrics.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle("/", statuspage.Handler(func() (dispatcher.Status, bool) { return st, true },
		func(int64, int) (dispatcher.Feed, bool) { return dispatcher.Feed{}, true }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	wctx, wcancel := context.WithTimeout(bctx, time.Minute)
	defer wcancel()
	var points string
	if _, err := chromedp.Run(wctx, chromedp.Navigate(srv.URL())); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](`document.querySelector('#chart-rate polyline.line') !== null`,
		chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("no pages/s line drawn: %v", err)
	}
	points, err = chromedp.Run(wctx, chromedp.Evaluate[string](`document.querySelector('#chart-rate polyline.line').getAttribute('points')`))
	if err != nil {
		t.Fatal(err)
	}
	// The chart's plot is 132 px high (statuspage/assets/app.js: H - B - T)
	// and its top is the largest rate: a line within a fifth of it is
	// the steady 2 pages/s (a 30 s window sees ten or eleven bursts), the
	// saw-tooth spans all of it.
	lo, hi := 1e9, -1e9
	n := 0
	for _, p := range strings.Fields(points) {
		_, y, ok := strings.Cut(p, ",")
		v, err := strconv.ParseFloat(y, 64)
		if !ok || err != nil {
			t.Fatalf("point %q", p)
		}
		lo, hi, n = min(lo, v), max(hi, v), n+1
	}
	if n < 50 || hi-lo > 132/5 {
		t.Errorf("pages/s line of %d points spans %.1f px of 132: want a steady line of at least 50 points\n%s", n, hi-lo, points)
	}
}
