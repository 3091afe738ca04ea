package statuspage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"backfill/dispatcher"
	"backfill/etl"
	"backfill/fetch"
	"backfill/mappings"
	"backfill/metrics"
	"backfill/statuspage"
	"backfill/store"
	"backfill/supervisor"
	"backfill/supervisor/browsertest"
	"backfill/testweb"
)

// served records every status the page was served, by its Updated time
// as the JSON spells it, so what the page shows can be compared with the
// very snapshot it drew.
type served struct {
	mu   sync.Mutex
	d    *dispatcher.Dispatcher
	byAt map[string]dispatcher.Status
}

func (s *served) source() (dispatcher.Status, bool) {
	st := s.d.Status()
	b, _ := json.Marshal(st.Updated)
	s.mu.Lock()
	s.byAt[strings.Trim(string(b), `"`)] = st
	s.mu.Unlock()
	return st, true
}

func (s *served) at(updated string) (dispatcher.Status, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byAt[updated]
	return st, ok
}

// shown is what the page displays, read from its elements.
type shown struct {
	Updated  string            `json:"updated"`
	State    string            `json:"state"`
	Records  string            `json:"records"`
	Complete string            `json:"complete"`
	Partial  string            `json:"partial"`
	Pages    string            `json:"pages"`
	Queued   string            `json:"queued"`
	InFlight string            `json:"in_flight"`
	Failures map[string]string `json:"failures"` // class → whole-crawl count
	Members  map[string]string `json:"members"`  // name → fetched
	Points   int               `json:"points"`   // vertices of the records-complete line
	Foreign  []string          `json:"foreign"`  // resources loaded from anywhere but the page's server
}

const readPage = `(() => {
  const t = id => document.getElementById(id).textContent;
  const rows = (id, col) => Object.fromEntries([...document.querySelectorAll('#' + id + ' tbody tr')]
    .map(tr => [tr.dataset.key, tr.children[col].textContent]));
  const line = document.querySelector('#chart-complete polyline.line');
  return {
    updated: document.getElementById('age').dataset.updated || '',
    state: t('state'), records: t('records'), complete: t('complete'), partial: t('partial'),
    pages: t('pages'), queued: t('queued'), in_flight: t('in_flight'),
    failures: rows('failures', 1), members: rows('members', 5),
    points: line ? line.getAttribute('points').trim().split(/\s+/).length : 0,
    foreign: performance.getEntriesByType('resource').map(e => e.name).filter(u => !u.startsWith(location.origin + '/')),
  };
})()`

