package dispatcher

import (
	"backfill/records"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"backfill/etl"
	"backfill/fetch"
	"backfill/wire"
)

// Reasons a link is not followed, the keys of Summary.Filtered.
const (
	FilterBlacklisted  = "blacklisted"           // its host is on the user's blacklist
	FilterTopSite      = "top-site"              // a discovered link into a popular site
	FilterHostBudget   = "host-budget"           // its host has had its pages this run
	FilterRecordBudget = "record-budget"         // its record has had its pages
	FilterPathDepth    = "path-depth"            // too many path segments
	FilterRepeats      = "repeats"               // one path segment repeated too often
	FilterURLLength    = records.FilterURLLength // longer than etl.MaxURLLength
	FilterLinkFarm     = "link-farm"             // on a page linking to too many domains or other sites' hosts
)

// Default link limits (Config fields of the same names).
const (
	DefaultHostBudget   = 1000
	DefaultRecordBudget = 200
	DefaultMaxPathDepth = 16
	DefaultMaxRepeats   = 3
	DefaultMaxFanout    = 100
)

// maxListLine bounds one line of a host list file; a longer one is
// reported, not read into memory.
const maxListLine = 4096

// linkFilter decides which links enter the frontier. The checks that depend
// on the URL alone (check) run before a link is looked up in the state; the
// budgets, which count what this process queued, run on links new to the
// crawl. A record's own links (depth 0) were given on purpose: only the
// blacklist applies to them, though they count against the budgets.
type linkFilter struct {
	blacklist hostSet // hosts never crawled, with their subdomains
	top       hostSet // popular sites: discovered links are not followed
	maxDepth  int     // path segments; <= 0 means no limit
	maxRepeat int     // occurrences of one segment; <= 0 means no limit
	hostCap   int     // tasks queued per host; <= 0 means no limit
	recordCap int     // tasks queued per record; <= 0 means no limit
	fanout    int     // distinct registrable domains, and other domains' hosts, on a page; <= 0 means no limit
}

// limit turns a Config value into a limit: zero takes def, negative means
// none (0).
func limit(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// newLinkFilter reads the list files cfg names. Malformed lines of the
// top-sites file (a long list from elsewhere) are returned, as *records.LineError
// (at most maxReported), with their count, and skipped. A malformed
// blacklist line is an error naming every such line (up to 10), as the
// supervisors treat the same file: a skipped entry would crawl a host the
// user wanted left alone. A list that cannot be read is an error.
func newLinkFilter(cfg Config) (*linkFilter, []error, int, error) {
	f := &linkFilter{
		maxDepth:  limit(cfg.MaxPathDepth, DefaultMaxPathDepth),
		maxRepeat: limit(cfg.MaxRepeats, DefaultMaxRepeats),
		hostCap:   limit(cfg.HostBudget, DefaultHostBudget),
		recordCap: limit(cfg.RecordBudget, DefaultRecordBudget),
		fanout:    limit(cfg.MaxFanout, DefaultMaxFanout),
	}
	if cfg.Blacklist != "" {
		// The supervisors read the same file: its addresses are theirs to
		// refuse at dial time; the dispatcher never queues its hosts.
		bl, err := fetch.LoadBlacklist(cfg.Blacklist)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("dispatcher: %w", err)
		}
		f.blacklist = make(hostSet, len(bl.Hosts))
		for _, h := range bl.Hosts {
			f.blacklist[h.Host] = true
		}
	}
	var bad []error
	nbad := 0
	note := func(e *records.LineError) {
		nbad++
		if len(bad) < maxReported {
			bad = append(bad, e)
		}
	}
	if cfg.ExcludeTop > 0 {
		if cfg.TopSites == "" {
			return nil, nil, 0, errors.New("dispatcher: ExcludeTop needs a TopSites file")
		}
		r, err := os.Open(cfg.TopSites)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("dispatcher: top sites: %w", err)
		}
		f.top, err = readTopSites(cfg.TopSites, r, cfg.ExcludeTop, note)
		r.Close()
		if err != nil {
			return nil, nil, 0, fmt.Errorf("dispatcher: top sites: %w", err)
		}
	}
	return f, bad, nbad, nil
}

// check returns why the normalized URL norm, reached at depth, is not
// followed, or "" when nothing about the URL itself stops it.
func (f *linkFilter) check(norm string, depth int) string {
	host, path := splitURL(norm)
	name := hostName(host)
	if f.blacklist.match(name, "") {
		return FilterBlacklisted
	}
	if depth == 0 {
		return ""
	}
	if len(f.top) > 0 {
		_, domain := hostDomain(norm)
		if f.top.match(name, domain) {
			return FilterTopSite
		}
	}
	return pathTrap(path, f.maxDepth, f.maxRepeat)
}

