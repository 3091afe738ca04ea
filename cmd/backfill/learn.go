package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"backfill/dispatcher"
	"backfill/fetch"
	"backfill/learn"
	"backfill/store"
	"backfill/supervisor"
)

// valuesFlag collects --value FIELD=VALUE.
type valuesFlag map[string]string

func (v valuesFlag) String() string { return fmt.Sprint(map[string]string(v)) }

func (v valuesFlag) Set(s string) error {
	f, val, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(f) == "" || strings.TrimSpace(val) == "" {
		return fmt.Errorf("want FIELD=VALUE, got %q", s)
	}
	v[strings.TrimSpace(f)] = strings.TrimSpace(val)
	return nil
}

// mappingsLearn writes mappings learned from the records whose fields are
// known (and from a page given with --url and its --value's): it fetches
// their pages politely, learns, validates, and writes the mappings with
// their fixtures and a report for review.
func mappingsLearn(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mappings learn", stderr)
	var cf crawlerFlags
	cf.register(fs)
	records := fs.String("records", "", "records file (CSV or JSON Lines): the records whose fields are known teach, from their own links")
	fields := fs.String("fields", "", "comma-separated fields to learn (default with --url: the fields of --value)")
	match := fs.String("match", "name", `field learned as the attribution match key ("" for none)`)
	pageURL := fs.String("url", "", "a page to learn from, with its known values in --value")
	values := valuesFlag{}
	fs.Var(values, "value", "FIELD=VALUE: a value --url's page shows (repeatable)")
	out := fs.String("o", "", "directory to write the learned mappings, their fixtures and the report into (required)")
	minTeachers := fs.Int("min-teachers", 0, fmt.Sprintf("fewest teacher pages a field needs per host and URL shape (default %d, 1 with --url alone)", learn.DefaultMinTeachers))
	folds := fs.Int("folds", learn.DefaultFolds, "k of the k-fold cross-validation on held-out teachers")
	perHost := fs.Int("pages-per-host", learn.DefaultPagesPerHost, "most teacher pages fetched from one host")
	stateDir := fs.String("state-dir", "", "a crawl's state directory (it may be crawling): keep the teacher pages fetched in DIR/"+learn.PageCacheFile+
		" (compressed, bounded) and read them from there instead of fetching them again; wait for hosts the crawl asked recently, and record learning's requests for it, in DIR/results.db when it is there. Takes no lock and leaves the crawl's state.db alone (default: keep nothing)")
	recrawl := fs.Duration("recrawl-after", learn.DefaultRecrawlAfter, "with --state-dir: fetch a kept teacher page again once it is older than this (0: read it however old)")
	var sf storeFlags
	sf.register(fs, "the crawl's host cache, for its last-crawl times: a SQLite file path (default: STATE-DIR/results.db when it is there)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := cf.validate(); err != nil {
		return err
	}
	switch {
	case *out == "":
		return fmt.Errorf("%w: -o DIR is required", errUsage)
	case *records == "" && *pageURL == "":
		return fmt.Errorf("%w: give --records FILE, or --url URL with --value FIELD=VALUE", errUsage)
	case *pageURL != "" && len(values) == 0:
		return fmt.Errorf("%w: --url needs the values its page shows (--value FIELD=VALUE)", errUsage)
	case *pageURL == "" && len(values) > 0:
		return fmt.Errorf("%w: --value belongs to --url", errUsage)
	case *recrawl < 0:
		return fmt.Errorf("%w: --recrawl-after must not be negative", errUsage)
	}
	opts := learn.Options{MatchKey: *match, MinTeachers: *minTeachers, Folds: *folds, PagesPerHost: *perHost,
		Progress: func(s string) { fmt.Fprintln(stderr, s) }}
	for _, f := range strings.Split(*fields, ",") {
		if f = strings.TrimSpace(f); f != "" {
			opts.Fields = append(opts.Fields, f)
		}
	}
	if len(opts.Fields) == 0 {
		for f := range values {
			if f != *match {
				opts.Fields = append(opts.Fields, f)
			}
		}
		sort.Strings(opts.Fields)
	}
	if len(opts.Fields) == 0 {
		return fmt.Errorf("%w: --fields is required", errUsage)
	}
	var teachers []learn.Teacher
	if *records != "" {
		rep, err := dispatcher.ReadRecords(*records, func(r store.Record) error {
			teachers = append(teachers, learn.Teacher{ID: r.ID, Values: r.Fields, Links: r.Links})
			return nil
		})
		if err != nil {
			return err
		}
		reportBadLines(stderr, dispatcher.LoadReport{Bad: rep.Bad, Errors: rep.Errors})
	}
	if *pageURL != "" {
		teachers = append(teachers, learn.Teacher{ID: "--url", Values: values, Links: []string{*pageURL}})
		if *records == "" && *minTeachers == 0 {
			opts.MinTeachers = 1
		}
	}

	closeNames, err := cf.openNames(ctx, *stateDir, nil)
	if err != nil {
		return err
	}
	defer closeNames()
	f := fetch.New(cf.fetchConfig())
	defer f.Close()
	ua := cf.userAgentString()
	ls, err := openLearnState(ctx, *stateDir, &sf, *recrawl)
	if err != nil {
		return err
	}
	defer ls.close()
	src := ls.source(&learn.PoliteSource{Fetcher: f, Delay: cf.delay, MaxDelay: cf.maxDelay,
		Robots: func(ctx context.Context, rawURL string) (learn.HostRules, error) {
			return supervisor.FetchRobots(ctx, f, ua, rawURL)
		}})
	res, err := learn.Learn(ctx, teachers, src, opts)
	if errors.Is(err, learn.ErrNoTeachers) {
		return fmt.Errorf("%w (fields %s)", err, strings.Join(opts.Fields, ", "))
	}
	if err != nil {
		return err
	}
	written, err := res.Write(*out)
	if err != nil {
		return err
	}
	res.Report(stdout)
	ls.report(stdout)
	mappingsWritten := 0
	for _, g := range res.Groups {
		if g.Learned() {
			mappingsWritten++
		}
	}
	fmt.Fprintf(stdout, "\nwrote %d file(s) into %s (report: %s)\n", len(written), *out, learn.ReportFile)
	if mappingsWritten == 0 {
		return errors.New("no mapping learned; see the report for why")
	}
	fmt.Fprintf(stdout, "review them, check them with `backfill mappings test %s`, and crawl with them with `backfill run --use-learned %s …`\n", *out, *out)
	return nil
}
