package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"backfill/records"

	"backfill/dispatcher"
	"backfill/fetch"
	"backfill/learn"
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

// typesFlag collects --type FIELD=TYPE, a type learn knows.
type typesFlag map[string]string

func (t typesFlag) String() string { return fmt.Sprint(map[string]string(t)) }

func (t typesFlag) Set(s string) error {
	f, typ, ok := strings.Cut(s, "=")
	f, typ = strings.TrimSpace(f), strings.TrimSpace(typ)
	if !ok || f == "" || typ == "" {
		return fmt.Errorf("want FIELD=TYPE, got %q", s)
	}
	if !slices.Contains(learn.TypeNames(), typ) {
		return fmt.Errorf("type %q: want one of %s", typ, strings.Join(learn.TypeNames(), ", "))
	}
	t[f] = typ
	return nil
}

// learnFlags are the flags of `mappings learn`.
type learnFlags struct {
	cf                          crawlerFlags
	sf                          storeFlags
	records, fields, match, url *string
	out, lists, stateDir        *string
	values                      valuesFlag
	joins                       joinFlag
	types                       typesFlag
	minTeachers, folds, perHost *int
	depth                       *int
	recrawl                     *time.Duration
}

func (l *learnFlags) register(fs *flag.FlagSet) {
	l.cf.register(fs)
	l.records = fs.String("records", "", "records file (CSV or JSON Lines): the records whose fields are known teach, from their own links")
	l.fields = fs.String("fields", "", "comma-separated fields to learn (default with --url: the fields of --value)")
	l.match = fs.String("match", "name", `field learned as the attribution match key ("" for none)`)
	l.url = fs.String("url", "", "a page to learn from, with its known values in --value")
	l.values = valuesFlag{}
	fs.Var(l.values, "value", "FIELD=VALUE: a value --url's page shows (repeatable)")
	l.out = fs.String("o", "", "directory to write the learned mappings, their fixtures and the report into (required)")
	l.minTeachers = fs.Int("min-teachers", 0, fmt.Sprintf("fewest teacher pages a field needs per host and URL shape (default %d, 1 with --url alone)", learn.DefaultMinTeachers))
	l.folds = fs.Int("folds", learn.DefaultFolds, "k of the k-fold cross-validation on held-out teachers")
	l.perHost = fs.Int("pages-per-host", 0, fmt.Sprintf("most pages fetched from one host (default %d, or as many as the teachers' own links on a host when more; the report names every host that had more)", learn.DefaultPagesPerHost))
	l.lists = fs.String("list", "", "comma-separated fields learned as lists of items (authors, tags), compared as sets whatever separates them on the records and the pages; written as list fields (a field with separators in its values is tried as a list anyway when it cannot be learned as one value)")
	l.joins = joinFlag{}
	fs.Var(l.joins, "join", `FIELD=SEPARATOR: learn FIELD as a list and write its items joined into one value with SEPARATOR (e.g. --join "authors=, "); repeatable`)
	l.types = typesFlag{}
	fs.Var(l.types, "type", "FIELD=TYPE: what FIELD's values are ("+strings.Join(learn.TypeNames(), ", ")+"), so that a record's value and a page's are compared as such (\"2010-06\" is \"June 2010\" only as dates; \"+39 02 555 0102\" is not \"39 02 555 0102\" as phone numbers); default: what every teacher's value reads as, text when not all do; repeatable")
	l.depth = fs.Int("depth", 1, "look for each teacher's page within this many links of its own links, as a crawl to this --depth would (run's default); 0: the own links' pages only")
	l.stateDir = new(string)
	stateDirFlag(fs, l.stateDir, "", "a crawl's state directory (it may be crawling): keep the teacher pages fetched in DIR/"+learn.PageCacheFile+
		" (compressed, bounded) and read them from there instead of fetching them again; wait for hosts the crawl asked recently, and record learning's requests for it, in DIR/results.db when it is there. Takes no lock and leaves the crawl's state.db alone (default: keep nothing)")
	l.recrawl = fs.Duration("recrawl-after", learn.DefaultRecrawlAfter, "with --state-dir: fetch a kept teacher page again once it is older than this (0: read it however old)")
	l.sf.register(fs, "the crawl's host cache, for its last-crawl times: a SQLite file path (default: STATE-DIR/results.db when it is there)")
}

// check refuses flags that do not go together.
func (l *learnFlags) check() error {
	if err := l.cf.validate(); err != nil {
		return err
	}
	switch {
	case *l.out == "":
		return fmt.Errorf("%w: -o DIR is required", errUsage)
	case *l.records == "" && *l.url == "":
		return fmt.Errorf("%w: give --records FILE, or --url URL with --value FIELD=VALUE", errUsage)
	case *l.url != "" && len(l.values) == 0:
		return fmt.Errorf("%w: --url needs the values its page shows (--value FIELD=VALUE)", errUsage)
	case *l.url == "" && len(l.values) > 0:
		return fmt.Errorf("%w: --value belongs to --url", errUsage)
	case *l.recrawl < 0:
		return fmt.Errorf("%w: --recrawl-after must not be negative", errUsage)
	case *l.depth < 0:
		return fmt.Errorf("%w: --depth must not be negative", errUsage)
	case *l.perHost < 0:
		return fmt.Errorf("%w: --pages-per-host must not be negative", errUsage)
	}
	return nil
}

