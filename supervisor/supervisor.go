package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"backfill/backoff"
	"backfill/etl"
	"backfill/fetch"
	"backfill/resolver"
	"backfill/robots"
	"backfill/store"
	"backfill/wire"
)

// Defaults for Config fields left zero.
const (
	DefaultWorkers     = 64
	DefaultCapacityPer = 8 // tasks held per worker; see Config.Capacity
	DefaultDelay       = 15 * time.Second
	// NoDelay as Config.DefaultDelay means no pause between requests to a
	// host without Crawl-delay: for fixture webs and benchmarks only.
	NoDelay              time.Duration = -1
	DefaultMaxCrawlDelay               = 60 * time.Second
	DefaultRobotsTTL                   = time.Hour
	MaxRobotsTTL                       = 24 * time.Hour
	DefaultHeartbeat                   = 2 * time.Second
	DefaultHelloMax                    = 10 * time.Second
	// DefaultMaxHosts is Config.MaxHosts's default: a few thousand hosts'
	// state is a few MiB.
	DefaultMaxHosts = 8192
	// LastCrawlLag is how far the last-crawl times supervisors write to
	// the host cache may trail their requests (they write them behind):
	// another process that asks the same hosts takes a time it reads as
	// that much later.
	LastCrawlLag = lastCrawlFlush
)

const (
	helloStart    = 200 * time.Millisecond // first Hello back-off; doubles up to HelloMax
	helloAnswer   = time.Second            // how long a sent Hello waits for its Welcome
	sendSlice     = 250 * time.Millisecond // one Send attempt; shutdown is noticed between attempts
	resultTimeout = 10 * time.Second       // then the result is given up; the lease re-sends the task
	recvPoll      = 25 * time.Millisecond  // receive poll, bounds how long shutdown waits for the reader
	cacheTimeout  = 5 * time.Second        // one host cache read or write
	// lastCrawlFlush is how often buffered last-crawl times are written to
	// the host cache, and so how far behind the cache may be.
	lastCrawlFlush = 250 * time.Millisecond
)

// Config configures a Supervisor. Zero values take the defaults.
type Config struct {
	Name       string // unique supervisor name; default hostname-pid
	Dispatcher string // dispatcher intake endpoint, e.g. tcp://127.0.0.1:5550
	Listen     string // task socket bind endpoint; default "tcp://127.0.0.1:*"
	Advertise  string // endpoint the dispatcher dials; default the bound one
	Workers    int    // concurrent fetches; default 64

	// Capacity is the most tasks held at once, queued or in progress, and
	// what the dispatcher is told it may have in flight here. Default
	// 8×Workers. A host waiting out its delay is kept by the dispatcher,
	// which sends its next task only a moment before it may go (it learns
	// when from each result's Ready): the tasks held are the requests in
	// flight and those due within that moment, so capacity, like the
	// workers, is sized to the request rate × a response's time, not to
	// the hosts waiting. 64 workers keep up with ~600 requests a second
	// at 100 ms a response: 10,000 hosts at the 15 s default delay. A held
	// task costs a few hundred bytes; bodies, the real memory, are bounded
	// by Workers × the fetch body cap.
	Capacity int

	Mappings *etl.Set        // required; its digest is advertised
	Fetch    fetch.Config    // the supervisor builds its Fetcher from this
	Cache    store.HostCache // robots.txt and last-crawl caches; nil keeps them in memory only
	// Names resolves host names before their tasks reach a worker (see
	// names.go) and gives the fetchers their addresses. Nil: each fetch
	// looks its host up itself (Fetch.Resolver).
	Names *resolver.Cache

	DefaultDelay  time.Duration // between requests to a host without Crawl-delay; default 15s; NoDelay for none
	MaxCrawlDelay time.Duration // a longer Crawl-delay skips the host (class "crawl-delay"); default 60s
	RobotsTTL     time.Duration // robots.txt cache expiry; default 1h, at most 24h
	Heartbeat     time.Duration // default 2s
	HelloMax      time.Duration // Hello back-off ceiling while the dispatcher is not up; default 10s

	// Trouble (see health.go). A host that keeps failing backs off
	// exponentially from its delay (at least BackoffMin, default 1s) up to
	// MaxBackoff (default 10m), which also bounds how long a Retry-After
	// is waited for before its page is answered instead. A robots.txt
	// that failed is retried RobotsRetry later (default 1m), doubling up
	// to RobotsTTL.
	MaxBackoff  time.Duration
	BackoffMin  time.Duration
	RobotsRetry time.Duration
	// Blacklist is never fetched: its hosts (and their subdomains) are
	// answered "blacklisted", its IPs and CIDRs refused at dial time.
	Blacklist fetch.Blacklist
	// ContentSeen sends each page's text fingerprint with its result, so
	// the dispatcher can recognise duplicate pages and not expand them.
	// Off by default while it costs ~10% of a crawl's CPU.
	ContentSeen bool
	// NoSoft404 skips the per-host soft-404 probe (see soft404.go).
	NoSoft404 bool

	// MaxHosts bounds what the supervisor keeps in memory per host,
	// whatever the number of hosts a crawl meets: at most MaxHosts idle
	// hosts in the scheduler (hosts with tasks are bounded by Capacity),
	// hosts and as many addresses in trouble, soft-404 verdicts, and,
	// without a Cache, entries of the in-memory cache. Past it the least
	// recently used go, and what politeness needs of them is read again
	// from the cache (see "Memory" in the package doc). Default
	// DefaultMaxHosts, at least Capacity.
	MaxHosts int

	// Security. With Keys (this supervisor's CURVE pair), the dispatcher
	// is dialled as a CURVE server holding DispatcherKey's secret, and the
	// task socket is a CURVE server with Keys that accepts only
	// DispatcherKey; Hello advertises Keys.Public so the dispatcher can
	// dial it. Without keys both endpoints must be loopback unless
	// Insecure.
	Keys          wire.Keys
	DispatcherKey string
	Insecure      bool

	Logger *slog.Logger // nil discards

	// ExitWhenDone makes Run return (nil) once the dispatcher says its
	// run is finished (a Bye). Without it a supervisor is a long-lived
	// service: it waits, quietly, for the dispatcher's next run.
	ExitWhenDone bool

	// Render, when set, makes this a render node: New starts a bounded
	// pool of headless browser tabs, Hello and Heartbeat advertise it, and
	// tasks marked Render are loaded in the browser instead of fetched.
	// Its zero fields take the Fetch config's UserAgent, Resolve,
	// AllowLoopback and MaxBody, and the supervisor's Logger. Nil: no
	// rendering.
	Render *RenderConfig

	// Prober, when set, runs the host-survey tasks a survey's dispatcher
	// sends (survey.go); Hello advertises it. Nil: survey tasks are
	// answered with an error.
	Prober Prober
}

