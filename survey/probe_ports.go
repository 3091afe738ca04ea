package survey

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode"

	"backfill/wire"
)

// Banner limits: at most MaxBanner bytes are read, for at most twice the
// connect timeout (and at least bannerWaitMin).
const (
	MaxBanner     = 1024
	bannerWaitMin = 500 * time.Millisecond
)

func (p *Prober) probePorts(ctx context.Context, c *connector, ports []int) []wire.PortProbe {
	out := make([]wire.PortProbe, 0, len(ports))
	for _, port := range ports {
		pp := wire.PortProbe{Port: port}
		if err := c.do(ctx, func() { pp = p.connect(ctx, c.ip, port, c.spec) }); err != nil {
			break // the task is being abandoned: the result is not sent
		}
		out = append(out, pp)
	}
	return out
}

// connect makes one TCP connection through the address guard and says
// how it went; with a banner asked for, it reads the first bytes.
func (p *Prober) connect(ctx context.Context, ip netip.Addr, port int, spec wire.SurveySpec) wire.PortProbe {
	pp := wire.PortProbe{Port: port}
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
	dctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	start := time.Now()
	conn, err := p.fetcher.DialContext(dctx, "tcp", addr)
	pp.Latency = time.Since(start)
	if err != nil {
		pp.State = dialState(err, dctx, ctx)
		if pp.State == PortError || pp.State == PortExcluded {
			pp.Error = err.Error()
		}
		if pp.State == PortFiltered || pp.State == PortExcluded {
			pp.Latency = 0
		}
		return pp
	}
	defer conn.Close()
	pp.State = PortOpen
	if spec.Banner > 0 {
		pp.Banner, pp.Error = banner(conn, ip, port, spec)
	}
	return pp
}

// banner reads the first bytes a server sends; on a web port it asks with
// a HEAD request first, as such servers wait for the client to speak. It
// reads until Banner bytes came, the greeting is complete (bannerDone), the
// server closes, or the banner time is up.
func banner(conn net.Conn, ip netip.Addr, port int, spec wire.SurveySpec) (string, string) {
	// The dialer's connection sets its own read deadline on every read, so
	// the wait is a timer that closes the connection.
	wait := max(2*spec.Timeout, bannerWaitMin)
	timer := time.AfterFunc(wait, func() { conn.Close() })
	defer timer.Stop()
	web := webPorts[port]
	if web {
		req := fmt.Sprintf("HEAD / HTTP/1.0\r\nHost: %s\r\nUser-Agent: %s\r\n\r\n", ip, spec.UserAgent)
		if _, err := io.WriteString(conn, req); err != nil {
			return "", "banner: " + err.Error()
		}
	}
	buf := make([]byte, min(spec.Banner, MaxBanner))
	n := 0
	var err error
	for n < len(buf) && err == nil && !bannerDone(buf[:n], web) {
		var m int
		m, err = conn.Read(buf[n:])
		n += m
	}
	if n == 0 && err != nil && !isTimeoutErr(err) && err != io.EOF && timer.Stop() {
		return "", "banner: " + err.Error()
	}
	return printable(buf[:n]), ""
}

// bannerDone reports whether b is a whole greeting: on a web port the
// response header (up to its blank line); elsewhere a line that is not
// the continuation of a multi-line reply ("220-" in SMTP and FTP).
func bannerDone(b []byte, web bool) bool {
	if web {
		return bytes.Contains(b, []byte("\r\n\r\n")) || bytes.Contains(b, []byte("\n\n"))
	}
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return false
	}
	last := b[bytes.LastIndexByte(b[:len(b)-1], '\n')+1:]
	continued := len(last) >= 4 && last[3] == '-' && isDigits(last[:3])
	return !continued
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// printable keeps a banner readable in JSON and CSV: valid UTF-8, control
// characters other than tab and newline as U+FFFD.
func printable(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || r == '\r' || !unicode.IsControl(r) {
			return r
		}
		return '\uFFFD'
	}, s)
}
