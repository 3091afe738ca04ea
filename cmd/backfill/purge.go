package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"backfill/dispatcher"
)

// cmdPurge takes back every answer one supervisor gave a crawl: the
// pages it answered are queued again (the next run fetches them with
// the other supervisors), and the values it gave leave the records and
// the results store. For a supervisor found compromised after the fact:
// export --member lists its answers first.
func cmdPurge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("purge", stderr)
	var (
		lf logFlags
		mf mappingFlags
		sf storeFlags
	)
	lf.register(fs)
	mf.register(fs)
	sf.register(fs, "results store: a SQLite file path (default: STATE-DIR/results.db)")
	sf.registerDrain(fs)
	stateDir := new(string)
	stateDirFlag(fs, stateDir, defaultStateDir, "the crawl's state directory")
	member := fs.String("member", "", "the supervisor whose answers to take back: its name (as the dispatcher knew it: status, export --provenance) or its public key (required)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *member == "" {
		return fmt.Errorf("%w: --member names the supervisor whose answers to take back", errUsage)
	}
	if _, err := os.Stat(*stateDir); err != nil {
		return fmt.Errorf("no crawl state: %w", err)
	}
	log, logFile, err := lf.logger(stderr, nil)
	if err != nil {
		return err
	}
	if logFile != nil {
		defer logFile.Close()
	}
	set, err := mf.load()
	if err != nil {
		return err
	}
	st, err := sf.openLogged(ctx, *stateDir, log)
	if err != nil {
		return err
	}
	defer st.Close()
	d, err := dispatcher.New(dispatcher.Config{StateDir: *stateDir, Listen: "inproc://backfill-purge", Mappings: set, Store: st,
		StoreDrainTimeout: sf.drain, Logger: log})
	if err != nil {
		return err
	}
	rep, err := d.Purge(ctx, *member)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	b, _ := json.Marshal(rep)
	fmt.Fprintf(stdout, "%s\n", b)
	fmt.Fprintf(stderr, "%s (%s): %d pages queued again (the next run fetches them), %d records lost %d values\n",
		rep.Member, rep.Key, rep.Pages, rep.Records, rep.Values)
	return nil
}
