package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"backfill/dispatcher"
	"backfill/etl"
	"backfill/records"
	"backfill/seconds"
	"backfill/store"
	"backfill/supervisor"
)

// dispatcherFlags are the crawl's own settings, shared by run and dispatcher.
type dispatcherFlags struct {
	records     string
	stateDir    string
	fields      string
	depth       int
	lease       time.Duration
	memberLease time.Duration
	// re-checks of members' answers: the share (-1: the default), and
	// the strikes that quarantine
	recheckShare   float64
	recheckStrikes int
	hostInFlight   int
	summary        string

	// link filters (dispatcher.Config); 0 turns a limit off
	topSites     string
	excludeTop   int
	hostBudget   int
	recordBudget int
	maxPathDepth int
	maxRepeats   int
	maxFanout    int
	blacklist    string
	// freshness: the recrawl age, and whether to re-check old values
	recrawlAfter time.Duration
	refresh      bool
	// failed pages of earlier runs: how often to try, and all of them
	retryAttempts int
	retryFailed   bool
	strict        bool
	id            string // --id: the id column, or "line"
	// blacklistFlag is --blacklist when another flag group registered it
	// first (the supervisors read the same file): the value is shared.
	blacklistFlag *flag.Flag
}

func (d *dispatcherFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.records, "records", "", "records file: CSV with a header row, or JSON Lines (required)")
	stateDirFlag(fs, &d.stateDir, defaultStateDir, "directory for the crawl state (resumable) and the default results store")
	fs.StringVar(&d.fields, "fields", "", "comma-separated fields to fill (default: every field the mappings can produce that a record lacks)")
	fs.IntVar(&d.depth, "depth", 1, "how many links away from a record's own links to crawl")
	fs.DurationVar(&d.lease, "lease", 2*time.Minute, "how long a supervisor has for a task before it is sent again")
	fs.DurationVar(&d.memberLease, "member-lease", dispatcher.DefaultMemberLease, "how long a supervisor holds its hosts without being heard: one cut off that long has stopped asking them, and after its longest request they go to another")
	fs.IntVar(&d.hostInFlight, "host-in-flight", 2, "tasks of one host handed out at once")
	fs.Float64Var(&d.recheckShare, "recheck-share", -1, fmt.Sprintf("share of each supervisor's value-giving pages fetched again by another supervisor and compared, 0 to 1 (default %g on a CURVE cluster, none on a plaintext one; 0: none)", dispatcher.DefaultRecheckShare))
	fs.IntVar(&d.recheckStrikes, "recheck-strikes", dispatcher.DefaultRecheckStrikes, "answers of a supervisor that two others' fetches must contradict for it to be quarantined and every page it answered fetched again")
	fs.StringVar(&d.summary, "summary", "", "also write the run summary as JSON to this file")
	fs.StringVar(&d.topSites, "top-sites", "", "ranked CSV of popular sites, rank,domain per line (header optional), for --exclude-top")
	fs.IntVar(&d.excludeTop, "exclude-top", 0, "do not follow links found on pages into the N most popular sites of --top-sites (a record's own links are always followed); 0: off")
	fs.IntVar(&d.hostBudget, "host-budget", dispatcher.DefaultHostBudget, "pages queued per host in this run; further links found to it are not followed (0: no limit)")
	fs.IntVar(&d.recordBudget, "record-budget", dispatcher.DefaultRecordBudget, "pages queued on behalf of one record; further links found for it are not followed (0: no limit)")
	fs.IntVar(&d.maxPathDepth, "max-path-depth", dispatcher.DefaultMaxPathDepth, "links found on pages with more path segments are not followed (0: no limit)")
	fs.IntVar(&d.maxRepeats, "max-repeats", dispatcher.DefaultMaxRepeats, "links found on pages with one path segment repeated more often (/a/a/a/a) are not followed (0: no limit)")
	fs.IntVar(&d.maxFanout, "max-fanout", dispatcher.DefaultMaxFanout, "a page linking to more distinct registrable domains, or to more hosts outside its own domain, is a link farm: none of its links is followed (0: no limit)")
	fs.DurationVar(&d.recrawlAfter, "recrawl-after", 0, "fetch a page crawled by an earlier run again, conditionally (ETag, Last-Modified), once it is older than this, instead of reusing its cached extraction (0: reuse however old)")
	idFlag(fs, &d.id)
	fs.BoolVar(&d.strict, "strict", false, "refuse the records file whole, before crawling, if any line is malformed (default: report malformed lines, crawl the rest, and give them back marked in the export)")
	fs.BoolVar(&d.refresh, "refresh", false, "re-check the filled values older than --recrawl-after: refetch their sources and records' links; a changed value replaces the old one, which is kept in the field's provenance history")
	fs.IntVar(&d.retryAttempts, "retry-attempts", dispatcher.DefaultRetryAttempts, "on a rerun, fetch again the pages that failed for a reason that may pass (dns, connect, timeout, 5xx, 429, blocked address, robots.txt unavailable) until they have failed this many times in a row (0: never)")
	fs.BoolVar(&d.retryFailed, "retry-failed", false, "on a rerun, fetch again every page that failed, permanent failures (404, 410, robots.txt rules) included")
	if f := fs.Lookup("blacklist"); f != nil {
		d.blacklistFlag = f
	} else {
		fs.StringVar(&d.blacklist, "blacklist", "", "file of hosts (subdomains included), IP addresses and CIDRs never crawled, one per line, # comments; the dispatcher never queues the hosts, a record's own links included")
	}
}

