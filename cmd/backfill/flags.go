package main

import (
	"context"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/term"
	"gopkg.in/natefinch/lumberjack.v2"

	"backfill/dispatcher"
	"backfill/etl"
	"backfill/fetch"
	"backfill/learn"
	"backfill/mappings"
	"backfill/resolver"
	"backfill/store"
	"backfill/supervisor"
)

// version is stamped into the User-Agent.
const version = "0.1"

// defaultContact is where site operators learn what the crawler does. Users
// running real crawls set their own with --contact, and host the page
// `backfill about` writes there; about and provision refuse this one.
const defaultContact = "https://backfill.invalid/about-the-crawler"

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("backfill "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses args and turns flag errors into usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}

// logFlags build the process logger: log/slog, text or JSON, to stderr
// or to a file rotated by size and age.
type logFlags struct {
	level      string
	format     string
	file       string
	maxSize    int
	maxAge     int
	maxBackups int
}

// Log rotation defaults: a busy crawl at debug level writes a few hundred
// MiB a day, so a file is kept to logMaxSize and the backups, compressed,
// to a bounded number and age.
const (
	logMaxSize    = 100 // MiB
	logMaxAge     = 28  // days
	logMaxBackups = 10
)

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&l.format, "log-format", "auto", "log format: text, json, or auto (text on a terminal, JSON otherwise and in --log-file)")
	fs.StringVar(&l.file, "log-file", "", "log to this file instead of stderr, rotated by size and age into compressed backups beside it")
	fs.IntVar(&l.maxSize, "log-max-size", logMaxSize, "with --log-file: MiB a log file grows to before it is rotated")
	fs.IntVar(&l.maxAge, "log-max-age", logMaxAge, "with --log-file: days a rotated backup is kept (0: no age limit)")
	fs.IntVar(&l.maxBackups, "log-max-backups", logMaxBackups, "with --log-file: rotated backups kept (0: no count limit)")
}

// logger opens the log: to --log-file when given, else to stderr, through
// term when stderr is a terminal showing a progress line (so log lines
// never print over it). The closer ends the log file; it is a no-op for
// stderr.
func (l *logFlags) logger(stderr io.Writer, term *terminal) (*slog.Logger, io.Closer, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, nil, fmt.Errorf("%w: --log-level %q: %v", errUsage, l.level, err)
	}
	if l.maxSize < 1 || l.maxAge < 0 || l.maxBackups < 0 {
		return nil, nil, fmt.Errorf("%w: --log-max-size must be positive, --log-max-age and --log-max-backups not negative", errUsage)
	}
	var (
		w                = stderr
		closer io.Closer = nopCloser{}
		text   bool
	)
	if term != nil {
		w = term
	}
	switch l.format {
	case "auto":
		text = l.file == "" && isTerminal(stderr)
	case "text":
		text = true
	case "json":
	default:
		return nil, nil, fmt.Errorf("%w: --log-format must be text, json or auto, not %q", errUsage, l.format)
	}
	if l.file != "" {
		if err := os.MkdirAll(filepath.Dir(l.file), 0o755); err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		// Opened now, so a path that cannot be written fails the start
		// instead of the first log line.
		f, err := os.OpenFile(l.file, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		f.Close()
		lj := &lumberjack.Logger{Filename: l.file, MaxSize: l.maxSize, MaxAge: l.maxAge, MaxBackups: l.maxBackups, Compress: true}
		w, closer = lj, lj
	}
	opts := &slog.HandlerOptions{Level: level}
	if text {
		return slog.New(slog.NewTextHandler(w, opts)), closer, nil
	}
	return slog.New(slog.NewJSONHandler(w, opts)), closer, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// mappingFlags loads the mapping set: a directory, or the bundled ones,
// and the learned mappings only when --use-learned names them.
type mappingFlags struct {
	dir     string
	learned string
}

func (m *mappingFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.dir, "mappings", "", "directory of JSON site mappings (default: the bundled mappings)")
	fs.StringVar(&m.learned, "use-learned", "", "also load the mappings `backfill mappings learn` wrote into this directory (never loaded otherwise); give the dispatcher and every supervisor the same")
}

