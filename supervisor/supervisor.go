package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"backfill/etl"
	"backfill/fetch"
	"backfill/resolver"
	"backfill/robots"
	"backfill/store"
	"backfill/wire"
)

// Defaults for Config fields left zero.
const (
	DefaultWorkers     = 256
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

// extractSlots is how many pages are extracted at once: two a CPU, so a
// CPU is never idle for want of a parsed page while a worker sends its
// result.
func extractSlots() int { return 2 * runtime.GOMAXPROCS(0) }

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
	Workers    int    // concurrent fetches; default 256

	// Capacity is the most tasks held at once, queued or in progress, and
	// what the dispatcher is told it may have in flight here. Default
	// 8×Workers. A host waiting out its delay is kept by the dispatcher,
	// which sends its next task only a moment before it may go (it learns
	// when from each result's Ready): the tasks held are the requests in
	// flight and those due within that moment, so capacity, like the
	// workers, is sized to the request rate × a response's time, not to
	// the hosts waiting. 256 workers keep up with ~2,000 requests a
	// second at 100 ms a response and ~800 at 300 ms: 10,000 hosts at the
	// 15 s default delay, with room for the slow ones. A worker waiting
	// for a host costs a goroutine; a held task a few hundred bytes.
	// Bodies, the real memory, are bounded by Workers × the fetch body
	// cap, and the pages being extracted by the CPUs (extractSlots).
	Capacity int

	Mappings *etl.Set        // required; its digest is advertised
	Fetch    fetch.Config    // the supervisor builds its Fetcher from this
	Cache    store.HostCache // robots.txt and last-crawl caches; nil keeps them in memory only
	// Pages keeps the pages fetched, for a rerun whose mappings changed
	// to extract them anew (keep.go), within KeepBytes compressed
	// (default store.DefaultKeptBytes). Nil: nothing is kept.
	Pages     store.Pages
	KeepBytes int64
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
	Soft404Held   int64            // first pages that read like a not-found, held for their host's probe
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
	// Deferred counts tasks handed back unfetched until their host is
	// ready (deferred.go).
	Deferred int64
	// Kept counts the pages kept in Config.Pages, Unkept those that
	// could not be (keep.go).
	Kept, Unkept int64
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
	keeper  *keeper // nil when nothing is kept
	// extracting holds a token per page being extracted: Workers bound
	// the fetches, extractSlots the parses (result.go).
	extracting chan struct{}

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
	soft404Held   atomic.Int64
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
	// deferred counts tasks handed back until their host is ready
	// (deferred.go).
	deferred atomic.Int64
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
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("supervisor", cfg.Name)
	hs := newHealth(log, cfg.MaxBackoff, cfg.BackoffMin, cfg.Blacklist, cfg.MaxHosts)
	cfg.Fetch = cfg.fetchConfig(hs)
	in, out, err := cfg.sockets()
	if err != nil {
		return nil, err
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
	s := newSupervisor(cfg, log, hs, in, out, rend)
	if u, err := url.Parse(s.advert); err == nil && (strings.HasPrefix(u.Host, "0.0.0.0:") || strings.HasPrefix(u.Host, "[::]:")) {
		log.Warn("advertised endpoint is a wildcard address the dispatcher cannot dial; set Advertise", "endpoint", s.advert)
	}
	return s, nil
}

// withDefaults checks cfg and fills its zero fields with the defaults.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Mappings == nil {
		return cfg, errors.New("supervisor: no mappings")
	}
	if cfg.Dispatcher == "" {
		return cfg, errors.New("supervisor: no dispatcher endpoint")
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
			return cfg, fmt.Errorf("supervisor: %s %v is negative", d.name, d.v)
		}
	}
	if cfg.Workers < 0 || cfg.Capacity < 0 || cfg.MaxHosts < 0 {
		return cfg, fmt.Errorf("supervisor: workers %d, capacity %d and max hosts %d must not be negative", cfg.Workers, cfg.Capacity, cfg.MaxHosts)
	}
	if cfg.Name == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "supervisor"
		}
		cfg.Name = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	cfg.Listen = cmp.Or(cfg.Listen, "tcp://127.0.0.1:*")
	cfg.Workers = cmp.Or(cfg.Workers, DefaultWorkers)
	cfg.Capacity = cmp.Or(cfg.Capacity, DefaultCapacityPer*cfg.Workers)
	cfg.MaxHosts = max(cmp.Or(cfg.MaxHosts, DefaultMaxHosts), cfg.Capacity)
	switch {
	case cfg.DefaultDelay == 0:
		cfg.DefaultDelay = DefaultDelay
	case cfg.DefaultDelay < 0:
		cfg.DefaultDelay = 0 // NoDelay
	}
	cfg.MaxCrawlDelay = cmp.Or(cfg.MaxCrawlDelay, DefaultMaxCrawlDelay)
	cfg.RobotsTTL = min(cmp.Or(cfg.RobotsTTL, DefaultRobotsTTL), MaxRobotsTTL)
	cfg.Heartbeat = cmp.Or(cfg.Heartbeat, DefaultHeartbeat)
	cfg.HelloMax = cmp.Or(cfg.HelloMax, DefaultHelloMax)
	cfg.MaxBackoff = cmp.Or(cfg.MaxBackoff, DefaultMaxBackoff)
	cfg.BackoffMin = cmp.Or(cfg.BackoffMin, DefaultBackoffMin)
	cfg.RobotsRetry = cmp.Or(cfg.RobotsRetry, DefaultRobotsRetry)
	return cfg, nil
}

