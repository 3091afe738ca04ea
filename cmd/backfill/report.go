package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"backfill/report"
)

// cmdReport writes the run report of the crawl whose state is in
// --state-dir: one self-contained HTML file (see package report).
func cmdReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("report", stderr)
	var (
		sf storeFlags
		mf mappingFlags
	)
	sf.register(fs, "results store to read: a SQLite file path (default: STATE-DIR/results.db)")
	mf.register(fs)
	// Fill rates come from the run's own targets; mappings named here are
	// only checked against the run's.
	fs.Lookup("mappings").Usage = "the mappings the crawl ran with, checked against the run's digest (default: none needed; fill rates are judged by the run's own targets)"
	stateDir := new(string)
	stateDirFlag(fs, stateDir, defaultStateDir, "the crawl's state directory (its status and history files, and the default results store)")
	out := fs.String("o", "report.html", "the HTML file to write, - for standard output")
	if err := parse(fs, args); err != nil {
		return err
	}
	if !sf.given() {
		if _, err := os.Stat(filepath.Join(*stateDir, "results.db")); err != nil {
			return fmt.Errorf("no crawl to report on in %s: %w", *stateDir, err)
		}
	}
	set, err := mf.load()
	if err != nil {
		return err
	}
	st, err := sf.open(ctx, *stateDir)
	if err != nil {
		return err
	}
	defer st.Close()
	given := mf.dir != "" || mf.learned != ""
	data, err := report.Gather(ctx, *stateDir, st, report.Mappings{Set: set, Given: given})
	if err != nil {
		return err
	}
	if data.Warning != "" {
		fmt.Fprintf(stderr, "warning: %s\n", data.Warning)
	}
	if *out == "-" {
		bw := bufio.NewWriter(stdout)
		return errors.Join(report.Write(bw, data), bw.Flush())
	}
	// Written beside the target and renamed: a report being written is
	// never half there under its name.
	f, err := os.CreateTemp(filepath.Dir(*out), ".report-*.html")
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	if err := errors.Join(report.Write(bw, data), bw.Flush(), f.Chmod(0o644), f.Close()); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), *out); err != nil {
		os.Remove(f.Name())
		return err
	}
	fmt.Fprintf(stdout, "report of %d records written to %s\n", data.Records, *out)
	return nil
}
