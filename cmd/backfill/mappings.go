package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"backfill/etl"
	"backfill/fetch"
	"backfill/mappings"
	"backfill/supervisor"
)

// cmdMappings holds the authoring tools: check, try, test, learn.
func cmdMappings(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: mappings needs a subcommand: check [DIR], try [--mapping NAME] URL|FILE, test [--update] [DIR], learn --records FILE --fields F,… [--state-dir DIR] -o DIR", errUsage)
	}
	switch args[0] {
	case "check":
		return mappingsCheck(args[1:], stdout, stderr)
	case "try":
		return mappingsTry(ctx, args[1:], stdout, stderr)
	case "test":
		return mappingsTest(args[1:], stdout, stderr)
	case "learn":
		return mappingsLearn(ctx, args[1:], stdout, stderr)
	}
	return fmt.Errorf("%w: unknown mappings subcommand %q (check, try, test, learn)", errUsage, args[0])
}

// loadSet loads dir, or the bundled mappings when dir is empty.
func loadSet(dir string) (*etl.Set, error) {
	return (&mappingFlags{dir: dir}).load()
}

// dirArg returns the optional directory argument.
func dirArg(fsArgs []string) (string, error) {
	switch len(fsArgs) {
	case 0:
		return "", nil
	case 1:
		return fsArgs[0], nil
	}
	return "", fmt.Errorf("%w: at most one directory, got %q", errUsage, fsArgs)
}

func mappingsCheck(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mappings check", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	dir, err := dirArg(fs.Args())
	if err != nil {
		return err
	}
	var errs []error
	var set *etl.Set
	if dir == "" {
		set, err = etl.LoadFS(mappings.FS, ".")
		errs = etl.Unjoin(err)
	} else {
		if info, statErr := os.Stat(dir); statErr != nil || !info.IsDir() {
			return fmt.Errorf("mappings directory %s: not a readable directory", dir)
		}
		errs = etl.Check(dir)
		if len(errs) == 0 {
			set, err = etl.LoadDir(dir)
			errs = etl.Unjoin(err)
		}
		if len(errs) == 0 {
			// What `run` would refuse (an empty folder, no field anywhere)
			// the authoring tool refuses first, in the same words.
			if err := (&mappingFlags{dir: dir}).fillable(set); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, e := range errs {
		fmt.Fprintln(stdout, e)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d error(s) in mappings", len(errs))
	}
	fmt.Fprintf(stdout, "ok: %d mappings, fields: %s\n", len(set.Mappings()), strings.Join(set.FieldNames(), ", "))
	return nil
}

func mappingsTest(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mappings test", stderr)
	update := fs.Bool("update", false, "rewrite the fixtures' expectations with what the mappings produce now")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	dir, err := dirArg(fs.Args())
	if err != nil {
		return err
	}
	set, err := loadSet(dir)
	if err != nil {
		return err
	}
	if *update {
		if dir == "" {
			return fmt.Errorf("%w: --update needs a directory (the bundled mappings are read-only)", errUsage)
		}
		return updateFixtures(set, stdout)
	}
	var results []etl.FixtureResult
	if dir == "" {
		results = set.TestFixturesFS(mappings.FS)
	} else {
		results = set.TestFixtures()
	}
	failed := 0
	for _, r := range results {
		fmt.Fprintln(stdout, r)
		if !r.OK() {
			failed++
		}
	}
	fmt.Fprintf(stdout, "%d fixtures, %d failed\n", len(results), failed)
	if failed > 0 {
		return fmt.Errorf("%d fixture(s) failed", failed)
	}
	return nil
}

func mappingsTry(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mappings try", stderr)
	var cf crawlerFlags
	cf.register(fs)
	dir := fs.String("mappings", "", "directory of JSON site mappings (default: the bundled mappings)")
	only := fs.String("mapping", "", "run only this mapping")
	pageURL := fs.String("url", "", "with a saved FILE: the URL the page came from (for url_patterns and links)")
	ctype := fs.String("content-type", "", "with a saved FILE: its content type (default from the extension)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: try takes one URL or FILE", errUsage)
	}
	if err := cf.validate(); err != nil {
		return err
	}
	target := fs.Arg(0)
	closeNames, err := cf.openNames(ctx, "", nil)
	if err != nil {
		return err
	}
	defer closeNames()
	set, err := loadSet(*dir)
	if err != nil {
		return err
	}
	set = set.WithHTMLParser(cf.parser)
	if *only != "" && set.Mapping(*only) == nil {
		return fmt.Errorf("%w: no mapping named %q", errUsage, *only)
	}
	var body []byte
	if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
		res, err := fetchPolitely(ctx, &cf, target)
		if err != nil {
			return err
		}
		body, *pageURL, *ctype = res.Body, res.URL, res.ContentType
		fmt.Fprintf(stdout, "fetched %s: status %d, %d bytes, %s\n", res.URL, res.Status, len(res.Body), res.ContentType)
	} else {
		if body, err = os.ReadFile(target); err != nil {
			return err
		}
		if *pageURL == "" {
			return fmt.Errorf("%w: with a saved page, --url says where it came from", errUsage)
		}
		if *ctype == "" {
			*ctype = mime.TypeByExtension(filepath.Ext(target))
		}
	}
	if cf.parser != etl.ParserFast {
		fmt.Fprintf(stdout, "HTML parser: %s\n", cf.parser)
	}
	printTrace(stdout, set.Trace(*pageURL, body, *ctype, *only))
	return nil
}