// fetchConfig is the fetcher's configuration: the user's, with the
// blacklist's ranges denied at dial time, the addresses the health
// registry blacklists during the run refused too, and the names
// resolved through the shared cache.
func (cfg Config) fetchConfig(hs *health) fetch.Config {
	fc := cfg.Fetch
	fc.Deny = append(slices.Clip(fc.Deny), cfg.Blacklist.Prefixes...)
	fc.MaxTransportHosts = cmp.Or(fc.MaxTransportHosts, cfg.MaxHosts)
	if user := fc.DenyAddr; user != nil {
		fc.DenyAddr = func(ap netip.AddrPort) string {
			if why := user(ap); why != "" {
				return why
			}
			return hs.addrRefused(ap)
		}
	} else {
		fc.DenyAddr = hs.addrRefused
	}
	if cfg.Names != nil {
		fc.Names = cfg.Names
	}
	return fc
}

// sockets binds the task socket and dials the dispatcher's intake, with
// the cluster's keys.
func (cfg Config) sockets() (*wire.Receiver, *wire.Sender, error) {
	var fromDispatcher []string
	if cfg.DispatcherKey != "" {
		fromDispatcher = []string{cfg.DispatcherKey}
	}
	in, err := wire.ListenSecure(cfg.Listen, wire.Security{Keys: cfg.Keys, Authorized: fromDispatcher, Insecure: cfg.Insecure})
	if err != nil {
		return nil, nil, fmt.Errorf("supervisor %s: task socket: %w", cfg.Name, err)
	}
	out, err := wire.DialSecure(cfg.Dispatcher, wire.Security{Keys: cfg.Keys, ServerKey: cfg.DispatcherKey, Insecure: cfg.Insecure})
	if err != nil {
		in.Close()
		return nil, nil, fmt.Errorf("supervisor %s: %w", cfg.Name, err)
	}
	return in, out, nil
}

// newSupervisor puts the parts together.
func newSupervisor(cfg Config, log *slog.Logger, hs *health, in *wire.Receiver, out *wire.Sender, rend *renderer) *Supervisor {
	cache := cfg.Cache
	if cache == nil {
		cache = newMemCache(cfg.MaxHosts, lastCrawlHorizon(cfg))
	}
	s := &Supervisor{
		cfg:        cfg,
		log:        log,
		started:    time.Now().UTC(),
		token:      robots.ProductToken(cfg.Fetch.UserAgent),
		endpoint:   in.Endpoint(),
		advert:     cmp.Or(cfg.Advertise, in.Endpoint()),
		digest:     cfg.Mappings.Digest(),
		in:         in,
		out:        out,
		fetcher:    fetch.New(cfg.Fetch),
		render:     rend,
		cache:      cache,
		sched:      newScheduler(cfg.Capacity, cfg.MaxHosts),
		extracting: make(chan struct{}, extractSlots()),
		keeper:     newKeeper(cfg.Pages, cfg.KeepBytes, log),
		welcome:    make(chan struct{}, 1),
		bye:        make(chan struct{}, 1),
		failed:     make(map[string]int64),

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
	return s
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

	kctx, stopKeeper := context.WithCancel(context.WithoutCancel(ctx))
	var kwg sync.WaitGroup
	kwg.Go(func() { s.keeper.run(kctx, stopGrace) })
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
	stopKeeper()     // the pages fetched are all handed over
	kwg.Wait()
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
	args := []any{"fetched", st.Fetched, "failed", st.Failed, "robots", st.RobotsFetched, "unsent", st.Unsent,
		"pages_kept", st.Kept, "pages_unkept", st.Unkept}
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
		Soft404Held:   s.soft404Held.Load(),
		Surveyed:      s.surveyed.Load(),
		Reanswered:    s.reanswered.Load(),
		Resent:        s.resent.Load(),
		Failed:        make(map[string]int64),
		Redirects:     s.redirects.snapshot(),
		HostInFlight:  s.inFlight.max(),
		Abandoned:     s.abandoned.Load(),
		Retried:       s.unansweredRetries.Load(),
		Deferred:      s.deferred.Load(),
	}
	st.Kept, st.Unkept = s.keeper.counts()
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
