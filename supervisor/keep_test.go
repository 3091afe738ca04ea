package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backfill/store"
)

// TestKeptPages: the pages a supervisor fetched and extracted are in the
// store once it stopped, as the mappings read them, under their task's
// URL; failed pages are not.
func TestKeptPages(t *testing.T) {
	t.Parallel()
	a := newSite(t, "a.test", "", map[string]string{"/people/ann": annPage, "/go": ""})
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d, a)
	st := cfg.Cache.(store.Store)
	cfg.Pages, cfg.DefaultDelay = st, NoDelay
	r := start(t, cfg)
	register(t, d)
	d.task("ann", 1, "http://a.test/people/ann")
	d.task("missing", 2, "http://a.test/people/nobody")
	got := d.collect(2, 15*time.Second)
	if got["ann"].Class != "" || got["missing"].Class == "" {
		t.Fatalf("results: ann %+v, missing %+v", got["ann"], got["missing"])
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := st.Page(ctx, "http://a.test/people/ann")
	if err != nil || string(p.Body) != annPage || p.Status != 200 || p.ContentType != "text/html" || p.Rendered || p.FetchedAt.IsZero() {
		t.Errorf("kept page: %+v, %v", p, err)
	}
	if _, err := st.Page(ctx, "http://a.test/people/nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a failed page is kept: %v", err)
	}
	if s := r.sup.Stats(); s.Kept != 1 || s.Unkept != 0 {
		t.Errorf("Stats: kept %d, unkept %d; want 1, 0", s.Kept, s.Unkept)
	}
}

// failingPages refuses every write.
type failingPages struct{ store.Pages }

func (failingPages) PutPages(context.Context, []store.Page) (int, error) {
	return 0, errors.New("disk full")
}

// TestKeeper: pages beyond the queue's bound, and pages the store
// refuses, are counted unkept and logged once; the bound in bytes is
// held by trimming, oldest first.
func TestKeeper(t *testing.T) {
	ctx := context.Background()
	open := func(t *testing.T) *store.PageFile {
		f, err := store.OpenPageFile(ctx, filepath.Join(t.TempDir(), "pages.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	page := func(i, size int) store.Page {
		return store.Page{Key: fmt.Sprintf("http://h.test/%d", i), Status: 200, ContentType: "text/html",
			Body: []byte(strings.Repeat("<p>x</p>", size/8+1)[:size]), FetchedAt: time.Unix(int64(1000+i), 0)}
	}
	drain := func(k *keeper) {
		kctx, cancel := context.WithCancel(ctx)
		cancel()
		k.run(kctx, 5*time.Second) // writes what was handed over, then returns
	}

	t.Run("queue bound", func(t *testing.T) {
		k := newKeeper(open(t), 0, slog.New(slog.DiscardHandler))
		k.queueMax = 1000
		k.keep(page(1, 990))
		k.keep(page(2, 100)) // over the bound while the first waits
		drain(k)
		if kept, unkept := k.counts(); kept != 1 || unkept != 1 {
			t.Errorf("kept %d, unkept %d; want 1, 1", kept, unkept)
		}
	})
	t.Run("store refuses", func(t *testing.T) {
		var logs logBuffer
		k := newKeeper(failingPages{open(t)}, 0, newLogger(&logs))
		for i := range 3 {
			k.keep(page(i, 100))
			drain(k)
		}
		if kept, unkept := k.counts(); kept != 0 || unkept != 3 {
			t.Errorf("kept %d, unkept %d; want 0, 3", kept, unkept)
		}
		if n := strings.Count(logs.String(), "disk full"); n != 1 {
			t.Errorf("logged %d times, want once:\n%s", n, logs.String())
		}
	})
	t.Run("byte bound", func(t *testing.T) {
		f := open(t)
		if _, err := f.PutPages(ctx, []store.Page{page(0, 4000)}); err != nil {
			t.Fatal(err)
		}
		one, err := f.PageStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Room for three pages: trimming every 3/8 of a page, so after
		// each page kept.
		k := newKeeper(f, 3*one.Bytes, slog.New(slog.DiscardHandler))
		for i := 1; i <= 6; i++ {
			k.keep(page(i, 4000))
			drain(k)
		}
		st, err := f.PageStats(ctx)
		if err != nil || st.Pages != 3 {
			t.Fatalf("kept %+v, %v; want 3 pages", st, err)
		}
		for _, i := range []int{4, 5, 6} {
			if _, err := f.Page(ctx, page(i, 0).Key); err != nil {
				t.Errorf("page %d, among the newest, went: %v", i, err)
			}
		}
	})
	t.Run("gathers a batch", func(t *testing.T) {
		bp := &batchedPages{Pages: open(t), wrote: make(chan int, 4)}
		k := newKeeper(bp, 0, slog.New(slog.DiscardHandler))
		k.gather = time.Hour // only a whole batch, or the stop, ends a gather
		gathering := make(chan int, 16)
		k.gathering = gathering
		kctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			k.run(kctx, 5*time.Second)
		}()
		k.keep(page(0, 100))
		if n := <-gathering; n != 1 {
			t.Fatalf("a gather began with %d pages waiting, want 1", n)
		}
		for i := 1; i < keepBatch; i++ {
			k.keep(page(i, 100))
		}
		if n := <-bp.wrote; n != keepBatch {
			t.Errorf("first write took %d pages, want a whole batch of %d", n, keepBatch)
		}
		for i := range 3 {
			k.keep(page(keepBatch+i, 100))
		}
		cancel() // the stop writes what gathers at once
		<-done
		close(bp.wrote)
		var rest []int
		for n := range bp.wrote {
			rest = append(rest, n)
		}
		if len(rest) != 1 || rest[0] != 3 {
			t.Errorf("writes after the first batch: %v, want [3]", rest)
		}
		if kept, unkept := k.counts(); kept != keepBatch+3 || unkept != 0 {
			t.Errorf("kept %d, unkept %d; want %d, 0", kept, unkept, keepBatch+3)
		}
	})
	if k := newKeeper(nil, 0, nil); k != nil {
		t.Error("a keeper without pages")
	}
}

// batchedPages says how many pages each write took.
type batchedPages struct {
	store.Pages
	wrote chan int
}

func (b *batchedPages) PutPages(ctx context.Context, pages []store.Page) (int, error) {
	b.wrote <- len(pages)
	return b.Pages.PutPages(ctx, pages)
}