func (m *mappingFlags) load() (*etl.Set, error) {
	set, err := loadMappingDir(m.dir)
	if err != nil {
		return nil, err
	}
	if m.learned == "" {
		return set, m.fillable(set)
	}
	if m.learned == m.dir {
		return nil, fmt.Errorf("%w: --use-learned names the --mappings directory", errUsage)
	}
	learned, err := loadMappingDir(m.learned)
	if err != nil {
		return nil, fmt.Errorf("--use-learned: %w", err)
	}
	if len(learned.Mappings()) == 0 {
		return nil, fmt.Errorf("--use-learned %s: no mappings there", m.learned)
	}
	merged, err := etl.Merge(set, learned)
	if err != nil {
		return nil, fmt.Errorf("--use-learned %s: %w", m.learned, err)
	}
	return merged, m.fillable(merged)
}

// fillable refuses a mapping set that could fill nothing: no mapping at
// all (an empty folder), or none with a field; every record would count
// as already complete.
func (m *mappingFlags) fillable(set *etl.Set) error {
	where, hold := "the mappings directory "+m.dir, "holds"
	if m.learned != "" {
		where, hold = where+" and the learned mappings in "+m.learned, "hold"
	}
	switch {
	case len(set.Mappings()) == 0:
		return fmt.Errorf("%s %s no mapping (*.json files; see docs/mappings.md)", where, hold)
	case len(set.FieldNames()) == 0:
		return fmt.Errorf("mappings in %s have no fields: nothing could be filled (a mapping's \"fields\" lists what it extracts)", where)
	}
	return nil
}

// logLearned says that learned mappings are in use, so no crawl uses
// them without its log saying so.
func (m *mappingFlags) logLearned(log *slog.Logger, set *etl.Set) {
	if m.learned != "" {
		log.Info("using learned mappings", "dir", m.learned, "mappings", len(set.Mappings()), "digest", set.Digest())
	}
}

// loadMappingDir loads dir, or the bundled mappings when dir is "".
func loadMappingDir(dir string) (*etl.Set, error) {
	if dir == "" {
		set, err := etl.LoadFS(mappings.FS, ".")
		if err != nil {
			return nil, fmt.Errorf("load bundled mappings: %w", err)
		}
		return set, nil
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("mappings directory: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("mappings directory %s: not a directory", dir)
	}
	set, err := etl.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("load mappings from %s:\n%w", dir, err)
	}
	return set, nil
}

// storeFlags opens the results store: a SQLite file, or MongoDB with
// its TLS files and timeouts. The URI comes from --store or, so that a
// password in it stays out of the command line (which every local user
// can read in /proc), from the file --store-file names.
type storeFlags struct {
	uri      string
	file     string
	caFile   string
	certFile string
	keyFile  string
	timeout  time.Duration
	retryFor time.Duration
	drain    time.Duration // registered by registerDrain only
}

func (s *storeFlags) register(fs *flag.FlagSet, what string) {
	fs.StringVar(&s.uri, "store", "", what+"; or a MongoDB URI, mongodb://[user:password@]host[:port]/database[?options] (also mongodb+srv://), whose options may set TLS and authentication")
	fs.StringVar(&s.file, "store-file", "", "read --store from this file instead (one line; # comments): a password in it stays out of the command line; the file must be readable by its owner only (mode 0600)")
	fs.StringVar(&s.caFile, "store-ca-file", "", "MongoDB: PEM file of the CAs that sign the server's certificate (turns TLS on)")
	fs.StringVar(&s.certFile, "store-cert", "", "MongoDB: PEM client certificate for TLS client authentication, with its key unless --store-key is given (turns TLS on)")
	fs.StringVar(&s.keyFile, "store-key", "", "MongoDB: PEM private key of --store-cert, when not in the same file")
	fs.DurationVar(&s.timeout, "store-timeout", 10*time.Second, "MongoDB: deadline of one attempt of a store operation, connecting included")
	fs.DurationVar(&s.retryFor, "store-retry", 30*time.Second, "MongoDB: how long an operation is retried with back-off while the server cannot be reached (0: not retried)")
}

// registerDrain adds the dispatcher's --store-drain-timeout.
func (s *storeFlags) registerDrain(fs *flag.FlagSet) {
	fs.DurationVar(&s.drain, "store-drain-timeout", dispatcher.DefaultStoreDrainTimeout,
		"at the end of a run, how long to wait for found values to reach the store; what has not stays in the state and is written on the next start")
}

