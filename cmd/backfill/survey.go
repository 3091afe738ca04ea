package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"backfill/fetch"
	dnsresolver "backfill/resolver"
	"backfill/supervisor"
	"backfill/survey"
	"backfill/wire"
)

// cmdSurvey runs a host survey: survey web (web-server metadata of many
// domains) or survey ports (TCP liveness), on this machine or on the
// cluster's supervisors.
func cmdSurvey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "web" && args[0] != "ports") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stderr, surveyUsage)
			return flag.ErrHelp
		}
		return fmt.Errorf("%w: %s", errUsage, surveyUsage)
	}
	if args[0] == "web" {
		return surveyWeb(ctx, args[1:], stdout, stderr)
	}
	return surveyPorts(ctx, args[1:], stdout, stderr)
}

const surveyUsage = `survey web --domains FILE | survey ports (--targets LIST | --random N); 'backfill survey web -h' lists the flags`

// surveyFlags are what both surveys share: state, output, politeness,
// identification, and where the supervisors are.
type surveyFlags struct {
	lf          logFlags
	sf          storeFlags
	sec         securityFlags
	stateDir    string
	out         string
	format      string
	summary     string
	contact     string
	userAgent   string
	timeout     time.Duration
	delay       time.Duration
	rate        float64
	per24       int
	cluster     string
	expect      int
	supervisors int
	lease       time.Duration
	allowLoop   bool
	allowPriv   bool
	blocklist   string
}

func (f *surveyFlags) register(fs *flag.FlagSet, timeout, delay time.Duration) {
	f.lf.register(fs)
	f.sf.register(fs, "results store the rows also go to: a SQLite file path (default: STATE-DIR/results.db)")
	f.sec.registerDispatcher(fs)
	stateDirFlag(fs, &f.stateDir, defaultStateDir, "directory for the survey's state (survey.db: resumable runs, DNS cache) and the default results store")
	fs.StringVar(&f.out, "out", "-", "where the rows go as they arrive: a file, or - for standard output (the summary then goes to standard error)")
	fs.StringVar(&f.format, "format", "", "rows as jsonl or csv (default: csv for an --out ending in .csv, else jsonl)")
	fs.StringVar(&f.summary, "summary", "", "also write the summary as JSON to this file")
	fs.StringVar(&f.contact, "contact", defaultContact, "URL telling network operators who runs this survey and why; sent in the User-Agent")
	fs.StringVar(&f.userAgent, "user-agent", "", "full User-Agent of HTTP probes and banner requests (default: backfill-survey/"+version+" (+CONTACT))")
	fs.DurationVar(&f.timeout, "timeout", timeout, "connect timeout (and, for web, the timeout of each stage of a request)")
	fs.DurationVar(&f.delay, "delay", delay, "pause between two connections to one address")
	fs.Float64Var(&f.rate, "rate", 100, "connections per second, the whole survey (all supervisors together)")
	fs.IntVar(&f.per24, "per-24", 4, "connections at once into one /24 (IPv6: /48)")
	fs.StringVar(&f.cluster, "cluster", "", "ZeroMQ endpoint where the cluster's supervisors join (e.g. tcp://0.0.0.0:5551); without it the survey runs on this machine")
	fs.IntVar(&f.expect, "expect", 0, "with --cluster: supervisors to wait for before dispatching (0: start with the first)")
	fs.IntVar(&f.supervisors, "supervisors", 1, "without --cluster: supervisors to run in this process")
	fs.DurationVar(&f.lease, "lease", survey.DefaultLease, "how long an address's task may go unanswered, and unlisted by its supervisor's heartbeats, before it is sent again")
	fs.BoolVar(&f.allowLoop, "allow-loopback", false, "allow probing loopback addresses (testing only)")
	fs.BoolVar(&f.allowPriv, "allow-private", false, "allow probing private network addresses (web surveys)")
	fs.StringVar(&f.blocklist, "blocklist", "", "file of IPs, CIDRs and host names never probed, one a line, # comments (adds to the default one)")
}

func (f *surveyFlags) validate() error {
	if f.timeout <= 0 || f.delay < 0 || f.rate < 0 || f.per24 < 0 || f.supervisors < 1 || f.lease <= 0 {
		return fmt.Errorf("%w: --timeout and --lease must be positive, --delay, --rate and --per-24 not negative, --supervisors at least 1", errUsage)
	}
	if f.format != "" && f.format != survey.FormatJSONL && f.format != survey.FormatCSV {
		return fmt.Errorf("%w: --format %q: want jsonl or csv", errUsage, f.format)
	}
	return nil
}

func (f *surveyFlags) ua() string {
	if f.userAgent != "" {
		return f.userAgent
	}
	return "backfill-survey/" + version + " (+" + f.contact + ")"
}

