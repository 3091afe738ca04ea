package survey_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"backfill/survey"
	"backfill/survey/surveytest"
	"backfill/wire"
)

// portHost is a loopback address with an open port that greets and a
// closed port, and maybe an open port that stays silent and a filtered
// one (0 when not); it counts the connections it had open at once.
type portHost struct {
	ip                              netip.Addr
	greet, silent, closed, filtered int
	conns                           surveytest.Conns
}

func newPortHost(t *testing.T, ip string, silent, filtered bool) *portHost {
	h := &portHost{ip: netip.MustParseAddr(ip)}
	listen := func(greet bool) int {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				h.conns.Opened(h.ip, c)
				go func() {
					if greet {
						io.WriteString(c, greeting)
					}
					io.Copy(io.Discard, c)
					c.Close()
					h.conns.Closed(h.ip, c)
				}()
			}
		}()
		return ln.Addr().(*net.TCPAddr).Port
	}
	h.greet = listen(true)
	if silent {
		h.silent = listen(false)
	}
	ln, _ := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	h.closed = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if filtered {
		h.filtered = surveytest.FilteredPort(t, ip)
	}
	return h
}

// states are the states a host's ports must be found in.
func (h *portHost) states() map[int]string {
	m := map[int]string{h.greet: survey.PortOpen, h.closed: survey.PortClosed}
	if h.silent != 0 {
		m[h.silent] = survey.PortOpen
	}
	if h.filtered != 0 {
		m[h.filtered] = survey.PortFiltered
	}
	return m
}

// greeting is what a greeting port says; a banner grab stops at its end.
const greeting = "SSH-2.0-OpenSSH_9.6 test\r\n"

// The silent port (a banner wait) and the filtered one (a connect
// timeout) are on hosts in /24s of their own, so they wait side by side.
// As TestWebTimeouts, the test waits timeouts out and runs alone.
func TestPortSurvey(t *testing.T) {
	hosts := []*portHost{newPortHost(t, "127.3.0.1", true, false), newPortHost(t, "127.3.1.1", false, true), newPortHost(t, "127.3.2.1", false, false)}
	var ports []int
	for _, h := range hosts {
		for p := range h.states() {
			ports = append(ports, p)
		}
	}
	dir := t.TempDir()
	var out bytes.Buffer
	sum, err := survey.RunPorts(context.Background(), survey.PortsConfig{
		Config: survey.Config{StateDir: filepath.Join(dir, "state"), Out: &out, Cluster: local(t, 2, nil),
			Spec: wire.SurveySpec{Timeout: probeTimeout, Banner: 64, Delay: 5 * time.Millisecond, Rate: 500, Per24: 1, UserAgent: testUA}},
		Targets:   []string{"127.3.0.1", "127.3.1.1", "127.3.2.1/32", "10.1.2.3", "bad target!"},
		Ports:     ports,
		Blocklist: survey.DefaultBlocklist(), AllowLoopback: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	rows := readRows[survey.PortRow](t, out.Bytes())
	if len(rows) != 4*len(ports) || sum.Rows != len(rows) || sum.Input.Bad != 1 {
		t.Fatalf("%d rows (summary %d, input %+v), want %d", len(rows), sum.Rows, sum.Input, 4*len(ports))
	}
	byKey := map[string]survey.PortRow{}
	for _, r := range rows {
		byKey[net.JoinHostPort(r.IP, strconv.Itoa(r.Port))] = r
	}
	for _, h := range hosts {
		for port, want := range h.states() {
			r := byKey[net.JoinHostPort(h.ip.String(), strconv.Itoa(port))]
			if r.State != want {
				t.Errorf("%s:%d is %s, want %s (%+v)", h.ip, port, r.State, want, r)
			}
		}
		if r := byKey[net.JoinHostPort(h.ip.String(), strconv.Itoa(h.greet))]; r.Banner != greeting || r.Latency <= 0 {
			t.Errorf("banner %q latency %v", r.Banner, r.Latency)
		}
		if r := byKey[net.JoinHostPort(h.ip.String(), strconv.Itoa(h.silent))]; h.silent != 0 && (r.Banner != "" || r.Error != "") {
			t.Errorf("silent port: banner %q error %q", r.Banner, r.Error)
		}
		if n := h.conns.Max(h.ip); n > 1 {
			t.Errorf("%s had %d connections at once", h.ip, n)
		}
	}
	for _, p := range ports {
		r := byKey[net.JoinHostPort("10.1.2.3", strconv.Itoa(p))]
		if r.State != survey.PortExcluded || !strings.Contains(r.Error, "special-purpose 10.0.0.0/8") {
			t.Errorf("10.1.2.3:%d: %+v, want excluded", p, r)
		}
	}
	if sum.States[survey.PortOpen] != 4 || sum.HostsOpen != 3 || sum.States[survey.PortFiltered] != 1 {
		t.Errorf("summary %+v", sum)
	}
}

// A port survey refuses to start with no blocklist in effect; the dry run
// lists exactly the targets, none excluded, and connects to nothing.
func TestPortSurveyBlocklistAndDryRun(t *testing.T) {
	_, err := survey.RunPorts(context.Background(), survey.PortsConfig{Config: survey.Config{StateDir: t.TempDir()},
		Random: 10, Ports: []int{80}})
	if !errors.Is(err, survey.ErrNoBlocklist) {
		t.Fatalf("no blocklist: %v", err)
	}
	var lines []string
	rep, err := survey.PortTargets(context.Background(), survey.PortsConfig{Random: 1000, Seed: 7, Ports: []int{22, 80},
		Blocklist: survey.DefaultBlocklist()}, func(ip netip.Addr, port int) error {
		lines = append(lines, netip.AddrPortFrom(ip, uint16(port)).String())
		return nil
	})
	if err != nil || len(lines) != 2000 || rep.Read != 1000 {
		t.Fatalf("dry run: %d lines, %+v, %v", len(lines), rep, err)
	}
	bl := survey.DefaultBlocklist()
	seen := map[string]bool{}
	for _, l := range lines {
		ap := netip.MustParseAddrPort(l)
		if bl.Blocks(ap.Addr()) || seen[l] {
			t.Fatalf("dry run lists %s (blocked or repeated)", l)
		}
		seen[l] = true
	}
	again := 0
	survey.PortTargets(context.Background(), survey.PortsConfig{Random: 1000, Seed: 7, Ports: []int{22, 80}, Blocklist: bl},
		func(ip netip.Addr, port int) error {
			if seen[netip.AddrPortFrom(ip, uint16(port)).String()] {
				again++
			}
			return nil
		})
	if again != 2000 {
		t.Fatalf("the same seed drew %d of the 2000 targets again", again)
	}
	// Explicit targets on the blocklist are left out of a dry run too.
	var explicit []string
	survey.PortTargets(context.Background(), survey.PortsConfig{Targets: []string{"127.0.0.1", "192.0.2.1", "10.0.0.0/30"}, Ports: []int{1},
		Blocklist: bl, AllowLoopback: true}, func(ip netip.Addr, port int) error {
		explicit = append(explicit, fmt.Sprint(ip))
		return nil
	})
	if strings.Join(explicit, " ") != "127.0.0.1" {
		t.Fatalf("dry run of explicit targets: %v", explicit)
	}
}
