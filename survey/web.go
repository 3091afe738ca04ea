package survey

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"backfill/fetch"
	"backfill/resolver"
	"backfill/wire"
)

// WebConfig is a web survey: the web-server metadata of many domains.
type WebConfig struct {
	Config
	Domains  string             // the domain list: one a line, or CSV with a "domain" column
	Resolver *resolver.Resolver // required (with NS and BothFamilies, see resolver.Config)
	// DNSWorkers bounds the lookups in flight. Default 32.
	DNSWorkers int
	// MinTTL and MaxTTL bound how long an answer stays in the DNS cache.
	MinTTL, MaxTTL time.Duration
	// Since is a previous survey's JSON Lines output: its rows are the
	// previous results an incremental rescan compares with (instead of
	// the state directory's last finished run).
	Since string
	// MaxAge: a previous result at most this old, for a domain whose DNS
	// answer did not change, is copied forward instead of probed again.
	// 0 probes everything again.
	MaxAge time.Duration
	// Blocklist names domains (and their subdomains) never looked up nor
	// probed: their rows say excluded, blocklisted, and where.
	Blocklist fetch.NameSet
}

// DefaultDNSWorkers bounds a web survey's lookups in flight.
const DefaultDNSWorkers = 32

// RunWeb runs (or resumes) a web survey: every domain resolved (through
// the DNS cache), grouped by the address it resolves to, each address
// probed once (every domain on it with Spec.EveryHost), and a row written
// per domain.
func RunWeb(ctx context.Context, cfg WebConfig) (*Summary, error) {
	if cfg.Resolver == nil {
		return nil, fmt.Errorf("survey: web: no resolver")
	}
	if cfg.DNSWorkers <= 0 {
		cfg.DNSWorkers = DefaultDNSWorkers
	}
	if cfg.MinTTL <= 0 {
		cfg.MinTTL = resolver.DefaultMinTTL
	}
	if cfg.MaxTTL <= 0 {
		cfg.MaxTTL = resolver.DefaultMaxTTL
	}
	cfg.MaxTTL = max(cfg.MaxTTL, cfg.MinTTL)
	params, _ := json.Marshal(map[string]any{"domains": cfg.Domains, "schemes": cfg.Spec.Schemes, "every_host": cfg.Spec.EveryHost})
	var rep InputReport
	plan := func(ctx context.Context, st *state, cur run, prev *run) error {
		var err error
		rep, err = planWeb(ctx, cfg, st, cur, prev)
		return err
	}
	sum, err := cfg.Config.run(ctx, wire.SurveyWeb, string(params), plan, webRows)
	if sum != nil {
		sum.Input = rep
	}
	return sum, err
}

// planWeb resolves the domains and writes the run's tasks: one per
// address, ordered by the domains' name servers so each supervisor and
// each address block sees clustered work, as the seed's scanner did.
func planWeb(ctx context.Context, cfg WebConfig, st *state, cur run, prev *run) (InputReport, error) {
	domains, rep, err := readDomains(cfg.Domains)
	if err != nil {
		return rep, err
	}
	for _, e := range rep.Errors {
		cfg.log().Warn("domain line skipped", "where", e)
	}
	previous, prevName, err := previousWeb(ctx, cfg, st, prev)
	if err != nil {
		return rep, err
	}
	now := cfg.now()
	var rows []row
	domains, rows = blocklisted(cfg.Blocklist, domains, now)
	answers, err := resolveAll(ctx, cfg, st, domains)
	if err != nil {
		return rep, err
	}
	groups := map[netip.Addr]*task{}
	nsOf := map[netip.Addr]string{}
	for i, d := range domains {
		a := answers[i]
		h := hostEntry{Domain: d.name, Seq: d.seq, DNS: a, At: a.At}
		if a.Class != "" {
			r := WebRow{Domain: d.name, Outcome: Unresolved, Class: a.Class, DNS: a, DNSCached: a.Cached, DNSAt: a.At, At: a.At}
			rows = append(rows, webRow(d.seq, r))
			continue
		}
		ip := probeAddr(a.Addrs())
		if p, ok := previous[d.name]; ok && cfg.MaxAge > 0 && p.Outcome != Unresolved &&
			slices.Equal(p.DNS.IPs, a.IPs) && now.Sub(p.At) <= cfg.MaxAge {
			p.CopiedFrom = prevName
			p.DNS, p.DNSCached, p.DNSAt = a, a.Cached, a.At // the answer that was checked now
			rows = append(rows, webRow(d.seq, p))
			continue
		}
		t := groups[ip]
		if t == nil {
			t = &task{id: "w:" + ip.String(), ip: ip.String()}
			groups[ip] = t
			nsOf[ip] = strings.Join(a.NS, ",")
		}
		t.hosts = append(t.hosts, h)
	}
	tasks := make([]task, 0, len(groups))
	for _, t := range groups {
		tasks = append(tasks, *t)
	}
	// Locality: by name servers, then address.
	slices.SortFunc(tasks, func(a, b task) int {
		na, nb := nsOf[netip.MustParseAddr(a.ip)], nsOf[netip.MustParseAddr(b.ip)]
		if c := strings.Compare(na, nb); c != 0 {
			return c
		}
		return netip.MustParseAddr(a.ip).Compare(netip.MustParseAddr(b.ip))
	})
	for i := range tasks {
		tasks[i].seq = int64(i)
	}
	cfg.log().Info("web survey planned", "run", cur.name(), "domains", len(domains), "addresses", len(tasks),
		"rows_known", len(rows), "bad_lines", rep.Bad)
	return rep, st.plan(ctx, cur, tasks, rows)
}