func (s *storeFlags) options(log *slog.Logger) (store.Options, error) {
	if s.timeout <= 0 {
		return store.Options{}, fmt.Errorf("%w: --store-timeout must be positive", errUsage)
	}
	if s.retryFor < 0 {
		return store.Options{}, fmt.Errorf("%w: --store-retry must not be negative", errUsage)
	}
	retry := s.retryFor
	if retry == 0 {
		retry = -1 // store.Options: negative turns retrying off
	}
	return store.Options{CAFile: s.caFile, CertFile: s.certFile, KeyFile: s.keyFile,
		Timeout: s.timeout, RetryFor: retry, Logger: log}, nil
}

// given says whether the store is named (--store or --store-file), not
// the state directory's default.
func (s *storeFlags) given() bool { return s.uri != "" || s.file != "" }

// target is the store's URI or path: --store, or the line of
// --store-file. Its errors never quote the file's content.
func (s *storeFlags) target() (string, error) {
	if s.file == "" {
		return s.uri, nil
	}
	if s.uri != "" {
		return "", fmt.Errorf("%w: give --store or --store-file, not both", errUsage)
	}
	f, err := os.Open(s.file)
	if err != nil {
		return "", fmt.Errorf("--store-file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("--store-file: %w", err)
	}
	if runtime.GOOS != "windows" && info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("--store-file %s: readable by others (mode %04o), and it may hold a password; chmod 600 it", s.file, info.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, storeFileMax+1))
	if err != nil {
		return "", fmt.Errorf("--store-file %s: %w", s.file, err)
	}
	if len(b) > storeFileMax {
		return "", fmt.Errorf("--store-file %s: larger than %d bytes; it holds one URI", s.file, storeFileMax)
	}
	var uri string
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case uri != "":
			return "", fmt.Errorf("--store-file %s:%d: a second line besides comments; the file holds one URI", s.file, i+1)
		default:
			uri = l
		}
	}
	if uri == "" {
		return "", fmt.Errorf("--store-file %s: no URI in it, only blank lines and # comments", s.file)
	}
	return uri, nil
}

// storeFileMax bounds --store-file: a URI, a few comments.
const storeFileMax = 64 << 10

func (s *storeFlags) open(ctx context.Context, stateDir string) (store.Store, error) {
	return s.openLogged(ctx, stateDir, nil)
}

// openLogged is open with a logger for the store's warnings (a MongoDB
// that does not answer).
func (s *storeFlags) openLogged(ctx context.Context, stateDir string, log *slog.Logger) (store.Store, error) {
	uri, err := s.target()
	if err != nil {
		return nil, err
	}
	if uri == "" {
		if err := os.MkdirAll(stateDir, 0o755); err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
		uri = filepath.Join(stateDir, "results.db")
	}
	opts, err := s.options(log)
	if err != nil {
		return nil, err
	}
	st, err := store.OpenWith(ctx, uri, opts)
	if err != nil {
		// The store's error names the URI without its password.
		return nil, fmt.Errorf("open store: %w", err)
	}
	return st, nil
}

// resolveFlag collects --resolve host:port:addr:port: connect to addr:port
// whenever a URL names host:port.
type resolveFlag map[string]string

func (r resolveFlag) String() string { return fmt.Sprint(map[string]string(r)) }

func (r resolveFlag) Set(v string) error {
	// host:port:addr:port, where addr may be [v6].
	parts := strings.SplitN(v, ":", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return fmt.Errorf("want host:port:address:port, got %q", v)
	}
	r[strings.ToLower(parts[0])+":"+parts[1]] = parts[2]
	return nil
}

// crawlerFlags are a supervisor's fetch and politeness settings.
type crawlerFlags struct {
	workers       int
	contact       string
	userAgent     string
	timeout       time.Duration
	headerTimeout time.Duration
	idleTimeout   time.Duration
	insecureTLS   bool
	caFile        string
	roots         *x509.CertPool // read from caFile by validate
	maxBody       int64
	delay         time.Duration
	maxDelay      time.Duration
	robotsTTL     time.Duration
	allowLoopback bool
	allowPrivate  bool
	resolve       resolveFlag
	contentSeen   bool
	blacklistFile string
	blacklist     fetch.Blacklist // read from blacklistFile by validate
	htmlParser    string
	parser        etl.HTMLParser // read from htmlParser by validate

	render renderFlags // registered by run and supervisor only: render.register

	dns   resolverFlags
	names *resolver.Cache // set by openNames; nil: fetches resolve for themselves
}