// Stats is a snapshot of a supervisor's counters.
type Stats struct {
	Fetched       int64            // pages fetched and run through the mappings
	Failed        map[string]int64 // tasks answered with a failure, by class
	RobotsFetched int64            // robots.txt requests made
	InFlight      int              // tasks queued or in progress
	Hosts         int              // hosts the scheduler holds state for
	Dropped       int64            // tasks refused because Capacity was reached
	Unsent        int64            // results that could not be sent (their lease re-sends the task)
	Registered    bool             // a Welcome (or a Task) has arrived
	Blacklisted   int64            // hosts and addresses blacklisted during the run for failing
	Soft404Probes int64            // invented-path requests made to detect soft 404s
	Surveyed      int64            // survey tasks probed and answered
	// Reanswered counts tasks sent again under a new lease (a dispatcher
	// that restarted before committing their results) and answered from
	// the answer already sent, without a request (answers.go).
	Reanswered int64
	// Resent counts answers sent again to a dispatcher that welcomed the
	// supervisor (a restarted one adopts those it has not committed).
	Resent int64
	// Retried counts pages asked again, as requests of their own after
	// the delay, because a kept-alive connection lost the request before
	// any answer (fetch.ErrUnanswered).
	Retried int64
	// Abandoned counts tasks dropped unanswered because the member's
	// lease on its hosts ran out, cut off from the dispatcher, or because
	// a new dispatcher process welcomed it (fence.go).
	Abandoned int64
	// Politeness: the redirects it met by what became of them
	// (wire.Redirect*; see redirectCounts), and the most requests that
	// were ever in flight to one host at once.
	Redirects    map[string]int64
	HostInFlight int

	Render *RenderStats // the browser pool's, nil when not a render node
}

// Supervisor runs the workers of one node. Create it with New, then call Run
// once.
type Supervisor struct {
	cfg      Config
	log      *slog.Logger
	started  time.Time
	token    string // robots.txt product token
	endpoint string // bound task endpoint
	advert   string // endpoint told to the dispatcher
	digest   string

	in      *wire.Receiver
	out     *wire.Sender
	fetcher *fetch.Fetcher
	lookups *lookups  // nil without Config.Names
	render  *renderer // nil when not a render node
	// On a render node: docs keeps the HTML of shells for their render
	// task (renderdocs.go), and renders owns the goroutines that finish
	// rendered pages off the workers.
	docs    *renderDocs
	renders sync.WaitGroup
	cache   store.HostCache
	sched   *scheduler

	health *health
	// hops: the redirect chains of tasks being followed on their host;
	// redirects counts what became of redirects; inFlight the requests
	// in flight per host (redirect.go, inflight.go).
	hops          hopChains
	redirects     redirectCounts
	inFlight      hostFlights
	fence         fence // the member's lease on its hosts (fence.go)
	soft404       *soft404s
	soft404Probes atomic.Int64
	// answers keeps the good answers sent lately, for tasks that come
	// back under a new lease (answers.go); reanswered counts those.
	answers    *answers
	reanswered atomic.Int64
	resent     atomic.Int64
	// abandoned counts tasks dropped when the lease ran out (fence.go).
	abandoned atomic.Int64
	// unansweredRetries counts pages asked again because a kept-alive
	// connection lost the request before any answer (afterFetch).
	unansweredRetries atomic.Int64
	// dispatcherGen is the process generation of the dispatcher that
	// last welcomed us (fence.go newDispatcher).
	dispatcherGen atomic.Int64

	// For operators: counters and histograms only metrics read (meter),
	// and each host's request pace (paces).
	meter *meter
	paces *paces

	registered atomic.Bool
	welcome    chan struct{} // size 1: a Welcome arrived
	bye        chan struct{} // size 1: the dispatcher's run finished

	fetched   atomic.Int64
	robots    atomic.Int64
	dropped   atomic.Int64
	unsent    atomic.Int64
	cacheErrs atomic.Int64
	failedMu  sync.Mutex
	failed    map[string]int64

	// Last-crawl times not yet written to the cache, host → end of the
	// latest request; see recordLastCrawl. lastFlushing is the batch
	// being written, until it is.
	lastMu       sync.Mutex
	lastPending  map[string]time.Time
	lastFlushing map[string]time.Time
	// flushMu orders flushes: one that returns has written every time
	// recorded before it was called (see reserve).
	flushMu sync.Mutex

	// Survey tasks in progress (survey.go): one slot each, at most
	// Capacity; their IDs, which heartbeats list.
	surveySlots chan struct{}
	surveyHeld  heldSurveys
	surveys     sync.WaitGroup
	surveyed    atomic.Int64

	runOnce   sync.Once
	closeOnce sync.Once
	closeErr  error
}