// TestPageInBrowser crawls the fixture web with a dispatcher and two
// supervisors and watches the crawl's status page in headless Chromium:
// the numbers the page shows are those of the status it was served, they
// change as the crawl advances, the page loads nothing from elsewhere, and
// at the end it shows the finished crawl.
func TestPageInBrowser(t *testing.T) {
	bctx := browsertest.Start(t, "statuspage")
	dir := t.TempDir()
	web, err := testweb.Start(testweb.Options{CrawlDelay: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	records, _ := testweb.Sample()
	recordsPath := filepath.Join(dir, "records.csv")
	if err := os.WriteFile(recordsPath, records, 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := etl.LoadFS(mappings.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, filepath.Join(dir, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, err := dispatcher.New(dispatcher.Config{StateDir: dir, Listen: "tcp://127.0.0.1:*", Mappings: set, Store: st, Depth: 1, Expect: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Load(ctx, recordsPath); err != nil {
		t.Fatal(err)
	}

	src := &served{d: d, byAt: map[string]dispatcher.Status{}}
	srv, err := metrics.Listen(metrics.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	srv.Handle("/", statuspage.Handler(src.source, func(after int64, limit int) (dispatcher.Feed, bool) {
		return d.Settled(after, limit), true
	}))
	srvCtx, stopSrv := context.WithCancel(ctx)
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Serve(srvCtx) }()
	defer func() {
		stopSrv()
		if err := <-srvDone; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	if _, err := chromedp.Run(bctx, chromedp.Navigate(srv.URL())); err != nil {
		t.Fatalf("open %s: %v", srv.URL(), err)
	}

	// The crawl starts only now, so the page sees it from the start.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range 2 {
		s, err := supervisor.New(supervisor.Config{
			Name: fmt.Sprintf("sup-%d", i+1), Dispatcher: d.Endpoint(), Workers: 4, Mappings: set, Cache: st,
			DefaultDelay: time.Second,
			Fetch: fetch.Config{UserAgent: "backfill-test (+https://backfill.invalid/statuspage)", Timeout: 10 * time.Second,
				Resolve: web.Resolve(), AllowLoopback: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { s.Run(runCtx) })
	}
	type ran struct {
		sum *dispatcher.Summary
		err error
	}
	runDone := make(chan ran, 1)
	go func() {
		sum, err := d.Run(runCtx)
		runDone <- ran{sum, err}
	}()

	// wait polls the page until cond (a JavaScript expression) holds,
	// then reads what it shows.
	wait := func(what, cond string) shown {
		t.Helper()
		wctx, wcancel := context.WithTimeout(bctx, time.Minute)
		defer wcancel()
		if _, err := chromedp.Run(wctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			t.Fatalf("page never showed %s: %v", what, err)
		}
		p, err := chromedp.Run(wctx, chromedp.Evaluate[shown](readPage))
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
		return p
	}
	// check compares what the page shows with the status it drew.
	check := func(p shown) dispatcher.Status {
		t.Helper()
		s, ok := src.at(p.Updated)
		if !ok {
			t.Fatalf("page shows a status (updated %q) it was never served", p.Updated)
		}
		want := map[string]string{"state": s.State, "records": fmt.Sprint(s.Records), "complete": fmt.Sprint(s.Complete),
			"partial": fmt.Sprint(s.Partial), "pages": fmt.Sprint(s.Pages), "queued": fmt.Sprint(s.Queued), "in_flight": fmt.Sprint(s.InFlight)}
		got := map[string]string{"state": p.State, "records": p.Records, "complete": p.Complete,
			"partial": p.Partial, "pages": p.Pages, "queued": p.Queued, "in_flight": p.InFlight}
		if !maps.Equal(got, want) {
			t.Errorf("page shows %v, its status says %v", got, want)
		}
		wantFail := map[string]string{}
		for c, n := range s.Errors {
			wantFail[c] = fmt.Sprint(n)
		}
		if !maps.Equal(p.Failures, wantFail) {
			t.Errorf("page shows failures %v, its status says %v", p.Failures, wantFail)
		}
		wantMembers := map[string]string{}
		for _, m := range s.Members {
			wantMembers[m.Name] = fmt.Sprint(m.Fetched)
		}
		if !maps.Equal(p.Members, wantMembers) {
			t.Errorf("page shows members %v, its status says %v", p.Members, wantMembers)
		}
		if len(s.Timeline) > 0 && p.Points != len(s.Timeline) {
			t.Errorf("records-complete chart has %d points, the status's timeline %d", p.Points, len(s.Timeline))
		}
		if len(p.Foreign) > 0 {
			t.Errorf("page loaded resources from elsewhere: %v", p.Foreign)
		}
		return s
	}

	first := wait("the crawl running with pages fetched",
		`document.getElementById('state').textContent === 'running' && Number(document.getElementById('pages').textContent) > 0`)
	s1 := check(first)
	later := wait("more pages as the crawl advances",
		fmt.Sprintf(`Number(document.getElementById('pages').textContent) > %d`, s1.Pages))
	s2 := check(later)
	if s2.Pages <= s1.Pages || !s2.Updated.After(s1.Updated) {
		t.Errorf("page did not advance: %d pages at %v, then %d at %v", s1.Pages, s1.Updated, s2.Pages, s2.Updated)
	}
	if len(s2.Members) != 2 {
		t.Errorf("page's status has %d members, want 2", len(s2.Members))
	}

	r := <-runDone
	if r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
	last := wait("the finished crawl", `document.getElementById('state').textContent === 'finished'`)
	s3 := check(last)
	if s3.Complete != r.sum.Complete || s3.Records != r.sum.Records || s3.Pages != r.sum.Pages {
		t.Errorf("finished page shows %d/%d complete and %d pages, the summary %d/%d and %d",
			s3.Complete, s3.Records, s3.Pages, r.sum.Complete, r.sum.Records, r.sum.Pages)
	}
	stopRun()
}