// userBlocklist reads --blocklist.
func (f *surveyFlags) userBlocklist() (fetch.Blacklist, error) {
	if f.blocklist == "" {
		return fetch.Blacklist{}, nil
	}
	bl, err := fetch.LoadBlacklist(f.blocklist)
	if err != nil {
		return fetch.Blacklist{}, fmt.Errorf("--blocklist: %w", err)
	}
	return bl, nil
}

// surveyRun is an opened survey: logger, store, output, and the config
// both surveys take.
type surveyRun struct {
	f      *surveyFlags
	log    *slog.Logger
	cfg    survey.Config
	closer []func() error
	report io.Writer // where the text summary goes
}

func (f *surveyFlags) open(ctx context.Context, stdout, stderr io.Writer, spec wire.SurveySpec, deny []netip.Prefix) (*surveyRun, error) {
	log, logFile, err := f.lf.logger(stderr, nil)
	if err != nil {
		return nil, err
	}
	r := &surveyRun{f: f, log: log, report: stdout}
	r.closer = append(r.closer, logFile.Close)
	st, err := f.sf.openLogged(ctx, f.stateDir, log)
	if err != nil {
		return nil, err
	}
	r.closer = append(r.closer, st.Close)
	out := stdout
	format := f.format
	if f.out == "-" {
		r.report = stderr
	} else {
		file, err := os.Create(f.out)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("--out: %w", err)
		}
		r.closer = append(r.closer, file.Close)
		out = file
		if format == "" && strings.HasSuffix(strings.ToLower(f.out), ".csv") {
			format = survey.FormatCSV
		}
	}
	spec.Timeout, spec.Delay, spec.Rate, spec.Per24, spec.UserAgent = f.timeout, f.delay, f.rate, f.per24, f.ua()
	cl := survey.Cluster{Lease: f.lease}
	if f.cluster != "" {
		keys, authorized, err := f.sec.dispatcherSecurity()
		if err != nil {
			r.close()
			return nil, err
		}
		cl.Listen, cl.Expect, cl.Keys, cl.Authorized, cl.Insecure = f.cluster, f.expect, keys, authorized, f.sec.insecure
	} else {
		cl.Expect = f.supervisors
		cl.Listening = r.startLocal(ctx, fetch.Config{UserAgent: f.ua(), AllowLoopback: f.allowLoop, AllowPrivate: f.allowPriv, Deny: deny})
	}
	r.cfg = survey.Config{StateDir: f.stateDir, Store: st, StoreDrain: f.sf.drain, Out: out, Format: format, Cluster: cl, Spec: spec, Logger: log}
	return r, nil
}

// startLocal returns the Listening hook that starts --supervisors
// supervisors in this process, stopped by close.
func (r *surveyRun) startLocal(ctx context.Context, fc fetch.Config) func(string) {
	return func(endpoint string) {
		set, err := (&mappingFlags{}).load()
		if err != nil {
			r.log.Error("supervisors not started", "error", err)
			return
		}
		sctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		r.closer = append(r.closer, func() error { cancel(); wg.Wait(); return nil })
		for i := range r.f.supervisors {
			p := survey.NewProber(survey.ProberConfig{Fetch: fc, Logger: r.log})
			s, err := supervisor.New(supervisor.Config{Name: fmt.Sprintf("local-%d", i+1), Dispatcher: endpoint,
				Mappings: set, Fetch: fc, Prober: p, Logger: r.log}) // New adds "supervisor" to its lines
			if err != nil {
				r.log.Error("supervisor not started", "error", err)
				p.Close()
				continue
			}
			wg.Go(func() {
				defer p.Close()
				s.Run(sctx)
			})
		}
	}
}

func (r *surveyRun) close() error {
	var errs []error
	for i := len(r.closer) - 1; i >= 0; i-- {
		errs = append(errs, r.closer[i]())
	}
	r.closer = nil
	return errors.Join(errs...)
}

// finish writes the summary; a run stopped by a signal is not an error
// (it resumes from the state).
func (r *surveyRun) finish(ctx context.Context, sum *survey.Summary, err error) error {
	cerr := r.close()
	if sum != nil {
		err = errors.Join(err, sum.WriteText(r.report))
		if r.f.summary != "" {
			b, _ := json.MarshalIndent(sum, "", "  ")
			if werr := os.WriteFile(r.f.summary, append(b, '\n'), 0o644); werr != nil {
				err = errors.Join(err, fmt.Errorf("write summary: %w", werr))
			}
		}
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = nil
	}
	return errors.Join(err, cerr)
}

