package fetch

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"

	"backfill/hostname"
)

// Blacklist is a user's list of what never to fetch.
type Blacklist struct {
	Hosts    []BlacklistHost // refused by the supervisor, subdomains included
	Prefixes []netip.Prefix  // refused by the fetcher at dial time (an IP is a /32 or /128)
}

// Names is the set of the list's host names, to match against.
func (b Blacklist) Names() NameSet {
	if len(b.Hosts) == 0 {
		return nil
	}
	s := make(NameSet, len(b.Hosts))
	for _, h := range b.Hosts {
		if _, ok := s[h.Host]; !ok {
			s[h.Host] = h.Where
		}
	}
	return s
}

// NameSet is a blacklist's host names, each with where it was read. A
// name is in the set when it, or a domain it belongs to, was listed: a
// listed name covers its subdomains.
type NameSet map[string]string

// Match reports whether host ("name" or "name:port", any case, with or
// without a final dot) is listed, and where.
func (s NameSet) Match(host string) (where string, ok bool) {
	if len(s) == 0 {
		return "", false
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	for d := name; d != ""; {
		if w, ok := s[d]; ok {
			return w, true
		}
		i := strings.IndexByte(d, '.')
		if i < 0 {
			break
		}
		d = d[i+1:]
	}
	return "", false
}

// BlacklistHost is one host entry and where it was read.
type BlacklistHost struct {
	Host  string // ASCII form (lower case, punycode), no trailing dot
	Where string // file:line
}

// LoadBlacklist reads a blacklist file; see ParseBlacklist.
func LoadBlacklist(path string) (Blacklist, error) {
	f, err := os.Open(path)
	if err != nil {
		return Blacklist{}, fmt.Errorf("blacklist: %w", err)
	}
	defer f.Close()
	return ParseBlacklist(f, path)
}

// ParseBlacklist reads a blacklist: one entry per line, a host name
// (which covers its subdomains too), an IP address or a CIDR; "#" starts a
// comment; blank lines are skipped. A line that is none of these is an
// error naming name:line.
func ParseBlacklist(r io.Reader, name string) (Blacklist, error) {
	var bl Blacklist
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		where := fmt.Sprintf("%s:%d", name, n)
		if strings.Contains(line, "/") {
			p, err := netip.ParsePrefix(line)
			if err != nil {
				return Blacklist{}, fmt.Errorf("%s: %q is not a CIDR: %v", where, line, err)
			}
			bl.Prefixes = append(bl.Prefixes, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(strings.Trim(line, "[]")); err == nil {
			if ip.Zone() != "" {
				return Blacklist{}, fmt.Errorf("%s: %q: an address with a zone cannot be blacklisted", where, line)
			}
			ip = ip.Unmap()
			bl.Prefixes = append(bl.Prefixes, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		host, err := blacklistHostName(line)
		if err != nil {
			return Blacklist{}, fmt.Errorf("%s: %v", where, err)
		}
		bl.Hosts = append(bl.Hosts, BlacklistHost{Host: host, Where: where})
	}
	if err := sc.Err(); err != nil {
		return Blacklist{}, fmt.Errorf("%s:%d: %w", name, n+1, err)
	}
	return bl, nil
}

// blacklistHostName checks a host name entry and returns it in its ASCII
// form (package hostname), the form URLs' hosts are compared in, so an
// entry spelt in Unicode refuses the host spelt in punycode too:
// dot-separated labels of letters, digits, "-" and "_", none empty or over
// 63 bytes.
func blacklistHostName(s string) (string, error) {
	a, err := hostname.ASCII(s)
	if err != nil {
		return "", fmt.Errorf("%q is not a host name, IP address or CIDR: %v", s, err)
	}
	h := strings.TrimSuffix(a, ".")
	if h == "" || len(h) > 253 {
		return "", fmt.Errorf("%q is not a host name, IP address or CIDR", s)
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("%q is not a host name, IP address or CIDR", s)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("%q is not a host name, IP address or CIDR (character %q)", s, c)
			}
		}
	}
	return h, nil
}