// New checks cfg, binds the task socket and dials the dispatcher (which
// need not be up yet: ZeroMQ connects in the background).
func New(cfg Config) (*Supervisor, error) {
	if cfg.Mappings == nil {
		return nil, errors.New("supervisor: no mappings")
	}
	if cfg.Dispatcher == "" {
		return nil, errors.New("supervisor: no dispatcher endpoint")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"max crawl delay", cfg.MaxCrawlDelay},
		{"robots TTL", cfg.RobotsTTL},
		{"heartbeat", cfg.Heartbeat},
		{"hello back-off ceiling", cfg.HelloMax},
		{"back-off ceiling", cfg.MaxBackoff},
		{"back-off base", cfg.BackoffMin},
		{"robots.txt retry", cfg.RobotsRetry},
	} {
		if d.v < 0 {
			return nil, fmt.Errorf("supervisor: %s %v is negative", d.name, d.v)
		}
	}
	if cfg.Workers < 0 || cfg.Capacity < 0 || cfg.MaxHosts < 0 {
		return nil, fmt.Errorf("supervisor: workers %d, capacity %d and max hosts %d must not be negative", cfg.Workers, cfg.Capacity, cfg.MaxHosts)
	}
	if cfg.Name == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "supervisor"
		}
		cfg.Name = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	if cfg.Listen == "" {
		cfg.Listen = "tcp://127.0.0.1:*"
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Capacity == 0 {
		cfg.Capacity = DefaultCapacityPer * cfg.Workers
	}
	if cfg.MaxHosts == 0 {
		cfg.MaxHosts = DefaultMaxHosts
	}
	cfg.MaxHosts = max(cfg.MaxHosts, cfg.Capacity)
	switch {
	case cfg.DefaultDelay == 0:
		cfg.DefaultDelay = DefaultDelay
	case cfg.DefaultDelay < 0:
		cfg.DefaultDelay = 0 // NoDelay
	}
	if cfg.MaxCrawlDelay == 0 {
		cfg.MaxCrawlDelay = DefaultMaxCrawlDelay
	}
	if cfg.RobotsTTL == 0 {
		cfg.RobotsTTL = DefaultRobotsTTL
	}
	cfg.RobotsTTL = min(cfg.RobotsTTL, MaxRobotsTTL)
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.HelloMax == 0 {
		cfg.HelloMax = DefaultHelloMax
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin = DefaultBackoffMin
	}
	if cfg.RobotsRetry == 0 {
		cfg.RobotsRetry = DefaultRobotsRetry
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("supervisor", cfg.Name)
	cache := cfg.Cache
	if cache == nil {
		cache = newMemCache(cfg.MaxHosts, lastCrawlHorizon(cfg))
	}
	hs := newHealth(log, cfg.MaxBackoff, cfg.BackoffMin, cfg.Blacklist, cfg.MaxHosts)
	cfg.Fetch.Deny = append(slices.Clip(cfg.Fetch.Deny), cfg.Blacklist.Prefixes...)
	if cfg.Fetch.MaxTransportHosts == 0 {
		cfg.Fetch.MaxTransportHosts = cfg.MaxHosts
	}
	if user := cfg.Fetch.DenyAddr; user != nil {
		cfg.Fetch.DenyAddr = func(ap netip.AddrPort) string {
			if why := user(ap); why != "" {
				return why
			}
			return hs.addrRefused(ap)
		}
	} else {
		cfg.Fetch.DenyAddr = hs.addrRefused
	}
	if cfg.Names != nil {
		cfg.Fetch.Names = cfg.Names
	}
	var fromDispatcher []string
	if cfg.DispatcherKey != "" {
		fromDispatcher = []string{cfg.DispatcherKey}
	}
	in, err := wire.ListenSecure(cfg.Listen, wire.Security{Keys: cfg.Keys, Authorized: fromDispatcher, Insecure: cfg.Insecure})
	if err != nil {
		return nil, fmt.Errorf("supervisor %s: task socket: %w", cfg.Name, err)
	}
	out, err := wire.DialSecure(cfg.Dispatcher, wire.Security{Keys: cfg.Keys, ServerKey: cfg.DispatcherKey, Insecure: cfg.Insecure})
	if err != nil {
		in.Close()
		return nil, fmt.Errorf("supervisor %s: %w", cfg.Name, err)
	}
	var rend *renderer
	if cfg.Render != nil {
		// Started here, not in Run: a node that cannot render says so at
		// once instead of registering as render-capable.
		rend, err = newRenderer(context.Background(), renderConfig(*cfg.Render, cfg.Fetch, log))
		if err != nil {
			in.Close()
			out.Close()
			return nil, fmt.Errorf("supervisor %s: %w", cfg.Name, err)
		}
	}
	s := &Supervisor{
		cfg:      cfg,
		log:      log,
		started:  time.Now().UTC(),
		token:    robots.ProductToken(cfg.Fetch.UserAgent),
		endpoint: in.Endpoint(),
		advert:   cfg.Advertise,
		digest:   cfg.Mappings.Digest(),
		in:       in,
		out:      out,
		fetcher:  fetch.New(cfg.Fetch),
		render:   rend,
		cache:    cache,
		sched:    newScheduler(cfg.Capacity, cfg.MaxHosts),
		welcome:  make(chan struct{}, 1),
		bye:      make(chan struct{}, 1),
		failed:   make(map[string]int64),

		lastPending: make(map[string]time.Time),

		health:      hs,
		soft404:     newSoft404s(cfg.MaxHosts),
		answers:     newAnswers(cfg.Capacity, answersBytes, answersTTL),
		surveySlots: make(chan struct{}, cfg.Capacity),
		meter:       newMeter(),
		paces:       newPaces(),
	}
	if rend != nil {
		s.docs = newRenderDocs(renderDocsMax, renderDocsBytes, renderDocsTTL)
	}
	hs.spill = s.recordLastCrawl
	if cfg.Names != nil {
		s.lookups = newLookups(cfg.Names, s.fetcher, s.sched, hs.refused)
		s.sched.names = s.lookups
	}
	if s.advert == "" {
		s.advert = s.endpoint
	}
	if u, err := url.Parse(s.advert); err == nil && (strings.HasPrefix(u.Host, "0.0.0.0:") || strings.HasPrefix(u.Host, "[::]:")) {
		log.Warn("advertised endpoint is a wildcard address the dispatcher cannot dial; set Advertise", "endpoint", s.advert)
	}
	return s, nil
}

// Endpoint is the bound task endpoint, with the port resolved.
func (s *Supervisor) Endpoint() string { return s.endpoint }

// errDone ends Run without an error: the dispatcher's run is finished and
// Config.ExitWhenDone is set.
var errDone = errors.New("supervisor: the dispatcher's run is finished")

// stopGrace bounds what a stopping supervisor still does: send the
// results of the pages it has fetched (so they are not fetched again), and
// write the last-crawl times of its hosts. Stopping takes at most about
// twice this.
const stopGrace = 750 * time.Millisecond

// Run registers with the dispatcher and works until ctx is done, one of its
// goroutines fails (the task socket breaks: it would go on heart-beating
// while deaf to tasks), or, with Config.ExitWhenDone, the dispatcher's run
// is finished. It then stops every goroutine it started, sends the
// results of the pages already fetched, and closes the sockets. Tasks
// still queued are dropped: their leases expire and the dispatcher sends
// them again. Run returns the goroutine's error, nil otherwise; it may be
// called once.
func (s *Supervisor) Run(ctx context.Context) error {
	ran := false
	s.runOnce.Do(func() { ran = true })
	if !ran {
		return errors.New("supervisor: Run called twice")
	}
	s.log.Info("supervisor starting", "endpoint", s.advert, "dispatcher", s.cfg.Dispatcher,
		"workers", s.cfg.Workers, "capacity", s.cfg.Capacity, "mappings", s.digest, "render", s.render != nil)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.receive(gctx) })
	g.Go(func() error { s.talk(gctx); return nil })
	g.Go(func() error { s.flushLoop(gctx); return nil })
	for range s.cfg.Workers {
		g.Go(func() error { s.work(gctx); return nil })
	}
	<-gctx.Done()
	s.sched.stop()
	s.stopLookups()
	runErr := g.Wait()
	s.surveys.Wait() // the reader that starts them has stopped
	s.renders.Wait() // their requests fail at once with the workers gone
	if errors.Is(runErr, errDone) {
		runErr = nil
	}
	// The workers are done: write the times of their last requests, so a
	// supervisor that takes the hosts over knows them.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopGrace)
	s.flushLastCrawls(fctx)
	cancel()
	st := s.Stats() // before Close, which ends the browser
	err := s.Close()
	args := []any{"fetched", st.Fetched, "failed", st.Failed, "robots", st.RobotsFetched, "unsent", st.Unsent}
	if r := st.Render; r != nil {
		args = append(args, "rendered", r.Rendered, "render_failed", r.Failed,
			"render_restarts", r.Restarts, "render_rss", renderMemory(*r))
	}
	s.log.Info("supervisor stopped", args...)
	return errors.Join(runErr, err)
}