func surveyWeb(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("survey web", stderr)
	var f surveyFlags
	f.register(fs, 10*time.Second, time.Second)
	domains := fs.String("domains", "", "the domains: one a line (# comments), or CSV with a \"domain\" column (required)")
	var rf resolverFlags
	rf.register(fs, surveyDefaultDNSTimeout, surveyDefaultDNSAttempts)
	dnsWorkers := fs.Int("dns-workers", survey.DefaultDNSWorkers, "DNS lookups at once")
	schemes := fs.String("schemes", "http,https", "schemes probed, in order: http, https or both")
	headers := fs.String("headers", "", "response headers to record besides Server, comma-separated")
	every := fs.Bool("probe-every-vhost", false, "probe every domain, not once per address (IP dedupe off)")
	redirects := fs.Int("max-redirects", 5, "redirects followed while they stay on the domain")
	httpPort := fs.Int("http-port", 80, "port of http probes")
	httpsPort := fs.Int("https-port", 443, "port of https probes")
	since := fs.String("since", "", "a previous survey's JSON Lines output to compare with (default: the state directory's last finished run)")
	maxAge := fs.Duration("max-age", 7*24*time.Hour, "copy forward a previous result at most this old when the domain's DNS answer did not change (0: probe every domain again)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	if err := rf.validate(); err != nil {
		return err
	}
	if *domains == "" {
		return fmt.Errorf("%w: --domains is required", errUsage)
	}
	var sch []string
	for _, s := range strings.Split(*schemes, ",") {
		s = strings.TrimSpace(strings.ToLower(s))
		if s != "http" && s != "https" {
			return fmt.Errorf("%w: --schemes: %q is not http or https", errUsage, s)
		}
		sch = append(sch, s)
	}
	var hdrs []string
	for _, h := range strings.Split(*headers, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hdrs = append(hdrs, h)
		}
	}
	if *redirects < 0 || *dnsWorkers < 1 || *maxAge < 0 || *httpPort < 1 || *httpPort > 65535 || *httpsPort < 1 || *httpsPort > 65535 {
		return fmt.Errorf("%w: --max-redirects, --max-age must not be negative, --dns-workers at least 1, ports 1-65535", errUsage)
	}
	resolver, err := rf.resolver(true, true)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	bl, err := f.userBlocklist()
	if err != nil {
		return err
	}
	spec := wire.SurveySpec{Schemes: sch, Headers: hdrs, EveryHost: *every, MaxRedirects: *redirects}
	if *httpPort != 80 {
		spec.HTTPPort = *httpPort
	}
	if *httpsPort != 443 {
		spec.HTTPSPort = *httpsPort
	}
	r, err := f.open(ctx, stdout, stderr, spec, bl.Prefixes)
	if err != nil {
		return err
	}
	sum, err := survey.RunWeb(ctx, survey.WebConfig{Config: r.cfg, Domains: *domains, Resolver: resolver, DNSWorkers: *dnsWorkers,
		MinTTL: rf.minTTL, MaxTTL: rf.maxTTL, Since: *since, MaxAge: *maxAge, Blocklist: bl.Names()})
	return r.finish(ctx, sum, err)
}

func surveyPorts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("survey ports", stderr)
	var f surveyFlags
	f.register(fs, 200*time.Millisecond, 50*time.Millisecond)
	targets := fs.String("targets", "", "comma-separated IPs, CIDRs and host names to probe")
	targetsFile := fs.String("targets-file", "", "file of targets, one a line (# comments)")
	random := fs.Int("random", 0, "probe N random IPv4 addresses from the routable space instead (never special-purpose or blocklisted ones)")
	seed := fs.Uint64("seed", 0, "seed of --random, to draw the same sample again (0: pick one and print it)")
	ports := fs.String("ports", "top112", "ports: list names ("+strings.Join(survey.PortListNames(), ", ")+"), numbers and ranges, comma-separated")
	banner := fs.Int("banner", 0, fmt.Sprintf("read up to N bytes of what an open port says first (web ports are asked with HEAD); 0: off, at most %d", survey.MaxBanner))
	noDefault := fs.Bool("no-default-blocklist", false, "leave out the built-in blocklist (the IANA special-purpose ranges); --blocklist must then give one")
	dryRun := fs.Bool("dry-run", false, "write the ip:port targets, one a line, and connect to nothing")
	var rf resolverFlags
	rf.register(fs, surveyDefaultDNSTimeout, surveyDefaultDNSAttempts)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	if err := rf.validate(); err != nil {
		return err
	}
	if *banner < 0 || *banner > survey.MaxBanner {
		return fmt.Errorf("%w: --banner must be 0 to %d", errUsage, survey.MaxBanner)
	}
	pl, err := survey.ParsePorts(*ports)
	if err != nil {
		return fmt.Errorf("%w: --ports: %v", errUsage, err)
	}
	items, err := targetList(*targets, *targetsFile)
	if err != nil {
		return err
	}
	bl := survey.DefaultBlocklist()
	if *noDefault {
		bl = survey.Blocklist{}
	}
	user, err := f.userBlocklist()
	if err != nil {
		return err
	}
	if f.blocklist != "" {
		bl.Add(user, f.blocklist)
	}
	var resolver *dnsresolver.Resolver
	if len(rf.servers) > 0 || hasNames(items) {
		if resolver, err = rf.resolver(false, true); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	pc := survey.PortsConfig{Targets: items, Random: *random, Seed: *seed, Ports: pl, Blocklist: bl, AllowLoopback: f.allowLoop, Resolver: resolver}
	if *dryRun {
		return portsDryRun(ctx, pc, f.out, stdout, stderr)
	}
	r, err := f.open(ctx, stdout, stderr, wire.SurveySpec{Banner: *banner}, user.Prefixes)
	if err != nil {
		return err
	}
	pc.Config = r.cfg
	sum, err := survey.RunPorts(ctx, pc)
	if sum != nil && *random > 0 && *seed == 0 {
		fmt.Fprintf(r.report, "random sample drawn with --seed %d\n", sum.Seed)
	}
	report := r.report
	err = r.finish(ctx, sum, translate(err))
	if sum != nil && !f.allowLoop && loopbackTargets(items) {
		fmt.Fprintln(report, loopbackExcluded)
	}
	return err
}