// blacklistPath is the --blacklist file, whoever registered the flag.
func (d *dispatcherFlags) blacklistPath() string {
	if d.blacklistFlag != nil {
		return d.blacklistFlag.Value.String()
	}
	return d.blacklist
}

func (d *dispatcherFlags) validate() error {
	if d.records == "" {
		return fmt.Errorf("%w: --records is required", errUsage)
	}
	if _, err := os.Stat(d.records); err != nil {
		return fmt.Errorf("records file: %w", err)
	}
	if d.depth < 0 {
		return fmt.Errorf("%w: --depth must not be negative", errUsage)
	}
	if d.lease <= 0 || d.memberLease <= 0 || d.hostInFlight < 1 {
		return fmt.Errorf("%w: --lease and --member-lease must be positive and --host-in-flight at least 1", errUsage)
	}
	if min(d.excludeTop, d.hostBudget, d.recordBudget, d.maxPathDepth, d.maxRepeats, d.maxFanout) < 0 {
		return fmt.Errorf("%w: --exclude-top, --host-budget, --record-budget, --max-path-depth, --max-repeats and --max-fanout must not be negative", errUsage)
	}
	if d.recheckShare > 1 || (d.recheckShare < 0 && d.recheckShare != -1) || d.recheckStrikes < 1 {
		return fmt.Errorf("%w: --recheck-share must be between 0 and 1, --recheck-strikes at least 1", errUsage)
	}
	if d.retryAttempts < 0 {
		return fmt.Errorf("%w: --retry-attempts must not be negative", errUsage)
	}
	if d.recrawlAfter < 0 {
		return fmt.Errorf("%w: --recrawl-after must not be negative", errUsage)
	}
	if d.refresh && d.recrawlAfter == 0 {
		return fmt.Errorf("%w: --refresh needs --recrawl-after, the age of the values to re-check", errUsage)
	}
	if d.excludeTop > 0 && d.topSites == "" {
		return fmt.Errorf("%w: --exclude-top needs --top-sites", errUsage)
	}
	for _, f := range []struct{ what, path string }{{"top sites", d.topSites}, {"blacklist", d.blacklistPath()}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s file: %w", f.what, err)
		}
	}
	return nil
}

// idFlag registers --id, where records' ids come from, for the commands
// that read a records file.
func idFlag(fs *flag.FlagSet, id *string) {
	fs.StringVar(id, "id", string(records.DefaultID), "the column (JSON Lines: the member) holding each record's id, which tells records apart, resumes and exports them; \"line\": number the records by the line each starts on. A file without the column is refused; a record with an empty id is a malformed line")
}

// recheckShare maps --recheck-share to dispatcher.Config's: -1 (the
// default) to 0, 0 (none) to -1.
func recheckShare(v float64) float64 {
	switch v {
	case -1:
		return 0
	case 0:
		return -1
	}
	return v
}

// noLimit maps a flag's 0 ("no limit") to dispatcher.Config's negative.
func noLimit(v int) int {
	if v == 0 {
		return -1
	}
	return v
}