// Close releases the sockets, the fetcher and the browser (no process of
// it is left when Close returns). Run calls it on the way out;
// call it yourself only when Run is never called.
func (s *Supervisor) Close() error {
	s.closeOnce.Do(func() {
		s.sched.stop()
		s.stopLookups()
		s.fetcher.Close()
		var rerr error
		if s.render != nil {
			rerr = s.render.Close()
		}
		s.closeErr = errors.Join(s.in.Close(), s.out.Close(), rerr)
	})
	return s.closeErr
}

// Stats returns a snapshot of the counters. Safe for concurrent use.
func (s *Supervisor) Stats() Stats {
	held, hosts := s.sched.counts()
	st := Stats{
		Fetched:       s.fetched.Load(),
		RobotsFetched: s.robots.Load(),
		InFlight:      held,
		Hosts:         hosts,
		Dropped:       s.dropped.Load(),
		Unsent:        s.unsent.Load(),
		Registered:    s.registered.Load(),
		Blacklisted:   s.health.blacklisted.Load(),
		Soft404Probes: s.soft404Probes.Load(),
		Surveyed:      s.surveyed.Load(),
		Reanswered:    s.reanswered.Load(),
		Resent:        s.resent.Load(),
		Failed:        make(map[string]int64),
		Redirects:     s.redirects.snapshot(),
		HostInFlight:  s.inFlight.max(),
		Abandoned:     s.abandoned.Load(),
		Retried:       s.unansweredRetries.Load(),
	}
	s.failedMu.Lock()
	for k, v := range s.failed {
		st.Failed[k] = v
	}
	s.failedMu.Unlock()
	if s.render != nil {
		rs := s.render.Stats()
		st.Render = &rs
	}
	return st
}