// blocklisted takes the domains the blocklist names out of domains, before
// anything is asked of DNS, and gives each its row.
func blocklisted(bl fetch.NameSet, domains []domainIn, now time.Time) ([]domainIn, []row) {
	if len(bl) == 0 {
		return domains, nil
	}
	var rows []row
	kept := domains[:0:0]
	for _, d := range domains {
		if where, ok := bl.Match(d.name); ok {
			rows = append(rows, webRow(d.seq, WebRow{Domain: d.name, Outcome: Excluded, Class: WebBlocklisted, Listed: where, At: now}))
			continue
		}
		kept = append(kept, d)
	}
	return kept, rows
}

// probeAddr chooses the address a domain is probed at: its first IPv4
// address (sorted), else its first IPv6 one.
func probeAddr(addrs []netip.Addr) netip.Addr {
	for _, a := range addrs {
		if a.Is4() {
			return a
		}
	}
	return addrs[0]
}

// resolveAll looks every domain up, DNSWorkers at a time, through a
// cache kept in the state's dns table: answers that resolved, and negative
// ones (nxdomain, nodata), until their TTL (bounded by MinTTL and MaxTTL)
// expires; failures (servfail, timeout, refused) are asked again next
// time.
func resolveAll(ctx context.Context, cfg WebConfig, st *state, domains []domainIn) ([]resolver.Answer, error) {
	cache := resolver.NewCache(cfg.Resolver, resolver.CacheConfig{
		Min: cfg.MinTTL, Max: cfg.MaxTTL, Negative: cfg.MinTTL,
		Store: resolver.NewSQLStore(st.db, "dns"), Now: cfg.now,
	})
	out := make([]resolver.Answer, len(domains))
	todo := make(chan int)
	var wg sync.WaitGroup
	for range cfg.DNSWorkers {
		wg.Go(func() {
			for i := range todo {
				out[i] = cache.Lookup(ctx, domains[i].name)
			}
		})
	}
	for i := range domains {
		select {
		case todo <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(todo)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if n := cache.Stats().StoreErrs; n > 0 {
		return out, fmt.Errorf("survey: dns cache in %s: %d reads or writes failed", st.path, n)
	}
	return out, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// previousWeb reads the previous results of an incremental rescan: the
// --since file, else the state's last finished web run.
func previousWeb(ctx context.Context, cfg WebConfig, st *state, prev *run) (map[string]WebRow, string, error) {
	out := map[string]WebRow{}
	if cfg.Since != "" {
		f, err := os.Open(cfg.Since)
		if err != nil {
			return nil, "", fmt.Errorf("survey: --since: %w", err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		line := 0
		for sc.Scan() {
			line++
			var r WebRow
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Domain == "" {
				cfg.log().Warn("previous survey line skipped", "where", fmt.Sprintf("%s:%d", cfg.Since, line), "error", err)
				continue
			}
			out[r.Domain] = r
		}
		if err := sc.Err(); err != nil {
			return nil, "", fmt.Errorf("survey: --since %s:%d: %w", cfg.Since, line+1, err)
		}
		return out, cfg.Since, nil
	}
	if prev == nil {
		return out, "", nil
	}
	err := st.rows(ctx, *prev, func(w row) error {
		var r WebRow
		if json.Unmarshal(w.doc, &r) == nil {
			out[r.Domain] = r
		}
		return nil
	})
	return out, prev.name(), err
}

func webRow(seq int64, r WebRow) row {
	doc, _ := json.Marshal(r)
	return row{key: r.Domain, seq: seq, at: r.At, doc: doc}
}

// webRows turns the answer for one address into a row per domain on it.
// Without EveryHost only the first domain was probed: the others share its
// probes, marked shared_ip.
func webRows(t *task, r *wire.SurveyResult) []row {
	byHost := map[string][]wire.WebProbe{}
	for _, p := range r.Web {
		byHost[p.Host] = append(byHost[p.Host], p)
	}
	out := make([]row, 0, len(t.hosts))
	for _, h := range t.hosts {
		w := WebRow{Domain: h.Domain, IP: t.ip, DNS: h.DNS, DNSAt: h.At, Supervisor: r.Supervisor, At: r.At}
		probes, own := byHost[h.Domain]
		if !own && len(t.hosts) > 0 {
			probes = byHost[t.hosts[0].Domain]
			w.SharedIP, w.ProbedAs = true, t.hosts[0].Domain
		}
		w.Probes = probes
		w.Outcome, w.Class = webOutcome(probes, r.Error)
		out = append(out, webRow(h.Seq, w))
	}
	return out
}

// webOutcome: answered when any probe got an HTTP status; excluded when
// every probe was refused the address; else unresponsive, with the first
// probe's class.
func webOutcome(probes []wire.WebProbe, taskErr string) (string, string) {
	if len(probes) == 0 {
		if taskErr != "" {
			return Unresponsive, "probe-error"
		}
		return Unresponsive, WebProtocol
	}
	excluded := true
	for _, p := range probes {
		if p.Class == "" {
			return Answered, ""
		}
		excluded = excluded && p.Class == WebExcluded
	}
	if excluded {
		return Excluded, WebExcluded
	}
	return Unresponsive, probes[0].Class
}