func (d *dispatcherFlags) config(listen string, set *etl.Set, st store.Store, log *slog.Logger) dispatcher.Config {
	var fields []string
	for _, f := range strings.Split(d.fields, ",") {
		if f = strings.TrimSpace(f); f != "" {
			fields = append(fields, f)
		}
	}
	return dispatcher.Config{
		StateDir:       d.stateDir,
		Listen:         listen,
		Mappings:       set,
		Store:          st,
		Depth:          d.depth,
		Fields:         fields,
		Lease:          d.lease,
		MemberLease:    d.memberLease,
		RecheckShare:   recheckShare(d.recheckShare),
		RecheckStrikes: d.recheckStrikes,
		HostInFlight:   d.hostInFlight,
		HostBudget:     noLimit(d.hostBudget),
		RecordBudget:   noLimit(d.recordBudget),
		MaxPathDepth:   noLimit(d.maxPathDepth),
		MaxRepeats:     noLimit(d.maxRepeats),
		MaxFanout:      noLimit(d.maxFanout),
		TopSites:       d.topSites,
		ExcludeTop:     d.excludeTop,
		Blacklist:      d.blacklistPath(),
		RecrawlAfter:   d.recrawlAfter,
		Refresh:        d.refresh,
		RetryAttempts:  noLimit(d.retryAttempts),
		RetryFailed:    d.retryFailed,
		Strict:         d.strict,
		ID:             records.ID(d.id),
		Logger:         log,
	}
}

// crawlSetup is what run and dispatcher share: the crawl's flags, and
// opening the logger, mappings and store they name.
type crawlSetup struct {
	lf logFlags
	mf mappingFlags
	sf storeFlags
	df dispatcherFlags
	of observeFlags

	log  *slog.Logger
	set  *etl.Set
	st   store.Store
	term *terminal // the progress line, when stderr is a terminal
	ob   *observer // metrics and status page, when asked for

	logFile io.Closer
}

func (c *crawlSetup) register(fs *flag.FlagSet) {
	c.of.register(fs, true)
	c.lf.register(fs)
	c.mf.register(fs)
	c.sf.register(fs, "results store: a SQLite file path (default: STATE-DIR/results.db)")
	c.sf.registerDrain(fs)
	c.df.register(fs)
}

// open validates the flags and opens what they name; the caller calls
// close when done. The dispatcher's Config listens on listen.
func (c *crawlSetup) open(ctx context.Context, listen string, stderr io.Writer) (dispatcher.Config, error) {
	var err error
	if err = c.df.validate(); err != nil {
		return dispatcher.Config{}, err
	}
	if isTerminal(stderr) {
		c.term = newTerminal(stderr)
	}
	if c.log, c.logFile, err = c.lf.logger(stderr, c.term); err != nil {
		return dispatcher.Config{}, err
	}
	if c.set, err = c.mf.load(); err != nil {
		c.close()
		return dispatcher.Config{}, err
	}
	if c.ob, err = c.of.start(c.log); err != nil {
		c.close()
		return dispatcher.Config{}, err
	}
	c.mf.logLearned(c.log, c.set)
	// Before the results store opens a file there: a directory that is
	// read-only or in use by another run is named as such.
	undo, err := dispatcher.CheckStateDirUndo(c.df.stateDir)
	if err != nil {
		return dispatcher.Config{}, err
	}
	if c.st, err = c.sf.openLogged(ctx, c.df.stateDir, c.log); err != nil {
		c.close()
		undo()
		return dispatcher.Config{}, err
	}
	cfg := c.df.config(listen, c.set, c.st, c.log)
	if cfg.Fields, err = c.mf.learnedTargets(cfg.Fields, c.set, c.log); err != nil {
		c.close()
		return dispatcher.Config{}, err
	}
	cfg.StoreDrainTimeout = c.sf.drain
	if c.term != nil {
		cfg.Progress = c.term.update
	} else {
		cfg.Progress = (&progressLog{log: c.log}).update
	}
	return cfg, nil
}

