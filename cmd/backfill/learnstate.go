package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"backfill/learn"
	"backfill/store"
	"backfill/supervisor"
)

// learnState is what `mappings learn --state-dir` uses of a state
// directory: its own file of kept teacher pages, and the crawl's host
// cache (results.db, or --store) for last-crawl times. It takes no lock
// and never opens the crawl's state.db, so it works beside a running
// crawl.
type learnState struct {
	pages *learn.KeptSource // nil without --state-dir
	crawl store.Store       // nil when there is no host cache to share
}

// openLearnState opens what dir (may be "") and sf give, and wraps src in
// the page cache. A results.db that is not there is not created: learning
// then has no crawl to be polite with but its own requests.
func openLearnState(ctx context.Context, dir string, sf *storeFlags, recrawl time.Duration) (*learnState, error) {
	ls := &learnState{}
	shared := sf.given()
	if !shared && dir != "" {
		_, err := os.Stat(filepath.Join(dir, "results.db"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("state directory: %w", err)
		}
		shared = err == nil
	}
	if shared {
		st, err := sf.open(ctx, dir)
		if err != nil {
			return nil, err
		}
		ls.crawl = st
	}
	if dir != "" {
		c, err := learn.OpenPageCache(ctx, filepath.Join(dir, learn.PageCacheFile))
		if err != nil {
			ls.close()
			return nil, err
		}
		ls.pages = &learn.KeptSource{Cache: c, MaxAge: recrawl}
	}
	return ls, nil
}

// source is src as learning reads it: polite with the crawl, through the
// page cache.
func (ls *learnState) source(src *learn.PoliteSource) learn.Source {
	if ls.crawl != nil {
		src.Crawl, src.CrawlLag = ls.crawl, supervisor.LastCrawlLag
	}
	if ls.pages == nil {
		return src
	}
	ls.pages.Source = src
	return ls.pages
}

// report says where the teacher pages came from.
func (ls *learnState) report(w io.Writer) {
	if ls.pages == nil {
		return
	}
	c := ls.pages.Counts()
	fmt.Fprintf(w, "\nteacher pages: %d read from %s, %d fetched", c.Kept, ls.pages.Cache.Path(), c.Fetched)
	if c.Failed > 0 {
		fmt.Fprintf(w, ", %d could not be fetched", c.Failed)
	}
	fmt.Fprintln(w)
	if c.Unkept > 0 {
		fmt.Fprintf(w, "%d teacher page(s) kept damaged or not kept for the next learning: %v\n", c.Unkept, c.Err)
	}
}

func (ls *learnState) close() {
	if ls.pages != nil {
		ls.pages.Cache.Close()
	}
	if ls.crawl != nil {
		ls.crawl.Close()
	}
}
