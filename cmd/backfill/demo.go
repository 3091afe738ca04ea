package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"backfill/dispatcher"
	"backfill/etl"
	"backfill/fetch"
	"backfill/mappings"
	"backfill/store"
	"backfill/supervisor"
	"backfill/testweb"
)

// cmdDemo crawls the built-in fixture web with the bundled mappings and
// sample records, two supervisors and a dispatcher in this process.
func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", stderr)
	var (
		lf logFlags
		of observeFlags
	)
	lf.register(fs)
	of.register(fs, true)
	stateDir := new(string)
	stateDirFlag(fs, stateDir, "", "keep the demo's state here (default: a temporary directory, removed afterwards)")
	delay := fs.Int("crawl-delay", 1, "Crawl-delay (seconds) the fixture hosts ask for")
	hold := fs.Bool("hold", false, "after the crawl, keep serving --metrics and --status until interrupted")
	if err := parse(fs, args); err != nil {
		return err
	}
	levelSet := false
	fs.Visit(func(f *flag.Flag) { levelSet = levelSet || f.Name == "log-level" })
	if !levelSet {
		lf.level = "warn" // the demo prints its own story
	}
	var term *terminal
	if isTerminal(stderr) {
		term = newTerminal(stderr)
	}
	log, logFile, err := lf.logger(stderr, term)
	if err != nil {
		return err
	}
	defer logFile.Close()
	ob, err := of.start(log)
	if err != nil {
		return err
	}
	defer ob.stop()
	dir := *stateDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "backfill-demo-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}

	web, err := testweb.Start(testweb.Options{CrawlDelay: *delay})
	if err != nil {
		return fmt.Errorf("start fixture web: %w", err)
	}
	defer web.Close()
	records, truth := testweb.Sample()
	recordsPath := filepath.Join(dir, "sample.csv")
	if err := os.WriteFile(recordsPath, records, 0o644); err != nil {
		return err
	}
	set, err := etl.LoadFS(mappings.FS, ".")
	if err != nil {
		return fmt.Errorf("load bundled mappings: %w", err)
	}
	st, err := store.Open(ctx, filepath.Join(dir, "results.db"))
	if err != nil {
		return err
	}
	defer st.Close()

	fmt.Fprintf(stdout, "fixture web on %s: %s\n", web.Addr(), strings.Join(web.Hosts(), ", "))
	fmt.Fprintf(stdout, "mappings: %d bundled; Crawl-delay %ds on every host\n\nbefore:\n", len(set.Mappings()), *delay)
	if ob != nil {
		fmt.Fprintf(stdout, "watch it: %s\n", strings.Join(ob.urls, "  "))
	}
	cfg := dispatcher.Config{StateDir: dir, Listen: "tcp://127.0.0.1:*", Mappings: set, Store: st, Depth: 1, Logger: log}
	if term != nil {
		cfg.Progress = term.update
	}
	shown := func(*dispatcher.Dispatcher) error {
		if err := printRecords(ctx, stdout, st, nil); err != nil {
			return err
		}
		_, err := fmt.Fprintln(stdout, "\ncrawling with a dispatcher and two supervisors…")
		return err
	}
	summary, err := crawl(ctx, cfg, recordsPath, 2, shown, func(i int, endpoint string) supervisor.Config {
		return supervisor.Config{
			Name:         fmt.Sprintf("demo-%d", i+1),
			Dispatcher:   endpoint,
			Workers:      4,
			Mappings:     set,
			Fetch:        demoFetch(web),
			Cache:        st,
			DefaultDelay: time.Duration(*delay) * time.Second,
			Logger:       log,
		}
	}, ob, nil, stderr)
	if term != nil {
		term.finish()
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\nafter:")
	if err := printRecords(ctx, stdout, st, truth); err != nil {
		return err
	}
	printSummary(stdout, summary)
	if *hold && ob != nil {
		fmt.Fprintf(stdout, "\nstill serving %s; interrupt to stop\n", strings.Join(ob.urls, "  "))
		<-ctx.Done()
	}
	return nil
}

// printRecords shows every record's fields, as the file has them (links
// without their http:// or https://, to keep the table narrow); found
// values are marked with *, and when truth is given, wrong ones with !.
func printRecords(ctx context.Context, w io.Writer, st store.Records, truth map[string]map[string]string) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	var cols []string
	wrong := 0
	err := st.Records(ctx, func(r store.Record) error {
		if cols == nil {
			for _, c := range r.Order {
				if c != "id" {
					cols = append(cols, c)
				}
			}
			fmt.Fprintln(tw, "id\t"+strings.Join(cols, "\t"))
		}
		row := []string{r.ID}
		for _, c := range cols {
			v := shortLink(r.Fields[c])
			if f, ok := r.Found[c]; ok {
				v = f.Value + " *"
				if want, known := truth[r.ID][c]; known && want != f.Value {
					v += "!"
					wrong++
				}
			}
			if v == "" {
				v = "·"
			}
			row = append(row, v)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if truth != nil {
		missing := missingTruth(ctx, st, truth)
		fmt.Fprintf(w, "(* found by backfill; · missing)  known truth: %d wrong values, %d findable values not found\n", wrong, missing)
	}
	return nil
}

// shortLink is v without its http:// or https://.
func shortLink(v string) string {
	for _, scheme := range []string{"http://", "https://"} {
		if rest, ok := strings.CutPrefix(v, scheme); ok {
			return rest
		}
	}
	return v
}

func missingTruth(ctx context.Context, st store.Records, truth map[string]map[string]string) int {
	n := 0
	ids := make([]string, 0, len(truth))
	for id := range truth {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	found := map[string]map[string]string{}
	_ = st.Records(ctx, func(r store.Record) error {
		m := map[string]string{}
		for f, v := range r.Found {
			m[f] = v.Value
		}
		found[r.ID] = m
		return nil
	})
	for _, id := range ids {
		for f, want := range truth[id] {
			if want != "" && found[id][f] == "" {
				n++
			}
		}
	}
	return n
}

func demoFetch(web *testweb.Web) fetch.Config {
	return fetch.Config{
		UserAgent:     "backfill/" + version + " (+" + defaultContact + ")",
		Timeout:       10 * time.Second,
		Resolve:       web.Resolve(),
		AllowLoopback: true,
	}
}