func (s *Supervisor) countFailed(class string) {
	s.failedMu.Lock()
	s.failed[class]++
	s.failedMu.Unlock()
}

func (s *Supervisor) failedTotal() int64 {
	s.failedMu.Lock()
	defer s.failedMu.Unlock()
	var n int64
	for _, v := range s.failed {
		n += v
	}
	return n
}

// hello is what the supervisor says about itself in Hello and Heartbeat.
func (s *Supervisor) hello() wire.Hello {
	return wire.Hello{
		Supervisor: s.cfg.Name,
		Endpoint:   s.advert,
		Capacity:   s.cfg.Capacity,
		Render:     s.render != nil,
		Mappings:   s.digest,
		Started:    s.started,
		Key:        s.cfg.Keys.Public,
		Survey:     s.cfg.Prober != nil,
		MaxRequest: s.maxRequest(),
		Busy:       s.inFlight.hosts(),
	}
}

// maxRequest is the longest one request may take here: the fetcher's
// deadline.
func (s *Supervisor) maxRequest() time.Duration {
	if s.cfg.Fetch.Timeout > 0 {
		return s.cfg.Fetch.Timeout
	}
	return fetch.DefaultTimeout
}

// receive owns the task socket: it reads Welcomes, Tasks and Byes until
// ctx is done. A socket that fails is fatal: Run stops with its error. A
// Bye ends it with errDone under Config.ExitWhenDone; otherwise talk goes
// back to waiting for a dispatcher.
func (s *Supervisor) receive(ctx context.Context) error {
	for ctx.Err() == nil {
		kind, v, err := s.in.Recv(recvPoll)
		switch {
		case errors.Is(err, wire.ErrTimeout):
			continue
		case errors.Is(err, wire.ErrBadFrame):
			s.log.Warn("bad frame on task socket dropped", "error", err)
			continue
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("supervisor %s: task socket: %w", s.cfg.Name, err)
		}
		switch kind {
		case wire.KindWelcome:
			w := v.(*wire.Welcome)
			s.log.Info("registered with dispatcher", "dispatcher", w.Dispatcher, "run", w.Run)
			s.newDispatcher(w.Gen)
			s.renewed(w.Seq, w.Lease)
			s.markRegistered()
			s.resendAnswers(ctx)
		case wire.KindRenew:
			r := v.(*wire.Renew)
			s.renewed(r.Seq, r.Lease)
		case wire.KindTask:
			s.markRegistered()
			s.accept(ctx, v.(*wire.Task))
		case wire.KindSurveyTask:
			s.markRegistered()
			s.acceptSurvey(ctx, v.(*wire.SurveyTask))
		case wire.KindBye:
			b := v.(*wire.Bye)
			if s.cfg.ExitWhenDone {
				s.log.Info("the dispatcher's run is finished; exiting", "dispatcher", b.Dispatcher, "run", b.Run)
				return errDone
			}
			s.log.Info("the dispatcher's run is finished; waiting for its next run", "dispatcher", b.Dispatcher, "run", b.Run)
			s.registered.Store(false)
			// No host is held until the next run: nothing to fence.
			s.fence.grant(0, 0)
			// Task IDs are stable within a run only: the next run's
			// tasks ask afresh.
			s.answers.clear()
			select {
			case s.bye <- struct{}{}:
			default:
			}
		default:
			s.log.Warn("unexpected message on task socket dropped", "kind", kind.String())
		}
	}
	return nil
}

