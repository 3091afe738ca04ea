package survey

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/netip"
	"os"
	"slices"
	"strings"

	"golang.org/x/net/idna"

	"backfill/resolver"
)

// domainIn is one domain of the input and where it was read.
type domainIn struct {
	name string
	seq  int64 // its place in the input, 1-based
}

// InputReport says what reading the input skipped.
type InputReport struct {
	Read   int      `json:"read"`   // domains (or targets) kept
	Bad    int      `json:"bad"`    // lines skipped as malformed
	Dups   int      `json:"dups"`   // lines repeating an earlier domain
	Errors []string `json:"errors"` // "file:line: reason", the first maxInputErrors
}

const maxInputErrors = 50

func (r *InputReport) bad(where string, format string, args ...any) {
	r.Bad++
	if len(r.Errors) < maxInputErrors {
		r.Errors = append(r.Errors, where+": "+fmt.Sprintf(format, args...))
	}
}

// readDomains reads a domain list: one domain a line with "#" comments,
// or a CSV file with a header row naming a "domain" column. A line that
// is not a domain is reported with file:line and skipped; a repeated
// domain is kept once.
func readDomains(path string) ([]domainIn, InputReport, error) {
	var rep InputReport
	f, err := os.Open(path)
	if err != nil {
		return nil, rep, fmt.Errorf("survey: domains: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	first, _ := br.Peek(4096)
	var out []domainIn
	seen := map[string]bool{}
	add := func(line int, raw string) {
		where := fmt.Sprintf("%s:%d", path, line)
		d, err := domainName(raw)
		if err != nil {
			rep.bad(where, "%v", err)
			return
		}
		if seen[d] {
			rep.Dups++
			return
		}
		seen[d] = true
		out = append(out, domainIn{name: d, seq: int64(line)})
	}
	if isCSV(path, first) {
		cr := csv.NewReader(br)
		cr.FieldsPerRecord = -1
		cr.ReuseRecord = true
		header, err := cr.Read()
		if err != nil {
			return nil, rep, fmt.Errorf("survey: %s:1: header: %w", path, err)
		}
		col := slices.IndexFunc(header, func(h string) bool { return strings.EqualFold(strings.TrimSpace(h), "domain") })
		if col < 0 {
			return nil, rep, fmt.Errorf("survey: %s:1: no \"domain\" column in the header %q", path, strings.Join(header, ","))
		}
		for {
			rec, err := cr.Read()
			line, _ := cr.FieldPos(0)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				var pe *csv.ParseError
				if errors.As(err, &pe) {
					rep.bad(fmt.Sprintf("%s:%d", path, pe.Line), "%v", pe.Err)
					continue
				}
				return nil, rep, fmt.Errorf("survey: %s: %w", path, err)
			}
			if col >= len(rec) {
				rep.bad(fmt.Sprintf("%s:%d", path, line), "no domain column (%d fields)", len(rec))
				continue
			}
			add(line, rec[col])
		}
		rep.Read = len(out)
		return out, rep, nil
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	line := 0
	for sc.Scan() {
		line++
		s := sc.Text()
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		add(line, s)
	}
	if err := sc.Err(); err != nil {
		return nil, rep, fmt.Errorf("survey: %s:%d: %w", path, line+1, err)
	}
	rep.Read = len(out)
	return out, rep, nil
}

// isCSV: a .csv file, or one whose first line is a header naming a
// "domain" column among others.
func isCSV(path string, head []byte) bool {
	if strings.HasSuffix(strings.ToLower(path), ".csv") {
		return true
	}
	first, _, _ := strings.Cut(string(head), "\n")
	return strings.Contains(first, ",") && slices.ContainsFunc(strings.Split(first, ","), func(h string) bool {
		return strings.EqualFold(strings.TrimSpace(h), "domain")
	})
}

// domainName checks and normalizes one domain: lower case, no trailing
// dot, in its ASCII (punycode) form; a URL is taken for its host.
func domainName(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
		if j := strings.IndexAny(s, "/?#"); j >= 0 {
			s = s[:j]
		}
	}
	s = strings.TrimSuffix(strings.ToLower(s), ".")
	if s == "" {
		return "", fmt.Errorf("%q is not a domain name", raw)
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return "", fmt.Errorf("%q is an address, not a domain name", raw)
	}
	a, err := idna.Lookup.ToASCII(s)
	if err != nil || !strings.Contains(a, ".") || len(a) > 253 {
		return "", fmt.Errorf("%q is not a domain name", raw)
	}
	return a, nil
}

// maxTargets bounds a port survey's addresses; larger samples are drawn
// with --random.
const maxTargets = 1 << 24

// portTarget is one address of a port survey and the name it came from.
type portTarget struct {
	ip   netip.Addr
	name string
}

// expandTargets turns --targets items (IP, CIDR or host name) into
// addresses, resolving names with res, in the order given, each address
// once.
func expandTargets(ctx context.Context, items []string, res *resolver.Resolver) ([]portTarget, InputReport, error) {
	var rep InputReport
	var out []portTarget
	seen := map[netip.Addr]bool{}
	add := func(ip netip.Addr, name string) error {
		if seen[ip] {
			rep.Dups++
			return nil
		}
		if len(out) >= maxTargets {
			return fmt.Errorf("survey: more than %d target addresses; survey a sample with --random", maxTargets)
		}
		seen[ip] = true
		out = append(out, portTarget{ip, name})
		return nil
	}
	for i, item := range items {
		where := fmt.Sprintf("target %d", i+1)
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if strings.Contains(item, "/") {
			p, err := netip.ParsePrefix(item)
			if err != nil {
				rep.bad(where, "%q is not a CIDR: %v", item, err)
				continue
			}
			p = p.Masked()
			size := new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-p.Bits()))
			if size.Cmp(big.NewInt(maxTargets)) > 0 {
				return nil, rep, fmt.Errorf("survey: %s: %s has more than %d addresses; survey a sample with --random", where, item, maxTargets)
			}
			for a := p.Addr(); p.Contains(a); a = a.Next() {
				if err := add(a, ""); err != nil {
					return nil, rep, err
				}
				if !a.Next().IsValid() {
					break
				}
			}
			continue
		}
		if ip, err := netip.ParseAddr(item); err == nil {
			if err := add(ip.Unmap(), ""); err != nil {
				return nil, rep, err
			}
			continue
		}
		name, err := domainName(item)
		if err != nil {
			rep.bad(where, "%v", err)
			continue
		}
		if res == nil {
			rep.bad(where, "%s: no resolver to look the name up", name)
			continue
		}
		a := res.Lookup(ctx, name)
		if a.Class != "" {
			rep.bad(where, "%s did not resolve: %s", name, a.Class)
			continue
		}
		for _, ip := range a.Addrs() {
			if err := add(ip, name); err != nil {
				return nil, rep, err
			}
		}
	}
	rep.Read = len(out)
	return out, rep, nil
}
