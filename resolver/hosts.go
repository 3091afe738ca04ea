package resolver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"slices"
	"strings"
)

// DefaultHostsFile holds the names a machine answers itself, before any
// DNS server is asked: an operator who pins a name there (a staging site,
// a host behind a private network) expects the crawl to honour it as every
// other program on the machine does.
const DefaultHostsFile = "/etc/hosts"

// maxHostsLine bounds one line of a hosts file; a longer one is not a
// hosts line.
const maxHostsLine = 64 << 10

// Hosts are the addresses a hosts file gives names, IPv4 first, each family
// in the file's order. A Cache answers a name found here without a query.
type Hosts map[string][]netip.Addr

// HostsLineError is a line of a hosts file that was skipped.
type HostsLineError struct {
	File string
	Line int
	Err  string
}

func (e *HostsLineError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Err)
}

// ReadHosts reads the hosts file at path. A file that does not exist gives
// no names and no error; bad lines are skipped, each returned in skipped.
func ReadHosts(path string) (h Hosts, skipped []error, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Hosts{}, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("resolver: hosts file: %w", err)
	}
	defer f.Close()
	return ParseHosts(f, path)
}

// ParseHosts reads a hosts file: an address, then the names it answers
// for, "#" to the end of a line a comment. file names the source in the
// errors of skipped lines (an address that does not parse, a name that is
// not one, a line too long); the others are read.
func ParseHosts(r io.Reader, file string) (h Hosts, skipped []error, err error) {
	h = Hosts{}
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, long, err := readHostsLine(br)
		if err == io.EOF && line == "" && !long {
			break
		}
		if err != nil && err != io.EOF {
			return nil, skipped, fmt.Errorf("resolver: %s:%d: %w", file, n, err)
		}
		if long {
			skipped = append(skipped, &HostsLineError{file, n, fmt.Sprintf("line longer than %d bytes", maxHostsLine)})
		} else if bad := h.addLine(line); bad != "" {
			skipped = append(skipped, &HostsLineError{file, n, bad})
		}
		if err == io.EOF {
			break
		}
	}
	for name, addrs := range h {
		slices.SortStableFunc(addrs, func(a, b netip.Addr) int {
			switch {
			case a.Is4() == b.Is4():
				return 0
			case a.Is4():
				return -1
			}
			return 1
		})
		h[name] = addrs
	}
	return h, skipped, nil
}

// readHostsLine reads one line, without its end; long reports a line past
// maxHostsLine, whose rest is read and dropped.
func readHostsLine(br *bufio.Reader) (line string, long bool, err error) {
	var b strings.Builder
	for {
		chunk, isPrefix, err := br.ReadLine()
		if !long {
			if b.Len()+len(chunk) > maxHostsLine {
				long = true
				b.Reset()
			} else {
				b.Write(chunk)
			}
		}
		if err != nil || !isPrefix {
			if long {
				return "", true, err
			}
			return b.String(), false, err
		}
	}
}

// addLine adds the names of one line, or says why it is not a hosts line.
func (h Hosts) addLine(line string) string {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return ""
	}
	ip, err := netip.ParseAddr(fields[0])
	if err != nil {
		return fmt.Sprintf("%q is not an address", fields[0])
	}
	if len(fields) == 1 {
		return fmt.Sprintf("address %s names no host", fields[0])
	}
	ip = ip.WithZone("").Unmap()
	for _, name := range fields[1:] {
		if !hostName(key(name)) {
			return fmt.Sprintf("%q is not a host name", name)
		}
	}
	for _, name := range fields[1:] {
		k := key(name)
		if !slices.Contains(h[k], ip) {
			h[k] = append(h[k], ip)
		}
	}
	return ""
}

// hostName reports a name of letters, digits, hyphens, underscores and
// dots, as hosts files hold.
func hostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// answer is the hosts file's answer for the cache key k.
func (h Hosts) answer(k string) (Answer, bool) {
	addrs, ok := h[k]
	if !ok {
		return Answer{}, false
	}
	a := Answer{IPs: make([]string, len(addrs))}
	for i, ip := range addrs {
		a.IPs[i] = ip.String()
	}
	return a, true
}