func (c *crawlerFlags) register(fs *flag.FlagSet) {
	c.resolve = resolveFlag{}
	fs.IntVar(&c.workers, "workers", supervisor.DefaultWorkers, "concurrent fetches per supervisor (a waiting host takes none)")
	fs.StringVar(&c.contact, "contact", defaultContact, "URL telling site operators who runs this crawl and why; sent in the User-Agent")
	fs.StringVar(&c.userAgent, "user-agent", "", "full User-Agent (default: backfill/"+version+" (+CONTACT))")
	fs.DurationVar(&c.timeout, "timeout", fetch.DefaultTimeout, "deadline for one request, redirects included")
	fs.DurationVar(&c.headerTimeout, "header-timeout", fetch.DefaultHeaderTimeout, "deadline from sending a request to its complete response header")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", fetch.DefaultIdleTimeout, "longest silence between two reads of a response")
	fs.BoolVar(&c.insecureTLS, "insecure-tls", false, "record bad TLS certificates instead of refusing the page")
	fs.StringVar(&c.caFile, "ca-file", "", "PEM file of certificate authorities to trust besides the system's (a private CA, a TLS-inspecting proxy)")
	fs.Int64Var(&c.maxBody, "max-body", fetch.DefaultMaxBody, "bytes kept of a page; the rest is cut off and recorded")
	fs.DurationVar(&c.delay, "delay", 15*time.Second, "pause between requests to one host when robots.txt sets no Crawl-delay")
	fs.DurationVar(&c.maxDelay, "max-crawl-delay", 60*time.Second, "longest Crawl-delay honoured; hosts asking more are skipped and reported")
	fs.DurationVar(&c.robotsTTL, "robots-ttl", time.Hour, "how long a robots.txt is trusted (at most 24h)")
	fs.BoolVar(&c.allowLoopback, "allow-loopback", false, "allow fetching loopback addresses (testing only)")
	fs.BoolVar(&c.allowPrivate, "allow-private", false, "allow fetching private network addresses")
	fs.BoolVar(&c.contentSeen, "content-seen", false, "fingerprint pages so duplicates (same host, same or nearly the same text) are not expanded")
	fs.Var(c.resolve, "resolve", "host:port:address:port — connect there instead of resolving host (repeatable)")
	fs.StringVar(&c.blacklistFile, "blacklist", "", "file of hosts (subdomains included), IPs and CIDRs never to fetch, one a line, # comments")
	c.dns.register(fs, resolver.DefaultTimeout, resolver.DefaultAttempts)
	fs.StringVar(&c.dns.hostsFile, "hosts-file", resolver.DefaultHostsFile, "names answered before DNS is asked, in hosts-file form (\"\": none)")
	fs.StringVar(&c.htmlParser, "html-parser", defaultHTMLParser(), "how pages are parsed: fast (a fast tree builder, html.Parse for what it does not take) or standard (html.Parse for every page); default from "+htmlParserEnv+", else fast")
}

// htmlParserEnv names the environment variable that sets --html-parser's
// default, so every process of a cluster can be switched at once; the
// flag, when given, wins.
const htmlParserEnv = "BACKFILL_HTML_PARSER"

func defaultHTMLParser() string {
	if v := os.Getenv(htmlParserEnv); v != "" {
		return v
	}
	return etl.ParserFast.String()
}

func (c *crawlerFlags) userAgentString() string {
	if c.userAgent != "" {
		return c.userAgent
	}
	return "backfill/" + version + " (+" + c.contact + ")"
}

func (c *crawlerFlags) validate() error {
	if err := c.render.validate(); err != nil {
		return err
	}
	if err := c.dns.validate(); err != nil {
		return err
	}
	if c.workers < 1 {
		return fmt.Errorf("%w: --workers must be at least 1", errUsage)
	}
	if c.maxBody < 1 {
		return fmt.Errorf("%w: --max-body must be positive", errUsage)
	}
	if c.delay < 0 || c.timeout <= 0 || c.headerTimeout <= 0 || c.idleTimeout <= 0 {
		return fmt.Errorf("%w: --delay must not be negative and the timeouts must be positive", errUsage)
	}
	p, err := etl.ParseHTMLParser(c.htmlParser)
	if err != nil {
		return fmt.Errorf("%w: --html-parser (or %s): %v", errUsage, htmlParserEnv, err)
	}
	c.parser = p
	if c.caFile != "" {
		if c.roots, err = fetch.LoadRoots(c.caFile); err != nil {
			return fmt.Errorf("--ca-file: %w", err)
		}
	}
	if c.blacklistFile != "" {
		bl, err := fetch.LoadBlacklist(c.blacklistFile)
		if err != nil {
			return fmt.Errorf("--blacklist: %w", err)
		}
		c.blacklist = bl
	}
	return nil
}

