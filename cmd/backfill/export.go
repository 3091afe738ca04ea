package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"backfill/store"
	"backfill/warc"
)

func cmdExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("export", stderr)
	var sf storeFlags
	sf.register(fs, "results store to read: a SQLite file path (default: STATE-DIR/results.db)")
	stateDir := new(string)
	stateDirFlag(fs, stateDir, defaultStateDir, "the crawl's state directory")
	format := fs.String("format", "jsonl", "output format: jsonl or csv")
	provenance := fs.Bool("provenance", false, "add where each filled value came from (JSON Lines: in the --wrap form)")
	wrap := fs.Bool("wrap", false, "JSON Lines: write each record as {\"id\":…,\"fields\":{…}} instead of your own line with the filled fields changed")
	out := fs.String("o", "-", "output file, - for standard output (JSON Lines stream there as they are read, for piping)")
	fs.StringVar(out, "out", "-", "same as -o")
	fields := fs.String("fields", "", "comma-separated extra columns to include even when no record has them")
	member := fs.String("member", "", "only the values this supervisor gave (its name or public key), and only the records holding one: its answers, to review or purge")
	follow := fs.Bool("follow", false, "tail a running crawl: write each record as it is complete, then, when the crawl finishes, the rest (JSON Lines; needs --from)")
	from := fs.String("from", "", "with --follow: the dispatcher's --status (or --metrics) listener, e.g. http://10.0.0.2:9100/")
	asWARC := fs.Bool("warc", false, "write the pages the crawl kept (run --keep-pages) as a WARC file (ISO 28500, WARC/1.1) instead of the records; gzip-compressed record by record when -o ends in .gz")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *asWARC && (*follow || *provenance || *wrap || *fields != "" || *format != "jsonl" || *member != "") {
		return fmt.Errorf("%w: --warc writes the kept pages: no --format, --provenance, --wrap, --fields, --member or --follow", errUsage)
	}
	if *follow && (*from == "" || *format != "jsonl" || *fields != "" || *member != "") {
		return fmt.Errorf("%w: --follow needs --from and writes JSON Lines (no --format csv, no --fields)", errUsage)
	}
	if *format != "jsonl" && *format != "csv" {
		return fmt.Errorf("%w: --format must be jsonl or csv, not %q", errUsage, *format)
	}
	if *wrap && *format != "jsonl" {
		return fmt.Errorf("%w: --wrap is for JSON Lines (--format jsonl)", errUsage)
	}
	if !sf.given() {
		path := *stateDir + "/results.db"
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("no results to export: %w", err)
		}
	}
	st, err := sf.open(ctx, *stateDir)
	if err != nil {
		return err
	}
	defer st.Close()
	w := stdout
	var f *os.File
	if *out != "-" {
		if f, err = os.Create(*out); err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	if *asWARC {
		if err := exportWARC(ctx, st, w, *out, stderr); err != nil {
			return err
		}
		if f != nil {
			return f.Close()
		}
		return nil
	}
	if *follow {
		log := slog.New(slog.NewTextHandler(stderr, nil))
		if err := newFollower(st, w, *provenance, log).followRemote(ctx, *from); err != nil {
			return fmt.Errorf("export --follow: %w", err)
		}
		if f != nil {
			return f.Close()
		}
		return nil
	}
	bw := bufio.NewWriter(w)
	opts := store.ExportOptions{Format: *format, Provenance: *provenance, Wrap: *wrap, Member: *member}
	for _, name := range strings.Split(*fields, ",") {
		if name = strings.TrimSpace(name); name != "" {
			opts.Fields = append(opts.Fields, name)
		}
	}
	if err := store.Export(ctx, st, bw, opts); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if f != nil {
		return f.Close()
	}
	return nil
}

// exportWARC writes the pages st keeps to w as WARC records, one gzip
// member each when the file name (name, "-" for stdout) ends in .gz, and
// says how many on stderr.
func exportWARC(ctx context.Context, st store.Store, w io.Writer, name string, stderr io.Writer) error {
	opts := warc.Options{Software: "backfill/" + version, Gzip: strings.HasSuffix(name, ".gz")}
	if name != "-" {
		opts.Filename = filepath.Base(name)
	}
	ww, err := warc.NewWriter(w, opts)
	if err != nil {
		return fmt.Errorf("export --warc: %w", err)
	}
	damaged := 0
	err = store.EachPage(ctx, st, func(p store.Page) error {
		if p.Damaged != "" {
			damaged++
			fmt.Fprintf(stderr, "kept page left out: %s\n", p.Damaged)
			return nil
		}
		return ww.Write(warc.Page{URL: p.Address(), Status: p.Status, ContentType: p.ContentType, Body: p.Body,
			Date: p.FetchedAt, Rendered: p.Rendered})
	})
	if err != nil {
		return fmt.Errorf("export --warc: %w", err)
	}
	if err := ww.Close(); err != nil {
		return fmt.Errorf("export --warc: %w", err)
	}
	fmt.Fprintf(stderr, "%d kept page(s) written as WARC\n", ww.Records())
	if damaged > 0 {
		fmt.Fprintf(stderr, "%d kept page(s) left out: damaged in the store\n", damaged)
	}
	return nil
}