// loopbackExcluded says why a loopback target is excluded and what lets
// it in, as `mappings try` names the flag that lifts the address guard.
const loopbackExcluded = "loopback targets are excluded (the blocklist holds 127.0.0.0/8); pass --allow-loopback to probe them"

// loopbackTargets reports targets given as loopback addresses or ranges.
func loopbackTargets(items []string) bool {
	for _, t := range items {
		if p, err := netip.ParsePrefix(t); err == nil && p.Overlaps(netip.MustParsePrefix("127.0.0.0/8")) {
			return true
		}
		if a, err := netip.ParseAddr(t); err == nil && a.Unmap().IsLoopback() {
			return true
		}
	}
	return false
}

// portsDryRun writes the ip:port targets of pc, one a line, to out (a
// file, or - for standard output), connecting to nothing. Its first line,
// on standard output (standard error when the targets go there, as a
// survey's summary does), counts them.
func portsDryRun(ctx context.Context, pc survey.PortsConfig, out string, stdout, stderr io.Writer) error {
	plan, rep, err := survey.PlanPorts(ctx, pc)
	for _, e := range rep.Errors {
		fmt.Fprintf(stderr, "skipped: %s\n", e)
	}
	if err != nil {
		return translate(err)
	}
	dst, report := stdout, stderr
	var file *os.File
	if out != "-" {
		if file, err = os.Create(out); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		dst, report = file, stdout
	}
	fmt.Fprintf(report, "%s × %s = %s\n", plural(len(plan.Addrs), "address", "addresses"),
		plural(len(plan.Ports), "port", "ports"), plural(plan.Targets(), "target", "targets"))
	if plan.Excluded > 0 {
		fmt.Fprintf(report, "%s left out by the blocklist\n", plural(plan.Excluded, "address", "addresses"))
	}
	if plan.Loopback > 0 {
		fmt.Fprintln(report, loopbackExcluded)
	}
	w := bufio.NewWriter(dst)
write:
	for _, ip := range plan.Addrs {
		for _, p := range plan.Ports {
			if _, err = fmt.Fprintln(w, netip.AddrPortFrom(ip, uint16(p))); err != nil {
				break write
			}
		}
	}
	err = errors.Join(err, w.Flush())
	if file != nil {
		err = errors.Join(err, file.Close())
	}
	if err != nil && out != "-" {
		return fmt.Errorf("--out: %w", err)
	}
	return err
}

// plural writes n with its noun, n grouped by thousands: "2,200 targets".
func plural(n int, one, many string) string {
	digits := strconv.Itoa(n)
	var b strings.Builder
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if n == 1 {
		return b.String() + " " + one
	}
	return b.String() + " " + many
}

// translate makes a refusal of the survey's settings a usage error.
func translate(err error) error {
	if errors.Is(err, survey.ErrNoBlocklist) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return err
}

// targetList joins --targets and --targets-file.
func targetList(list, file string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(list, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	if file == "" {
		return out, nil
	}
	b, err := os.ReadFile(filepath.Clean(file))
	if err != nil {
		return nil, fmt.Errorf("--targets-file: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out, nil
}

// hasNames reports targets that are host names, which need a resolver.
func hasNames(items []string) bool {
	for _, t := range items {
		if _, err := netip.ParsePrefix(t); err == nil {
			continue
		}
		if _, err := netip.ParseAddr(t); err == nil {
			continue
		}
		return true
	}
	return false
}
