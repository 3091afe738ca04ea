package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"backfill/dispatcher"
	"backfill/supervisor"
	"backfill/survey"
)

// cmdDispatcher runs only the dispatcher: supervisors in other processes or
// on other machines connect to --listen.
func cmdDispatcher(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dispatcher", stderr)
	var c crawlSetup
	c.register(fs)
	listen := fs.String("listen", "tcp://127.0.0.1:5550", "ZeroMQ endpoint where supervisors send hellos, heartbeats and results")
	expect := fs.Int("expect", 0, "supervisors in the cluster: dispatch nothing until this many have joined (0: start after a short quiet spell)")
	expectTimeout := fs.Duration("expect-timeout", dispatcher.DefaultExpectTimeout, "with --expect, how long to wait for every supervisor before dispatching to those that joined (0: no limit)")
	var sec securityFlags
	sec.registerDispatcher(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *expect < 0 || *expectTimeout < 0 {
		return fmt.Errorf("%w: --expect and --expect-timeout must not be negative", errUsage)
	}
	keys, authorized, err := sec.dispatcherSecurity()
	if err != nil {
		return err
	}
	cfg, err := c.open(ctx, *listen, stderr)
	if err != nil {
		return err
	}
	cfg.Expect, cfg.ExpectTimeout = *expect, *expectTimeout
	// A supervisor restarted in the run's last second learns it is over.
	cfg.LateJoinWait = time.Second
	if *expectTimeout == 0 {
		cfg.ExpectTimeout = -1 // no limit
	}
	cfg.Keys, cfg.Authorized, cfg.Insecure = keys, authorized, sec.insecure
	summary, err := crawl(ctx, cfg, c.df.records, 0, func(d *dispatcher.Dispatcher) error {
		c.log.Info("dispatcher listening", "endpoint", d.Endpoint(), "mappings", c.set.Digest())
		return nil
	}, nil, c.ob, nil, stderr)
	err = errors.Join(err, c.close())
	if summary != nil {
		err = errors.Join(err, writeSummary(stdout, summary, c.df.summary))
	}
	return err
}

// cmdSupervisor runs one supervisor until it is stopped (SIGINT/SIGTERM),
// or with --exit-when-done until its dispatcher's run is finished.
func cmdSupervisor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("supervisor", stderr)
	var (
		lf logFlags
		mf mappingFlags
		sf storeFlags
		cf crawlerFlags
		of observeFlags
	)
	of.register(fs, false)
	lf.register(fs)
	mf.register(fs)
	sf.register(fs, "shared cache store for robots.txt, last-crawl times and DNS answers: a SQLite file path (default: STATE-DIR/results.db; the DNS answers then in STATE-DIR/dns.db)")
	cf.register(fs)
	cf.render.register(fs)
	host, _ := os.Hostname()
	name := fs.String("name", fmt.Sprintf("%s-%d", host, os.Getpid()), "this supervisor's name, unique in the cluster")
	dispatcherEP := fs.String("dispatcher", "tcp://127.0.0.1:5550", "the dispatcher's ZeroMQ endpoint")
	listen := fs.String("listen", "tcp://127.0.0.1:*", "ZeroMQ endpoint where this supervisor receives tasks")
	advertise := fs.String("advertise", "", "endpoint the dispatcher should dial for tasks (default: the bound --listen endpoint)")
	stateDir := new(string)
	stateDirFlag(fs, stateDir, defaultStateDir, "directory for the default cache store")
	exitWhenDone := fs.Bool("exit-when-done", false, "exit once the dispatcher's run is finished (default: keep running, a service waiting for the dispatcher's next run)")
	var sec securityFlags
	sec.registerSupervisor(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := cf.validate(); err != nil {
		return err
	}
	keys, dispatcherKey, err := sec.supervisorSecurity()
	if err != nil {
		return err
	}
	log, logFile, err := lf.logger(stderr, nil)
	if err != nil {
		return err
	}
	defer logFile.Close()
	set, err := mf.load()
	if err != nil {
		return err
	}
	mf.logLearned(log, set)
	st, err := sf.openLogged(ctx, *stateDir, log)
	if err != nil {
		return err
	}
	defer st.Close()
	// The DNS cache is kept where the host cache is. A supervisor given
	// --store shares it there with the cluster's others; one that keeps
	// its store in the state directory keeps the cache beside it.
	if uri, _ := sf.target(); uri != "" {
		if err := cf.shareNames(st, log); err != nil {
			return err
		}
	} else {
		closeNames, err := cf.openNames(ctx, *stateDir, log)
		if err != nil {
			return err
		}
		defer closeNames()
	}
	ob, err := of.start(log)
	if err != nil {
		return err
	}
	ob.names(cf.names)
	cfg := cf.supervisorConfig(*name, *dispatcherEP, set, st, log)
	cfg.Listen = *listen
	cfg.Advertise = *advertise
	cfg.Keys, cfg.DispatcherKey, cfg.Insecure = keys, dispatcherKey, sec.insecure
	// Every supervisor can also run host surveys, through the same guard
	// and blacklist as its fetches.
	prober := survey.NewProber(survey.ProberConfig{Fetch: cfg.Fetch, Logger: log})
	defer prober.Close()
	cfg.Prober = prober
	cfg.ExitWhenDone = *exitWhenDone
	s, err := supervisor.New(cfg)
	if err != nil {
		return errors.Join(err, ob.stop())
	}
	ob.supervisor(s, *name)
	log.Info("supervisor started", "name", *name, "tasks", s.Endpoint(), "dispatcher", *dispatcherEP, "workers", cf.workers)
	err = s.Run(ctx)
	obErr := ob.stop()
	if ctx.Err() != nil {
		return obErr // stopped by a signal: a clean exit
	}
	return errors.Join(err, obErr)
}