// close ends what open opened: the progress line, the operator
// endpoints, the store and the log file, and returns what failed.
func (c *crawlSetup) close() error {
	var errs []error
	if c.term != nil {
		c.term.finish()
	}
	errs = append(errs, c.ob.stop())
	if c.st != nil {
		errs = append(errs, c.st.Close())
	}
	if c.logFile != nil {
		errs = append(errs, c.logFile.Close())
	}
	return errors.Join(errs...)
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", stderr)
	var (
		c  crawlSetup
		cf crawlerFlags
	)
	// The supervisors' flags first: --blacklist is theirs, and the
	// dispatcher's flags share it (see dispatcherFlags.register).
	cf.register(fs)
	cf.render.register(fs)
	c.register(fs)
	supervisors := fs.Int("supervisors", 1, "supervisors to run in this process (each owns its share of the hosts)")
	streamPath := fs.String("stream", "", "write each record as JSON Lines (export's shape) to this file, or - for stdout, the moment it is complete; when the crawl finishes, the records given up on and those complete before it follow")
	streamProv := fs.Bool("stream-provenance", false, "with --stream: add where each filled value came from")
	dryRun := fs.Bool("dry-run", false, "take the records in, say how long the crawl will take at least (the pages each host has at --delay, and every request at the rate the hosts allow), and stop: no host is asked anything")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := cf.validate(); err != nil {
		return err
	}
	if *supervisors < 1 {
		return fmt.Errorf("%w: --supervisors must be at least 1", errUsage)
	}
	cfg, err := c.open(ctx, localEndpoint("dispatcher"), stderr)
	if err != nil {
		return err
	}
	cfg.DefaultDelay = cf.delay // the ETA's, for hosts not heard of yet
	if *dryRun {
		return errors.Join(dryRunETA(ctx, cfg, c.df.records, stdout, stderr), c.close())
	}
	closeNames, err := cf.openNames(ctx, c.df.stateDir, c.log)
	if err != nil {
		return errors.Join(err, c.close())
	}
	defer closeNames()
	c.ob.names(cf.names)
	var follow *follower
	summaryOut := stdout
	closeStream := func() error { return nil }
	if *streamPath != "" {
		w, closeFn, err := openStream(*streamPath, stdout)
		if err != nil {
			return errors.Join(err, c.close())
		}
		closeStream = closeFn
		follow = newFollower(c.st, w, *streamProv, c.log)
		if *streamPath == "-" {
			summaryOut = stderr // stdout is the stream's
		}
	}
	summary, err := crawl(ctx, cfg, c.df.records, *supervisors, nil, func(i int, endpoint string) supervisor.Config {
		sc := cf.supervisorConfig(fmt.Sprintf("local-%d", i+1), endpoint, c.set, c.st, c.log)
		sc.Listen = localEndpoint(sc.Name)
		return sc
	}, c.ob, follow, stderr)
	err = errors.Join(err, closeStream(), c.close())
	if summary != nil && cf.names != nil {
		// The supervisors' heartbeats lag; this process's cache is
		// the whole of it.
		summary.DNS = supervisor.DNSStats(cf.names)
	}
	if summary != nil {
		err = errors.Join(err, writeSummary(summaryOut, summary, c.df.summary, err, c.df.stateDir))
	}
	return err
}

// localEndpoints numbers the in-process endpoints of this process.
var localEndpoints atomic.Uint64

// localEndpoint returns a ZeroMQ endpoint for a socket that only this
// process's own sockets connect to (run's dispatcher and supervisors): an
// inproc one, which passes messages between threads without the kernel (a
// tenth of the CPU per page of a crawl went to loopback TCP's system
// calls). Names are unique within the process, as inproc requires, even
// when one process runs several crawls.
func localEndpoint(role string) string {
	return fmt.Sprintf("inproc://backfill-%d-%s-%d", os.Getpid(), role, localEndpoints.Add(1))
}