func (c *crawlerFlags) fetchConfig() fetch.Config {
	fc := fetch.Config{
		UserAgent:     c.userAgentString(),
		Timeout:       c.timeout,
		HeaderTimeout: c.headerTimeout,
		IdleTimeout:   c.idleTimeout,
		InsecureTLS:   c.insecureTLS,
		RootCAs:       c.roots,
		MaxBody:       c.maxBody,
		Resolve:       map[string]string(c.resolve),
		AllowLoopback: c.allowLoopback,
		AllowPrivate:  c.allowPrivate,
		Deny:          c.blacklist.Prefixes,
		DenyNames:     c.blacklist.Names(),
	}
	if c.names != nil {
		fc.Names = c.names
	}
	return fc
}

// politeSource fetches pages one at a time outside a crawl (mappings
// learn and try) under the crawl's rules, with f (built from
// fetchConfig, so with the blacklist): robots.txt read as the workers
// read it, the delay, one request at a time per host, redirects as
// requests of their own.
func (c *crawlerFlags) politeSource(f *fetch.Fetcher) *learn.PoliteSource {
	ua := c.userAgentString()
	return &learn.PoliteSource{Fetcher: f, Delay: c.delay, MaxDelay: c.maxDelay,
		Robots: func(ctx context.Context, rawURL string, do func(context.Context, string, fetch.Request) (*fetch.Response, error)) (learn.HostRules, error) {
			return supervisor.FetchRobots(ctx, do, ua, rawURL)
		}}
}

func (c *crawlerFlags) supervisorConfig(name, dispatcherEndpoint string, set *etl.Set, cache store.HostCache, log *slog.Logger) supervisor.Config {
	delay := c.delay
	if delay == 0 {
		delay = supervisor.NoDelay
	}
	return supervisor.Config{
		Name:          name,
		Dispatcher:    dispatcherEndpoint,
		Workers:       c.workers,
		Mappings:      set.WithHTMLParser(c.parser),
		Fetch:         c.fetchConfig(),
		Cache:         cache,
		Names:         c.names,
		DefaultDelay:  delay,
		MaxCrawlDelay: c.maxDelay,
		ContentSeen:   c.contentSeen,
		RobotsTTL:     c.robotsTTL,
		Blacklist:     fetch.Blacklist{Hosts: c.blacklist.Hosts},
		Logger:        log,
		Render:        c.render.config(),
	}
}

// renderFlags make a supervisor a render node: it loads the pages that
// need JavaScript in headless Chromium. The browser reaches no host
// itself: the pages' requests are made by the supervisor's fetcher
// (--user-agent, --resolve, --allow-loopback, the delay and robots.txt).
type renderFlags struct {
	on       bool
	tabs     int
	timeout  time.Duration
	chromium string
}

func (r *renderFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&r.on, "render", false, "render JavaScript pages in headless Chromium here; the dispatcher sends such pages only to supervisors started with --render")
	fs.IntVar(&r.tabs, "render-tabs", supervisor.DefaultRenderTabs, "with --render: browser tabs rendering at once")
	fs.DurationVar(&r.timeout, "render-timeout", supervisor.DefaultPageTimeout, "with --render: deadline for rendering one page, not counting the time its requests wait for their hosts")
	fs.StringVar(&r.chromium, "chromium", "", "with --render: the browser binary (default: the first on PATH of chromium-headless-shell, chrome-headless-shell, chromium, chromium-browser, google-chrome and google-chrome-stable)")
}

func (r *renderFlags) validate() error {
	if r.on && (r.tabs < 1 || r.timeout <= 0) {
		return fmt.Errorf("%w: --render-tabs must be at least 1 and --render-timeout positive", errUsage)
	}
	return nil
}

// config is the supervisor's RenderConfig, nil without --render.
func (r *renderFlags) config() *supervisor.RenderConfig {
	if !r.on {
		return nil
	}
	return &supervisor.RenderConfig{Exec: r.chromium, Tabs: r.tabs, PageTimeout: r.timeout}
}
