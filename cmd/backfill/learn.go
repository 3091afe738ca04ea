package main

import (
	"backfill/records"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"

	"backfill/dispatcher"
	"backfill/fetch"
	"backfill/learn"
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

// joinFlag collects --join FIELD=SEPARATOR; the separator is kept as
// given, spaces included.
type joinFlag map[string]string

func (j joinFlag) String() string { return fmt.Sprint(map[string]string(j)) }

func (j joinFlag) Set(s string) error {
	f, sep, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(f) == "" || sep == "" {
		return fmt.Errorf("want FIELD=SEPARATOR, got %q", s)
	}
	j[strings.TrimSpace(f)] = sep
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
	recordsPath := fs.String("records", "", "records file (CSV or JSON Lines): the records whose fields are known teach, from their own links")
	fields := fs.String("fields", "", "comma-separated fields to learn (default with --url: the fields of --value)")
	match := fs.String("match", "name", `field learned as the attribution match key ("" for none)`)
	pageURL := fs.String("url", "", "a page to learn from, with its known values in --value")
	values := valuesFlag{}
	fs.Var(values, "value", "FIELD=VALUE: a value --url's page shows (repeatable)")
	out := fs.String("o", "", "directory to write the learned mappings, their fixtures and the report into (required)")
	minTeachers := fs.Int("min-teachers", 0, fmt.Sprintf("fewest teacher pages a field needs per host and URL shape (default %d, 1 with --url alone)", learn.DefaultMinTeachers))
	folds := fs.Int("folds", learn.DefaultFolds, "k of the k-fold cross-validation on held-out teachers")
	perHost := fs.Int("pages-per-host", 0, fmt.Sprintf("most pages fetched from one host (default %d, or as many as the teachers' own links on a host when more; the report names every host that had more)", learn.DefaultPagesPerHost))
	lists := fs.String("list", "", "comma-separated fields learned as lists of items (authors, tags), compared as sets whatever separates them on the records and the pages; written as list fields (a field with separators in its values is tried as a list anyway when it cannot be learned as one value)")
	joins := joinFlag{}
	fs.Var(joins, "join", `FIELD=SEPARATOR: learn FIELD as a list and write its items joined into one value with SEPARATOR (e.g. --join "authors=, "); repeatable`)
	depth := fs.Int("depth", 1, "look for each teacher's page within this many links of its own links, as a crawl to this --depth would (run's default); 0: the own links' pages only")
	stateDir := new(string)
	stateDirFlag(fs, stateDir, "", "a crawl's state directory (it may be crawling): keep the teacher pages fetched in DIR/"+learn.PageCacheFile+
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
	case *recordsPath == "" && *pageURL == "":
		return fmt.Errorf("%w: give --records FILE, or --url URL with --value FIELD=VALUE", errUsage)
	case *pageURL != "" && len(values) == 0:
		return fmt.Errorf("%w: --url needs the values its page shows (--value FIELD=VALUE)", errUsage)
	case *pageURL == "" && len(values) > 0:
		return fmt.Errorf("%w: --value belongs to --url", errUsage)
	case *recrawl < 0:
		return fmt.Errorf("%w: --recrawl-after must not be negative", errUsage)
	case *depth < 0:
		return fmt.Errorf("%w: --depth must not be negative", errUsage)
	case *perHost < 0:
		return fmt.Errorf("%w: --pages-per-host must not be negative", errUsage)
	}
	opts := learn.Options{MatchKey: *match, MinTeachers: *minTeachers, Folds: *folds, PagesPerHost: *perHost, Depth: *depth,
		Progress: func(s string) { fmt.Fprintln(stderr, s) }}
	for _, f := range strings.Split(*fields, ",") {
		if f = strings.TrimSpace(f); f != "" {
			opts.Fields = append(opts.Fields, f)
		}
	}
	for _, f := range strings.Split(*lists, ",") {
		if f = strings.TrimSpace(f); f != "" {
			opts.Lists = append(opts.Lists, f)
		}
	}
	if len(joins) > 0 {
		opts.Join = map[string]string{}
		for f, sep := range joins {
			opts.Join[f] = sep
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
	if *recordsPath != "" {
		rep, err := records.ReadFile(*recordsPath, func(r records.Record) error {
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
		if *recordsPath == "" && *minTeachers == 0 {
			opts.MinTeachers = 1
		}
	}
	if opts.MatchKey != "" && !fieldKnown(teachers, opts.MatchKey) {
		return fmt.Errorf("%w: --match %s: no teacher knows a %s, so no match key can be learned; name a field the records have (--match FIELD), or --match \"\" to learn mappings without one (a page's values then go to any record that reaches it)", errUsage, opts.MatchKey, opts.MatchKey)
	}
	if *perHost == 0 {
		opts.PagesPerHost = pagesPerHost(teachers)
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
	fmt.Fprintf(stdout, "\nwrote %d file(s) into %s (report: %s)\n", len(written), *out, learn.ReportFile)
	if res.Mappings() == 0 {
		return errors.New("no mapping learned; see the report for why")
	}
	fmt.Fprintf(stdout, "review them, check them with `backfill mappings test %s`, and crawl with them with `backfill run --use-learned %s …`\n", *out, *out)
	return nil
}

// fieldKnown reports whether some teacher knows a value of field.
func fieldKnown(teachers []learn.Teacher, field string) bool {
	for _, t := range teachers {
		if strings.TrimSpace(t.Values[field]) != "" {
			return true
		}
	}
	return false
}

// pagesPerHost is the default --pages-per-host: learn's, or the most
// teacher links one host has when more, so that no teacher is left out
// unasked.
func pagesPerHost(teachers []learn.Teacher) int {
	n := map[string]int{}
	most := learn.DefaultPagesPerHost
	for _, t := range teachers {
		for _, l := range t.Links {
			if u, err := url.Parse(l); err == nil && u.Host != "" {
				h := strings.ToLower(u.Host)
				n[h]++
				most = max(most, n[h])
			}
		}
	}
	return most
}