// markRegistered notes that the dispatcher knows us: a Welcome, or a Task
// (a dispatcher only sends tasks to members).
func (s *Supervisor) markRegistered() {
	s.registered.Store(true)
	select {
	case s.welcome <- struct{}{}:
	default:
	}
}

// accept queues a task on its host, or answers it at once when its URL is
// unusable.
func (s *Supervisor) accept(ctx context.Context, t *wire.Task) {
	hostName, err := taskHost(t.URL)
	if err != nil {
		s.log.Debug("task refused", "task", t.ID, "url", t.URL, "host", t.Host, "class", fetch.ClassURL, "error", err)
		s.countFailed(string(fetch.ClassURL))
		s.sendResult(ctx, &wire.Result{
			TaskID: t.ID, Lease: t.Lease, Supervisor: s.cfg.Name, URL: t.URL,
			Class: string(fetch.ClassURL), Error: err.Error(), FetchedAt: time.Now().UTC(),
		})
		return
	}
	if res := s.answers.answer(t); res != nil {
		// Answered already, under a lease a restarted dispatcher
		// forgot: the answer goes again, the host is not asked again.
		s.reanswer(ctx, res)
		return
	}
	if _, err := s.sched.add(hostName, t); err != nil {
		if errors.Is(err, errFull) {
			if n := s.dropped.Add(1); n == 1 || n%100 == 0 {
				s.log.Warn("task dropped: at capacity (its lease will bring it back)",
					"task", t.ID, "url", t.URL, "capacity", s.cfg.Capacity, "dropped", n)
			}
		}
	}
}

// taskHost is the politeness key of a task URL: lower-case host[:port],
// with the scheme's default port dropped. It is taken from the URL itself,
// because that is where the request goes.
func taskHost(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("task url %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("task url %q: scheme %q is not http(s)", raw, u.Scheme)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("task url %q: no host", raw)
	}
	return fetch.HostKey(u), nil
}

// talk owns the outgoing side's schedule: Hello with back-off until the
// dispatcher answers, then a Heartbeat every interval. Workers send Results
// on the same Sender themselves (it is safe for concurrent use).
func (s *Supervisor) talk(ctx context.Context) {
	if !s.register(ctx, false) {
		return
	}
	tick := time.NewTicker(s.cfg.Heartbeat)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.bye:
			// Its run is over: no heartbeats to a dispatcher that is
			// gone, only a quiet Hello now and then for the next one.
			if !s.register(ctx, true) {
				return
			}
			failing = false
			continue
		case <-tick.C:
		}
		err := s.send(ctx, wire.KindHeartbeat, s.heartbeat(), s.cfg.Heartbeat)
		s.fenceCheck(time.Now())
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			failing = true
			s.log.Warn("dispatcher not taking heartbeats; still trying", "dispatcher", s.cfg.Dispatcher, "error", err)
		case err == nil && failing:
			failing = false
			s.log.Info("dispatcher taking heartbeats again", "dispatcher", s.cfg.Dispatcher)
		}
	}
}

