package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"backfill/store"
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
	follow := fs.Bool("follow", false, "tail a running crawl: write each record as it is complete, then, when the crawl finishes, the rest (JSON Lines; needs --from)")
	from := fs.String("from", "", "with --follow: the dispatcher's --status (or --metrics) listener, e.g. http://10.0.0.2:9100/")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *follow && (*from == "" || *format != "jsonl" || *fields != "") {
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
	opts := store.ExportOptions{Format: *format, Provenance: *provenance, Wrap: *wrap}
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
