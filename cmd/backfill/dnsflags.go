package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"backfill/resolver"
	"backfill/store"
)

// resolverFlags point name resolution (package resolver) where the user
// says: run, supervisor, mappings try|learn and survey take them.
type resolverFlags struct {
	servers  serverList
	timeout  time.Duration
	attempts int
	inFlight int
	minTTL   time.Duration
	maxTTL   time.Duration
	// hostsFile is the crawl's (--hosts-file); the survey asks DNS of
	// every name, as it studies DNS itself.
	hostsFile string
}

// maxHostsWarnings bounds the skipped lines of a hosts file logged one by
// one; the rest are counted.
const maxHostsWarnings = 5

// serverList collects --resolver IP:PORT, repeatable.
type serverList []string

func (s *serverList) String() string { return strings.Join(*s, ",") }

func (s *serverList) Set(v string) error {
	for _, one := range strings.Split(v, ",") {
		one = strings.TrimSpace(one)
		if _, err := netip.ParseAddrPort(one); err != nil {
			return fmt.Errorf("%q is not IP:PORT", one)
		}
		*s = append(*s, one)
	}
	return nil
}

// The survey's defaults: it asks each name once per run, and can wait.
const (
	surveyDefaultDNSTimeout  = 3 * time.Second
	surveyDefaultDNSAttempts = 2
)

func (r *resolverFlags) register(fs *flag.FlagSet, timeout time.Duration, attempts int) {
	fs.Var(&r.servers, "resolver", "DNS server to ask, IP:PORT (repeatable; default: the nameservers of /etc/resolv.conf); --resolve pins win")
	fs.DurationVar(&r.timeout, "dns-timeout", timeout, "timeout of one DNS query")
	fs.IntVar(&r.attempts, "dns-attempts", attempts, "queries of one question at most, while it times out (then the name fails with dns-timeout); on a path that loses queries at random, as many as make losing them all unlikely, up to 20")
	fs.IntVar(&r.inFlight, "dns-in-flight", resolver.DefaultMaxInFlight, "most DNS queries in flight to each server (fewer while it drops queries)")
	fs.DurationVar(&r.minTTL, "dns-min-ttl", resolver.DefaultMinTTL, "shortest time an answer stays in the DNS cache, whatever its TTL")
	fs.DurationVar(&r.maxTTL, "dns-max-ttl", resolver.DefaultMaxTTL, "longest time an answer stays in the DNS cache")
}

func (r *resolverFlags) validate() error {
	if r.timeout <= 0 || r.attempts < 1 || r.inFlight < 1 || r.minTTL < 0 || r.maxTTL < 0 {
		return fmt.Errorf("%w: --dns-timeout must be positive, --dns-attempts and --dns-in-flight at least 1, the TTLs not negative", errUsage)
	}
	return nil
}

// resolver builds the resolver; ns and both are the survey's (resolver.Config).
func (r *resolverFlags) resolver(ns, both bool) (*resolver.Resolver, error) {
	return resolver.New(resolver.Config{Servers: r.servers, Timeout: r.timeout, Attempts: r.attempts, MaxInFlight: r.inFlight, NS: ns, BothFamilies: both})
}

// cacheConfig is the cache's TTL bounds, and store.
func (r *resolverFlags) cacheConfig(store resolver.Store) resolver.CacheConfig {
	return resolver.CacheConfig{Min: r.minTTL, Max: r.maxTTL, Store: store}
}

// names opens the crawl's resolver and its cache, kept in what open
// returns (nil open, or a nil Store: in memory only). Without --resolver
// and without a readable /etc/resolv.conf there is none (nil, with a
// warning): fetches then look names up themselves, as --resolve pins need
// no DNS at all, and open is not called. close releases what open opened.
func (r *resolverFlags) names(open func() (resolver.Store, func() error, error), log *slog.Logger) (names *resolver.Cache, close func() error, err error) {
	close = func() error { return nil }
	res, err := r.resolver(false, false)
	if err != nil {
		if len(r.servers) > 0 {
			return nil, close, fmt.Errorf("%w: %v", errUsage, err)
		}
		if log != nil {
			log.Warn("no DNS server of our own: names are looked up by the system resolver, on the fetch path", "error", err)
		}
		return nil, close, nil
	}
	hosts, err := r.hosts(log)
	if err != nil {
		return nil, close, err
	}
	var keep resolver.Store
	if open != nil {
		if keep, close, err = open(); err != nil {
			return nil, func() error { return nil }, err
		}
	}
	cfg := r.cacheConfig(keep)
	cfg.Hosts = hosts
	return resolver.NewCache(res, cfg), close, nil
}

// hosts reads --hosts-file ("": none), warning of the lines it skips.
func (r *resolverFlags) hosts(log *slog.Logger) (resolver.Hosts, error) {
	if r.hostsFile == "" {
		return nil, nil
	}
	h, skipped, err := resolver.ReadHosts(r.hostsFile)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	for i, e := range skipped {
		if i == maxHostsWarnings {
			log.Warn("more hosts-file lines skipped", "file", r.hostsFile, "skipped", len(skipped))
			break
		}
		log.Warn("hosts-file line skipped", "error", e)
	}
	return h, nil
}

// openNames sets up the crawl's name resolution (see resolverFlags.names)
// with its cache in stateDir's resolver.StoreFile ("" keeps it in memory);
// fetchConfig and supervisorConfig use it from then on.
func (c *crawlerFlags) openNames(ctx context.Context, stateDir string, log *slog.Logger) (close func() error, err error) {
	var open func() (resolver.Store, func() error, error)
	if stateDir != "" {
		open = func() (resolver.Store, func() error, error) {
			st, err := resolver.OpenStore(ctx, stateDir)
			if err != nil {
				return nil, nil, err
			}
			return st, st.Close, nil
		}
	}
	c.names, close, err = c.dns.names(open, log)
	return close, err
}

// shareNames is openNames with the cache in st, the store a cluster's
// supervisors share: a name one of them asked, the others find there.
func (c *crawlerFlags) shareNames(st store.Names, log *slog.Logger) error {
	var err error
	c.names, _, err = c.dns.names(func() (resolver.Store, func() error, error) {
		return st.Names(), func() error { return nil }, nil
	}, log)
	return err
}