// options are learn's options the flags say.
func (l *learnFlags) options(stderr io.Writer) (learn.Options, error) {
	opts := learn.Options{MatchKey: *l.match, MinTeachers: *l.minTeachers, Folds: *l.folds, PagesPerHost: *l.perHost, Depth: *l.depth,
		Progress: func(s string) { fmt.Fprintln(stderr, s) }}
	opts.Fields = commaList(*l.fields)
	opts.Lists = commaList(*l.lists)
	if len(l.types) > 0 {
		opts.Types = map[string]string(l.types)
	}
	if len(l.joins) > 0 {
		opts.Join = map[string]string{}
		for f, sep := range l.joins {
			opts.Join[f] = sep
		}
	}
	if len(opts.Fields) == 0 {
		for f := range l.values {
			if f != *l.match {
				opts.Fields = append(opts.Fields, f)
			}
		}
		sort.Strings(opts.Fields)
	}
	if len(opts.Fields) == 0 {
		return opts, fmt.Errorf("%w: --fields is required", errUsage)
	}
	return opts, nil
}

// commaList splits a comma-separated flag, blanks dropped.
func commaList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// teachers reads the records of --records (reporting bad lines on
// stderr) and the page of --url.
func (l *learnFlags) teachers(stderr io.Writer, opts *learn.Options) ([]learn.Teacher, error) {
	var teachers []learn.Teacher
	if *l.records != "" {
		rep, err := records.ReadFile(*l.records, func(r records.Record) error {
			teachers = append(teachers, learn.Teacher{ID: r.ID, Values: r.Fields, Links: r.Links})
			return nil
		})
		if err != nil {
			return nil, err
		}
		reportBadLines(stderr, dispatcher.LoadReport{Bad: rep.Bad, Errors: rep.Errors})
	}
	if *l.url != "" {
		teachers = append(teachers, learn.Teacher{ID: "--url", Values: l.values, Links: []string{*l.url}})
		if *l.records == "" && *l.minTeachers == 0 {
			opts.MinTeachers = 1
		}
	}
	if opts.MatchKey != "" && !fieldKnown(teachers, opts.MatchKey) {
		return nil, fmt.Errorf("%w: --match %s: no teacher knows a %s, so no match key can be learned; name a field the records have (--match FIELD), or --match \"\" to learn mappings without one (a page's values then go to any record that reaches it)", errUsage, opts.MatchKey, opts.MatchKey)
	}
	if *l.perHost == 0 {
		opts.PagesPerHost = pagesPerHost(teachers)
	}
	return teachers, nil
}

// mappingsLearn writes mappings learned from the records whose fields are
// known (and from a page given with --url and its --value's): it fetches
// their pages politely, learns, validates, and writes the mappings with
// their fixtures and a report for review.
func mappingsLearn(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mappings learn", stderr)
	var l learnFlags
	l.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := l.check(); err != nil {
		return err
	}
	opts, err := l.options(stderr)
	if err != nil {
		return err
	}
	teachers, err := l.teachers(stderr, &opts)
	if err != nil {
		return err
	}

	closeNames, err := l.cf.openNames(ctx, *l.stateDir, nil)
	if err != nil {
		return err
	}
	defer closeNames()
	f := fetch.New(l.cf.fetchConfig())
	defer f.Close()
	ls, err := openLearnState(ctx, *l.stateDir, &l.sf, *l.recrawl)
	if err != nil {
		return err
	}
	defer ls.close()
	src := ls.source(l.cf.politeSource(f))
	res, err := learn.Learn(ctx, teachers, src, opts)
	if errors.Is(err, learn.ErrNoTeachers) {
		return fmt.Errorf("%w (fields %s)", err, strings.Join(opts.Fields, ", "))
	}
	if err != nil {
		return err
	}
	written, err := res.Write(*l.out)
	if err != nil {
		return err
	}
	res.Report(stdout)
	ls.report(stdout)
	fmt.Fprintf(stdout, "\nwrote %d file(s) into %s (report: %s)\n", len(written), *l.out, learn.ReportFile)
	if res.Mappings() == 0 {
		return errors.New("no mapping learned; see the report for why")
	}
	fmt.Fprintf(stdout, "review them, check them with `backfill mappings test %s`, and crawl with them with `backfill run --use-learned %s …`\n", *l.out, *l.out)
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