// budget returns why a link new to the crawl, reached at depth, is not
// queued, or "" after charging it to its host's count hostN and its
// record's count recN (tasks queued by this process; see budgets.go). A
// record's own links are charged but never refused.
func (f *linkFilter) budget(hostN, recN *int, depth int) string {
	if depth > 0 {
		if f.hostCap > 0 && *hostN >= f.hostCap {
			return FilterHostBudget
		}
		if f.recordCap > 0 && *recN >= f.recordCap {
			return FilterRecordBudget
		}
	}
	*hostN++
	*recN++
	return ""
}

// pathTrap checks an escaped path (no query) against the trap limits: more
// than maxDepth segments, or one segment more than maxRepeat times (an
// ever-deeper relative link: /a/a/a/a, /x/y/x/y/x/y/x/y). A trailing slash
// adds no segment. Limits <= 0 are off.
func pathTrap(path string, maxDepth, maxRepeat int) string {
	path = strings.TrimPrefix(path, "/")
	path = strings.TrimSuffix(path, "/")
	if path == "" {
		return ""
	}
	n := strings.Count(path, "/") + 1
	if maxDepth > 0 && n > maxDepth {
		return FilterPathDepth
	}
	if maxRepeat <= 0 || n <= maxRepeat {
		return ""
	}
	counts := make(map[string]int, n)
	for seg := range strings.SplitSeq(path, "/") {
		counts[seg]++
		if counts[seg] > maxRepeat {
			return FilterRepeats
		}
	}
	return ""
}

// splitURL returns the host[:port] and the escaped path of a normalized
// URL (scheme://host/path?query), without parsing it again.
func splitURL(norm string) (host, path string) {
	_, rest, ok := strings.Cut(norm, "://")
	if !ok {
		return "", ""
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		return rest, "/"
	}
	host, rest = rest[:end], rest[end:]
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	if rest == "" {
		rest = "/"
	}
	return host, rest
}

// hostName strips the port (and IPv6 brackets) from host[:port].
func hostName(host string) string {
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			return host[1:i]
		}
		return host
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		return host[:i]
	}
	return host
}

// pageLinks normalizes a fetched page's links, drops duplicates, keeps at
// most maxLinks, and returns none when they fan out past the filter's
// limit: to more distinct registrable domains, or to more distinct hosts
// outside the page's own registrable domain. Such a page is a link farm,
// and expanding it would flood the frontier with hosts that say nothing
// about anyone. Hosts count as well as domains because a farm spreads over
// subdomains as readily as over domains (thousands of links over under a
// hundred domains but hundreds of hosts); the page's own domain is left
// out of the host count, so a site's directory of its own subdomains (a
// university's departments) is not a farm. Links refused here are counted
// in d.run.filtered. texts are the links' anchor texts by index, up to
// the last link that has one (nil when none has).
func (d *Dispatcher) pageLinks(page string, links []wire.Link) (out, texts []string) {
	seen := make(map[string]bool)
	hosts := make(map[string]bool)
	last := 0 // links up to the last with a text
	for _, link := range links {
		if len(out) >= maxLinks {
			break
		}
		l := link.URL
		if !records.LooksLikeURL(l) {
			continue
		}
		if len(l) > etl.MaxURLLength {
			d.run.filtered[FilterURLLength]++
			continue
		}
		n, err := etl.NormalizeURL(l)
		if err != nil {
			continue
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
		texts = append(texts, link.Text)
		if link.Text != "" {
			last = len(out)
		}
		host, _ := splitURL(n)
		hosts[hostName(host)] = true
	}
	texts = texts[:last:last]
	if last == 0 {
		texts = nil
	}
	fan := d.filter.fanout
	if fan <= 0 || len(hosts) <= fan {
		return out, texts // neither count can pass the number of hosts
	}
	_, own := hostDomain(page)
	domains := make(map[string]bool)
	foreign := make(map[string]bool) // hosts outside the page's own domain
	for _, n := range out {
		host, dom := hostDomain(n)
		domains[dom] = true
		if dom != own {
			foreign[hostName(host)] = true
		}
	}
	if len(domains) <= fan && len(foreign) <= fan {
		return out, texts
	}
	d.run.filtered[FilterLinkFarm] += int64(len(out))
	d.run.linkFarms++
	d.log.Debug("link farm not expanded", "url", page, "links", len(out), "domains", len(domains), "other_hosts", len(foreign))
	return nil, nil
}

// keepLinks returns the links check lets through at depth, counting the
// others in d.run.filtered. When none is refused it returns links itself.
func (d *Dispatcher) keepLinks(links []string, depth int) []string {
	var out []string
	for i, l := range links {
		why := d.filter.check(l, depth)
		if why == "" {
			if out != nil {
				out = append(out, l)
			}
			continue
		}
		d.run.filtered[why]++
		if out == nil {
			out = make([]string, i, len(links)-1)
			copy(out, links[:i])
		}
	}
	if out == nil {
		return links
	}
	return out
}

// hostSet is a set of lower-case host names. A name matches an entry equal
// to it or to one of its parent domains.
type hostSet map[string]bool

// match reports whether name (a host name without port) or one of its
// parent domains is in the set. With stop set (a registrable domain), the
// walk ends there: a list of popular sites that names a shared hosting
// suffix must not exclude every site under it.
func (s hostSet) match(name, stop string) bool {
	if len(s) == 0 || name == "" {
		return false
	}
	name = strings.TrimSuffix(name, ".")
	for {
		if s[name] {
			return true
		}
		if name == stop {
			return false
		}
		i := strings.IndexByte(name, '.')
		if i < 0 {
			return false
		}
		name = name[i+1:]
	}
}

// hostEntry validates and lower-cases a host name from a list file:
// dot-separated labels of letters, digits, "-" and "_", none empty or over
// 63 bytes (the supervisors accept the same names). A trailing dot is
// dropped; subdomains are always included, so no wildcard is needed.
func hostEntry(s string) (string, error) {
	h := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
	if h == "" {
		return "", errors.New("empty host name")
	}
	if len(h) > 253 {
		return "", errors.New("host name longer than 253 bytes")
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("%q is not a host name (empty or over-long label)", s)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("%q is not a host name (character %q)", s, c)
			}
		}
	}
	return h, nil
}