// register sends Hello until a Welcome arrives, backing off from 200ms,
// doubling, up to HelloMax, with jitter (so supervisors that started
// together do not call together). It reports false when ctx ended first.
// It says so when the dispatcher does not answer: at once, with a hint at
// the keys after the first few attempts, and then only now and then, or
// never when quiet (waiting for a dispatcher's next run).
func (s *Supervisor) register(ctx context.Context, quiet bool) bool {
	pause := backoff.New(min(helloStart, s.cfg.HelloMax), s.cfg.HelloMax)
	answer := min(helloAnswer, s.cfg.HelloMax)
	for attempt := 1; ; attempt++ {
		h := s.hello()
		h.Seq = s.fence.sending(time.Now())
		err := s.send(ctx, wire.KindHello, h, answer)
		if ctx.Err() != nil {
			return false
		}
		if err == nil && s.awaitWelcome(ctx, answer) {
			return true
		}
		if s.registered.Load() {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		wait := pause.Next()
		s.noAnswer(attempt, quiet, wait, err)
		if s.awaitWelcome(ctx, wait) {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
	}
}

// hintAfter is the attempt after which a supervisor that gets no answer
// says what to check; noAnswerEvery is how often it says so again.
const (
	hintAfter     = 3
	noAnswerEvery = 20
)

// noAnswer reports a Hello left unanswered. A CURVE handshake the
// dispatcher refuses looks exactly like a dispatcher that is not there,
// so with keys the hint names both.
func (s *Supervisor) noAnswer(attempt int, quiet bool, wait time.Duration, err error) {
	wait = wait.Round(time.Millisecond)
	args := []any{"dispatcher", s.cfg.Dispatcher, "retry_in", wait, "attempts", attempt}
	if err != nil {
		args = append(args, "error", err)
	}
	switch {
	case quiet:
		s.log.Debug("waiting for the dispatcher's next run", args...)
	case attempt == hintAfter && !s.cfg.Keys.IsZero():
		args = append(args, "our_key", s.cfg.Keys.Public, "dispatcher_key", s.cfg.DispatcherKey)
		s.log.Warn(fmt.Sprintf("no answer from %s: check the dispatcher's public key and that ours is authorised", s.cfg.Dispatcher), args...)
	case attempt == hintAfter:
		s.log.Warn(fmt.Sprintf("no answer from %s: check that the dispatcher runs there and that this host can reach it", s.cfg.Dispatcher), args...)
	case attempt == 1 || attempt%noAnswerEvery == 0:
		s.log.Warn(fmt.Sprintf("dispatcher not answering at %s; retrying in %v", s.cfg.Dispatcher, wait), args...)
	default:
		s.log.Debug("dispatcher not answering", args...)
	}
}

// awaitWelcome waits up to d for a Welcome.
func (s *Supervisor) awaitWelcome(ctx context.Context, d time.Duration) bool {
	if s.registered.Load() {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.welcome:
		return true
	case <-t.C:
		return s.registered.Load()
	case <-ctx.Done():
		return false
	}
}

func (s *Supervisor) heartbeat() wire.Heartbeat {
	held, _ := s.sched.counts()
	hb := wire.Heartbeat{
		Hello:    s.hello(),
		InFlight: held,
		Fetched:  s.fetched.Load(),
		Failed:   s.failedTotal(),
		RSS:      rss(),
		At:       time.Now().UTC(),
		Surveys:  s.surveyHeld.list(),
		DNS:      s.dnsStats(),

		HostInFlight: s.inFlight.max(),
		Repeated:     s.repeated(),
		Retried:      s.unansweredRetries.Load(),
	}
	hb.Seq = s.fence.sending(time.Now())
	if s.render != nil {
		rs := s.render.Stats()
		hb.RenderRSS = renderMemory(rs)
		hb.Rendered = rs.Rendered
	}
	for i, name := range robotsOutcomes {
		if n := s.meter.robots[i].Load(); n > 0 {
			if hb.Robots == nil {
				hb.Robots = make(map[string]int64, len(robotsOutcomes))
			}
			hb.Robots[name] = n
		}
	}
	hb.Hosts = s.paces.report()
	hb.Backoff = s.health.backoffs(time.Now(), reportBackoff)
	return hb
}

// renderMemory is what a heartbeat reports of the browser's memory: the
// proportional set size of its process tree (its real cost), else the
// resident set size where the kernel has no PSS.
func renderMemory(st RenderStats) uint64 {
	if st.PSS > 0 {
		return st.PSS
	}
	return st.RSS
}

// renderConfig fills the zero fields of a render node's RenderConfig from
// the supervisor's fetch settings, so the browser identifies itself as the
// fetcher does and keeps as much of a page.
func renderConfig(rc RenderConfig, fc fetch.Config, log *slog.Logger) RenderConfig {
	if rc.UserAgent == "" {
		rc.UserAgent = fc.UserAgent
	}
	if rc.MaxBody == 0 {
		rc.MaxBody = fc.MaxBody
	}
	if rc.Logger == nil {
		rc.Logger = log
	}
	return rc
}

// send tries to queue one message for up to total, in short attempts so a
// shutdown is noticed quickly and other senders get their turn on the
// shared Sender.
func (s *Supervisor) send(ctx context.Context, kind wire.Kind, v any, total time.Duration) error {
	deadline := time.Now().Add(total)
	for {
		slice := min(sendSlice, time.Until(deadline))
		if slice <= 0 {
			slice = time.Millisecond
		}
		err := s.out.Send(kind, v, slice)
		if err == nil || !errors.Is(err, wire.ErrTimeout) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !time.Now().Before(deadline) {
			return err
		}
	}
}

// sendResult sends one Result; one that cannot be sent is counted and
// left to the lease.
func (s *Supervisor) sendResult(ctx context.Context, r *wire.Result) {
	err := s.send(ctx, wire.KindResult, r, resultTimeout)
	if err == nil {
		return
	}
	if ctx.Err() != nil {
		return // shutting down: the lease covers it
	}
	// While the dispatcher is away every result fails alike: say it the
	// first time and every hundredth after.
	if n := s.unsent.Add(1); n == 1 || n%100 == 0 {
		s.log.Warn("result not sent; its lease will re-send the task", "task", r.TaskID, "url", r.URL, "class", r.Class, "error", err, "unsent", n)
	}
}

// lastCrawlBatcher is a host cache that writes many last-crawl times at
// once (the SQLite store does, in one transaction).
type lastCrawlBatcher interface {
	PutLastCrawls(ctx context.Context, times map[string]time.Time) error
}

// recordLastCrawl buffers the end of a request to host for the cache. The
// supervisor keeps the times of the hosts it crawls in memory (the
// scheduler's host state), which is what its own politeness runs on; the
// cache is for whoever crawls the host next. Writing it on every request
// put one write transaction per page on the store's single writer, which
// every worker then queued for; flushLoop writes the buffer in one batch
// per lastCrawlFlush instead. The buffer holds at most one entry per host
// crawled within one interval.
func (s *Supervisor) recordLastCrawl(host string, end time.Time) {
	end = end.UTC() // as the cache keeps it; a batch is not changed once taken
	s.lastMu.Lock()
	if end.After(s.lastPending[host]) {
		s.lastPending[host] = end
	}
	s.lastMu.Unlock()
}

// pendingLastCrawl is the time buffered for host and not yet in the
// cache, if any: a host the scheduler forgot and that comes back within
// a flush interval finds its latest request here.
func (s *Supervisor) pendingLastCrawl(host string) (time.Time, bool) {
	s.lastMu.Lock()
	defer s.lastMu.Unlock()
	at, ok := s.lastPending[host]
	if f, fok := s.lastFlushing[host]; fok && f.After(at) {
		at, ok = f, true
	}
	return at, ok
}

// lastCrawlHorizon is how long a last-crawl time may matter to
// politeness: the longest delay honoured, padded as an inherited time is
// (nextStart). An older time spaces out no request.
func lastCrawlHorizon(cfg Config) time.Duration {
	return max(cfg.DefaultDelay, cfg.MaxCrawlDelay) + lastCrawlFlush
}

// reserve writes to the cache that a request to h starts now, before it
// goes out, when the host has a delay to keep. The write-behind of
// recordLastCrawl is not enough when the host changes owner: a supervisor
// killed before its next flush takes its latest requests with it, and the
// host's next owner (or its own restarted self, which gets its hosts back
// at once) would read an older time and request the host again too soon.
// A reservation is in the cache before the request can reach the host, so
// whoever crawls the host next keeps the delay from at least its start.
// Reservations of concurrent workers share one write (flushMu).
func (s *Supervisor) reserve(ctx context.Context, h *host, delay time.Duration) {
	if delay <= 0 {
		return // nothing to space out
	}
	s.recordLastCrawl(h.name, time.Now())
	fctx, cancel := context.WithTimeout(ctx, cacheTimeout)
	s.flushLastCrawls(fctx)
	cancel()
}

// flushLoop writes the buffered last-crawl times every lastCrawlFlush
// until ctx is done (Run writes what is left once the workers stop).
func (s *Supervisor) flushLoop(ctx context.Context) {
	tick := time.NewTicker(lastCrawlFlush)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			fctx, cancel := context.WithTimeout(ctx, cacheTimeout)
			s.flushLastCrawls(fctx)
			cancel()
		}
	}
}

