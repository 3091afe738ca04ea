package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"backfill/dispatcher"
	"backfill/metrics"
	"backfill/resolver"
	"backfill/statuspage"
	"backfill/supervisor"
)

// observeFlags are a long-running process's windows for operators: its
// Prometheus metrics and, on a dispatcher, the live status page.
type observeFlags struct {
	metrics   string
	status    string
	insecure  bool
	cert, key string
	page      bool // a dispatcher's: the status page is served too
}

// register adds the flags; withStatus adds --status (dispatcher and run).
func (o *observeFlags) register(fs *flag.FlagSet, withStatus bool) {
	what := "Prometheus metrics at http://ADDR/metrics"
	o.page = withStatus
	if withStatus {
		what += " and the status page at /"
		fs.StringVar(&o.status, "status", "", "serve the live status page at http://ADDR/ (host:port, or :port on loopback; default: off)")
	}
	fs.StringVar(&o.metrics, "metrics", "", "serve "+what+" (host:port, or :port on loopback; default: off)")
	fs.BoolVar(&o.insecure, "metrics-insecure", false, "allow plaintext HTTP for --metrics and --status on a wildcard or public address")
	fs.StringVar(&o.cert, "metrics-cert", "", "PEM certificate: serve --metrics and --status over HTTPS")
	fs.StringVar(&o.key, "metrics-key", "", "PEM private key of --metrics-cert")
}

// observer serves a process's metrics and status page while it works.
// A nil observer (nothing asked for) takes every call and does nothing.
type observer struct {
	reg  *prometheus.Registry
	log  *slog.Logger
	disp atomic.Pointer[dispatcher.Dispatcher]
	urls []string // what is served where, for the demo to print

	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []error
}

// start opens the listeners asked for and serves them until stop. It
// fails at once on an address the rules refuse (see package metrics).
func (o *observeFlags) start(log *slog.Logger) (*observer, error) {
	if o.metrics == "" && o.status == "" {
		return nil, nil
	}
	opts := func(addr string) metrics.Options {
		return metrics.Options{Addr: addr, Insecure: o.insecure, CertFile: o.cert, KeyFile: o.key}
	}
	ob := &observer{reg: metrics.NewRegistry(), log: log}
	page := statuspage.Handler(ob.status, ob.feed)
	var servers []*metrics.Server
	for _, l := range []struct{ flag, addr string }{{"--metrics", o.metrics}, {"--status", o.status}} {
		if l.addr == "" {
			continue
		}
		srv, err := metrics.Listen(opts(l.addr))
		if err != nil {
			for _, s := range servers {
				s.Close()
			}
			if errors.Is(err, metrics.ErrPlaintext) {
				return nil, fmt.Errorf("%w: %s %s: %v (give --metrics-cert and --metrics-key, or --metrics-insecure)", errUsage, l.flag, l.addr, err)
			}
			return nil, fmt.Errorf("%s %s: %w", l.flag, l.addr, err)
		}
		if l.flag == "--metrics" {
			srv.HandleMetrics(ob.reg)
			ob.urls = append(ob.urls, "metrics: "+srv.URL()+"metrics")
			log.Info("metrics listening", "url", srv.URL()+"metrics")
		} else {
			log.Info("status page listening", "url", srv.URL())
		}
		if o.page {
			ob.urls = append(ob.urls, "status page: "+srv.URL())
		}
		if o.page {
			srv.Handle("/", page) // on --metrics too: one port is enough
		}
		if o.page && l.flag == "--metrics" {
			log.Info("status page listening", "url", srv.URL())
		}
		servers = append(servers, srv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ob.cancel = cancel
	for _, srv := range servers {
		ob.wg.Go(func() {
			if err := srv.Serve(ctx); err != nil {
				ob.mu.Lock()
				ob.errs = append(ob.errs, err)
				ob.mu.Unlock()
				log.Error("operator endpoint failed; the crawl goes on", "error", err)
			}
		})
	}
	return ob, nil
}

// status is the status page's source: the dispatcher's, once there is
// one.
func (ob *observer) status() (dispatcher.Status, bool) {
	d := ob.disp.Load()
	if d == nil {
		return dispatcher.Status{}, false
	}
	return d.Status(), true
}

// feed is the feed of settled records: the dispatcher's, once there is
// one.
func (ob *observer) feed(after int64, limit int) (dispatcher.Feed, bool) {
	d := ob.disp.Load()
	if d == nil {
		return dispatcher.Feed{}, false
	}
	return d.Settled(after, limit), true
}

// dispatcher makes d's metrics and status served.
func (ob *observer) dispatcher(d *dispatcher.Dispatcher) {
	if ob == nil {
		return
	}
	ob.reg.MustRegister(d.Collector())
	ob.disp.Store(d)
}

// supervisor makes s's metrics served, labelled with its name.
func (ob *observer) supervisor(s *supervisor.Supervisor, name string) {
	if ob == nil {
		return
	}
	metrics.Labeled(ob.reg, "supervisor", name).MustRegister(s.Collector())
}

// names makes the process's resolver metrics served (once: run's
// supervisors share one cache).
func (ob *observer) names(c *resolver.Cache) {
	if ob == nil || c == nil {
		return
	}
	ob.reg.MustRegister(c.Collector())
}

// stop ends the listeners and returns what made one fail, if anything.
func (ob *observer) stop() error {
	if ob == nil {
		return nil
	}
	ob.cancel()
	ob.wg.Wait()
	ob.mu.Lock()
	defer ob.mu.Unlock()
	return errors.Join(ob.errs...)
}