// readLines calls fn with each line of r (numbered from 1, without its
// line ending; the first without a byte order mark). A line longer than
// maxListLine is reported as too long and skipped.
func readLines(r io.Reader, fn func(line int, text string, tooLong bool)) error {
	br := bufio.NewReaderSize(r, maxListLine)
	for n := 1; ; n++ {
		b, err := br.ReadSlice('\n')
		tooLong := false
		for errors.Is(err, bufio.ErrBufferFull) {
			tooLong = true
			_, err = br.ReadSlice('\n')
		}
		if err != nil && err != io.EOF {
			return err
		}
		if len(b) == 0 && err == io.EOF && !tooLong {
			return nil
		}
		if n == 1 {
			b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
		}
		b = bytes.TrimRight(b, "\r\n")
		fn(n, string(b), tooLong)
		if err == io.EOF {
			return nil
		}
	}
}

// readTopSites parses a ranked list of popular sites, "rank,domain" per
// line (further columns ignored; a header line, "#" comment lines and
// blank lines skipped), and returns the domains ranked 1 to n. Malformed
// lines go to bad and are skipped.
func readTopSites(name string, r io.Reader, n int, bad func(*records.LineError)) (hostSet, error) {
	top := make(hostSet)
	first := true
	err := readLines(r, func(line int, text string, tooLong bool) {
		header := first
		first = false
		if tooLong {
			bad(&records.LineError{File: name, Line: line, Reason: fmt.Sprintf("longer than %d bytes", maxListLine)})
			return
		}
		text = strings.TrimSpace(text)
		if text == "" || strings.HasPrefix(text, "#") {
			first = header // the header may follow blank or comment lines
			return
		}
		rankText, rest, ok := strings.Cut(text, ",")
		domain, _, _ := strings.Cut(rest, ",")
		rankText = strings.Trim(strings.TrimSpace(rankText), `"`)
		domain = strings.Trim(strings.TrimSpace(domain), `"`)
		rank, err := strconv.Atoi(rankText)
		if err != nil && header {
			return // a header row: rank,domain
		}
		if !ok {
			bad(&records.LineError{File: name, Line: line, Reason: fmt.Sprintf("%q: want rank,domain", text)})
			return
		}
		if err != nil || rank < 1 {
			bad(&records.LineError{File: name, Line: line, Reason: fmt.Sprintf("rank %q is not a positive whole number", rankText)})
			return
		}
		h, err := hostEntry(domain)
		if err != nil {
			bad(&records.LineError{File: name, Line: line, Reason: err.Error()})
			return
		}
		if rank <= n {
			top[h] = true
		}
	})
	return top, err
}