// flushLastCrawls writes the buffered times to the cache: in one batch
// when the cache can, else host by host. Times that fail are put back to
// be tried at the next flush (unless a later time came meanwhile); a
// panicking cache is contained and its batch given up, since the times
// only help a future owner of the hosts. A flush cut short because the
// supervisor is stopping (ctx cancelled, not timed out) is no failure of
// the cache: its times go back for Run's last flush, unreported.
func (s *Supervisor) flushLastCrawls(ctx context.Context) {
	stopping := func() bool { return errors.Is(ctx.Err(), context.Canceled) }
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.lastMu.Lock()
	batch := s.lastPending
	if len(batch) == 0 {
		s.lastMu.Unlock()
		return
	}
	s.lastPending = make(map[string]time.Time, len(batch))
	s.lastFlushing = batch
	s.lastMu.Unlock()

	failed := make(map[string]time.Time)
	defer func() {
		s.lastMu.Lock()
		s.lastFlushing = nil
		s.lastMu.Unlock()
		if v := recover(); v != nil {
			s.log.Error("panic while writing last-crawl times recovered", "hosts", len(batch), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			return
		}
		if len(failed) > 0 && (ctx.Err() == nil || stopping()) {
			// Kept for the next flush while they may still matter, so
			// a cache that stays down does not make the buffer grow
			// with every host crawled.
			stale := time.Now().Add(-lastCrawlHorizon(s.cfg))
			for h, at := range failed {
				if at.After(stale) {
					s.recordLastCrawl(h, at)
				}
			}
		}
	}()
	if b, ok := s.cache.(lastCrawlBatcher); ok {
		if err := b.PutLastCrawls(ctx, batch); err != nil {
			if !stopping() {
				s.cacheFailed("put last crawls", fmt.Sprintf("%d hosts", len(batch)), err)
			}
			failed = batch
		}
		return
	}
	for h, at := range batch {
		if err := s.cache.PutLastCrawl(ctx, h, at); err != nil {
			if !stopping() {
				s.cacheFailed("put last crawl", h, err)
			}
			failed[h] = at
		}
	}
}

// rss reads the resident set size of this process, 0 where unknown.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	var pages uint64
	if _, err := fmt.Sscan(f[1], &pages); err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}