func printTrace(w io.Writer, tr *etl.Trace) {
	if len(tr.Matched) == 0 {
		fmt.Fprintf(w, "no mapping matches %s\n", tr.URL)
	} else {
		fmt.Fprintf(w, "mappings matching %s: %s\n", tr.URL, strings.Join(tr.Matched, ", "))
	}
	for _, r := range tr.Rules {
		fmt.Fprintf(w, "\n%s %s\n", r.Mapping, r.Rule)
		for _, s := range r.Steps {
			fmt.Fprintf(w, "  %s ← %d value(s)\n", s.Processor, s.In)
			if s.Err != "" {
				fmt.Fprintf(w, "    error: %s\n", s.Err)
			}
			for _, v := range s.Out {
				fmt.Fprintf(w, "    %q\n", clip(v, 200))
			}
		}
	}
	ex := tr.Extraction
	fmt.Fprintln(w, "\nfields:")
	if len(ex.Fields) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, f := range ex.Fields {
		match := ""
		if f.Match {
			match = " (match key)"
		}
		fmt.Fprintf(w, "  %s.%s%s = %q\n", f.Mapping, f.Field, match, f.Values)
	}
	if len(ex.Errors) > 0 {
		fmt.Fprintln(w, "errors:")
		for _, e := range ex.Errors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	fmt.Fprintf(w, "links from url_parsers (%d):\n", len(ex.Links))
	for _, l := range ex.Links {
		fmt.Fprintf(w, "  %s\n", l)
	}
	fmt.Fprintf(w, "other links on the page: %d\n", len(ex.OutLinks))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// fetchPolitely fetches one page for `mappings try` the way a crawl
// would (cf.politeSource): robots.txt first, the delay, each redirect a
// request under its own host's rules, the blacklist, an identifying
// User-Agent.
func fetchPolitely(ctx context.Context, cf *crawlerFlags, rawURL string) (*fetch.Response, error) {
	f := fetch.New(cf.fetchConfig())
	defer f.Close()
	res, err := cf.politeSource(f).Get(ctx, rawURL)
	if res != nil {
		return res, nil // a bad status still has a page worth trying mappings on
	}
	if hint := guardHint(err); hint != "" {
		return nil, fmt.Errorf("%s: %s", hostOf(rawURL), hint)
	}
	var re *supervisor.RobotsError
	if errors.As(err, &re) {
		return nil, fmt.Errorf("robots.txt of %s could not be read (%s), so nothing is fetched from it (a crawl waits until it can be read)", hostOf(re.URL), re.Reason)
	}
	return nil, err
}

// guardHint says which flag lifts the address guard when err is its
// refusal, "" otherwise: a page on this machine or a private network is
// refused by default, which is not the site's doing.
func guardHint(err error) string {
	if fetch.ClassOf(err) != fetch.ClassBlocked {
		return ""
	}
	var fe *fetch.Error
	errors.As(err, &fe)
	why := fe.Err.Error()
	if flag, ok := guardFlags[fetch.RefusalOf(why)]; ok {
		return "the address guard refuses it: " + why + "; pass " + flag
	}
	return "the address guard refuses it: " + why
}

func hostOf(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		return u.Host
	}
	return rawURL
}

// updateFixtures rewrites fixture expectations in every mapping file of set
// that has fixtures.
func updateFixtures(set *etl.Set, stdout io.Writer) error {
	files := map[string]bool{}
	var errs []error
	for _, m := range set.Mappings() {
		if len(m.Fixtures()) == 0 || files[m.File] {
			continue
		}
		files[m.File] = true
		changed, err := etl.UpdateFixtures(m.File)
		if err != nil {
			errs = append(errs, err)
		}
		fmt.Fprintf(stdout, "%s: %d fixture(s) updated\n", m.File, changed)
	}
	return errors.Join(errs...)
}