// crawl runs a dispatcher and n supervisors in this process until the
// dispatcher has no work left, then stops the supervisors. loaded, when not
// nil, runs once the records are in. With n = 0 it is a lone dispatcher
// waiting for supervisors elsewhere. ob (nil for none) serves their
// metrics and the status page.
//
// follow, when not nil, writes the records as they settle (run --stream):
// fed while the crawl runs, and swept for the rest when it finished.
func crawl(ctx context.Context, cfg dispatcher.Config, records string, n int, loaded func(*dispatcher.Dispatcher) error, supCfg func(i int, endpoint string) supervisor.Config, ob *observer, follow *follower, stderr io.Writer) (*dispatcher.Summary, error) {
	if n > 0 && cfg.Expect == 0 {
		cfg.Expect = n // all local: no need to wait for late joiners
	}
	d, err := dispatcher.New(cfg)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ob.dispatcher(d)
	report, err := d.Load(ctx, records)
	if err != nil {
		return nil, err
	}
	reportBadLines(stderr, report)
	if report.New > 0 && report.NothingToFill == report.New {
		return nil, fmt.Errorf("%s: none of its %d records has an empty field the mappings can fill (they fill: %s); name the fields to fill with --fields",
			records, report.New, strings.Join(cfg.Mappings.FieldNames(), ", "))
	}
	if loaded != nil {
		if err := loaded(d); err != nil {
			return nil, err
		}
	}

	stopStream := make(chan struct{})
	streamed := make(chan error, 1)
	if follow != nil {
		go func() { streamed <- follow.follow(ctx, d, stopStream) }()
	}

	supCtx, stopSupervisors := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		sc := supCfg(i, d.Endpoint())
		s, err := supervisor.New(sc)
		if err != nil {
			stopSupervisors()
			wg.Wait()
			if follow != nil {
				close(stopStream)
				<-streamed
			}
			return nil, err
		}
		ob.supervisor(s, sc.Name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Run(supCtx)
		}()
	}
	summary, runErr := d.Run(ctx)
	stopSupervisors()
	wg.Wait()
	if follow != nil {
		close(stopStream)
		err := <-streamed
		if err == nil && runErr == nil {
			err = follow.sweep(ctx)
		}
		if err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("stream: %w", err))
		}
	}
	for _, e := range errs {
		if e != nil && !errors.Is(e, context.Canceled) {
			runErr = errors.Join(runErr, e)
		}
	}
	return summary, runErr
}

// dryRunETA takes the records in (as a crawl would first: a run with the
// same flags goes on from there) and says how long their crawl will take
// at least, without a supervisor: the pages left per host at the default
// delay, each host not heard of with its robots.txt to ask as well.
func dryRunETA(ctx context.Context, cfg dispatcher.Config, records string, stdout, stderr io.Writer) error {
	d, err := dispatcher.New(cfg)
	if err != nil {
		return err
	}
	defer d.Close()
	report, err := d.Load(ctx, records)
	if err != nil {
		return err
	}
	reportBadLines(stderr, report)
	e := d.ETA()
	fmt.Fprintf(stdout, "dry run: %d records (%d new), %d pages to fetch on %d hosts: %d requests with their robots.txt and soft-404 probes\n",
		report.Records, report.New, e.Pages, e.Hosts, e.Requests)
	switch {
	case e.Pages == 0:
		fmt.Fprintln(stdout, "nothing to fetch")
	case e.Seconds == 0:
		fmt.Fprintln(stdout, "no delay between requests (--delay 0): the crawl's time depends on how fast the hosts answer and the machine works")
	default:
		fmt.Fprintf(stdout, "the crawl takes at least %v (%v)\n", e.Bound(), e)
		fmt.Fprintf(stdout, "  the busiest host, %s: %d requests, one every %.1fs: %v\n",
			e.Host, e.HostRequests, e.HostCycle, seconds.Duration(e.HostSeconds).Round(time.Second))
		fmt.Fprintf(stdout, "  every request at the %.3g/s the %d hosts allow: %v\n", e.Rate, e.Hosts, seconds.Duration(e.RateSeconds).Round(time.Second))
		fmt.Fprintf(stdout, "pages the crawl finds on the way (--depth %d) add to both\n", cfg.Depth)
	}
	fmt.Fprintln(stdout, "nothing was fetched; run again without --dry-run to crawl")
	return nil
}

func reportBadLines(w io.Writer, r dispatcher.LoadReport) {
	if r.Bad == 0 {
		return
	}
	fmt.Fprintf(w, "%d malformed record line(s), not crawled for (export gives them back in place, marked in %s):\n", r.Bad, store.ColumnError)
	for i, e := range r.Errors {
		if i == 20 {
			fmt.Fprintf(w, "  … and %d more\n", len(r.Errors)-i)
			break
		}
		fmt.Fprintf(w, "  %v\n", e)
	}
}
