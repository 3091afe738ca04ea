package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"backfill/learn"
	"backfill/store"
	"backfill/supervisor"
)

// learnState is what `mappings learn --state-dir` uses of a state
// directory: the crawl's store (results.db, or --store), for its
// last-crawl times and its kept pages, or where there is none a page file
// of learning's own. It takes no lock and never opens the crawl's
// state.db, so it works beside a running crawl.
type learnState struct {
	pages *learn.KeptSource // nil without --state-dir
	where string            // where the pages are kept, for the report
	file  *store.PageFile   // learning's own page file, when no crawl store is there
	crawl store.Store       // nil when there is no crawl store to share
}

// openLearnState opens what dir (may be "") and sf give. A results.db
// that is not there is not created: learning then has no crawl to be
// polite with but its own requests, and keeps its pages in a file of its
// own, bounded as store.DefaultKeptBytes.
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
	switch {
	case dir == "" && !sf.given():
	case ls.crawl != nil:
		ls.pages = &learn.KeptSource{Pages: ls.crawl, MaxAge: recrawl}
		ls.where = "the crawl's kept pages in " + storeName(sf, dir)
	default:
		path := filepath.Join(dir, learn.PageCacheFile)
		f, err := store.OpenPageFile(ctx, path)
		if err != nil {
			ls.close()
			return nil, err
		}
		ls.file = f
		ls.pages = &learn.KeptSource{Pages: f, MaxAge: recrawl, MaxBytes: store.DefaultKeptBytes}
		ls.where = path
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
	fmt.Fprintf(w, "\nteacher pages: %d read from %s, %d fetched", c.Kept, ls.where, c.Fetched)
	if c.Failed > 0 {
		fmt.Fprintf(w, ", %d could not be fetched", c.Failed)
	}
	fmt.Fprintln(w)
	if c.Unkept > 0 {
		fmt.Fprintf(w, "%d teacher page(s) kept damaged or not kept for the next learning: %v\n", c.Unkept, c.Err)
	}
}

func (ls *learnState) close() {
	if ls.file != nil {
		ls.file.Close()
	}
	if ls.crawl != nil {
		ls.crawl.Close()
	}
}

// storeName names the store sf opens for messages, never quoting a URI
// (it may hold a password).
func storeName(sf *storeFlags, stateDir string) string {
	switch {
	case !sf.given():
		return filepath.Join(stateDir, "results.db")
	case sf.file != "":
		return "the store of --store-file"
	case strings.HasPrefix(sf.uri, "mongodb"):
		return "the MongoDB store"
	}
	return sf.uri
}
