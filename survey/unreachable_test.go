package survey_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"backfill/fetch"
	"backfill/proctest"
	"backfill/survey"
	"backfill/survey/surveytest"
	"backfill/wire"
)

// An address the network says cannot be reached (an ICMP destination
// unreachable from a router) is "unreachable", kept apart from filtered
// (no answer) and closed (a reset). Loopback never answers so, so the
// test builds a network of its own: a client namespace joined by a veth
// pair to a router namespace that forwards, where
//
//	netHostUnreach (10.9.1.0/24) has an unreachable route: ICMP host unreachable
//	netNoRoute     (10.9.2.0/24) has no route at all:      ICMP net unreachable
//
// The survey runs inside the client namespace: a socket belongs to the
// namespace of the process that made it, so that part is this test
// binary again, started there with `ip netns exec` (insideEnv set), and
// it checks the rows. Out here, the router's ICMP counter proves the
// answers were ICMP messages, not the client's own routing failing.
func TestUnreachable(t *testing.T) {
	if os.Getenv(insideEnv) != "" {
		unreachableInside(t)
		return
	}
	t.Parallel()
	if os.Geteuid() != 0 {
		proctest.NotRoot(t, "the test builds network namespaces, which needs root (CI runs it as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("the test needs ip (apt-get install iproute2): %v", err)
	}
	n := newICMPNet(t)
	sent := n.destUnreachSent(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", n.client, "env", insideEnv+"=1",
		exe, "-test.run=^TestUnreachable$", "-test.count=1", "-test.v").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestUnreachable")) {
		t.Fatalf("the survey inside the namespace: %v\n%s", err, out)
	}
	// Two port probes and two web probes (http, https), each answered by
	// one ICMP message.
	if got := n.destUnreachSent(t) - sent; got < 4 {
		t.Errorf("the router sent %d ICMP destination unreachable messages, want at least 4\n%s", got, out)
	}
}

// insideEnv tells the test binary it runs inside the client namespace.
const insideEnv = "BACKFILL_SURVEY_TEST_INSIDE"

// The test network's addresses.
var (
	hostUnreach = netip.MustParseAddr("10.9.1.1")
	noRoute     = netip.MustParseAddr("10.9.2.1")
)

// unreachableInside surveys the unreachable addresses, ports and web,
// from inside the client namespace.
func unreachableInside(t *testing.T) {
	fc := fetch.Config{UserAgent: testUA, AllowLoopback: true, AllowPrivate: true}
	// A blocklist of the test network's own: the default one holds
	// 10.0.0.0/8.
	fb, err := fetch.ParseBlacklist(strings.NewReader("10.9.99.0/24\n"), "test blocklist")
	if err != nil {
		t.Fatal(err)
	}
	var bl survey.Blocklist
	bl.Add(fb, "the test blocklist")
	var out bytes.Buffer
	_, err = survey.RunPorts(context.Background(), survey.PortsConfig{
		Config: survey.Config{StateDir: filepath.Join(t.TempDir(), "state"), Out: &out, Cluster: localFetch(context.Background(), t, 1, fc),
			Spec: wire.SurveySpec{Timeout: patientTimeout, UserAgent: testUA}},
		Targets: []string{hostUnreach.String(), noRoute.String()}, Ports: []int{80}, Blocklist: bl,
	})
	if err != nil {
		t.Fatal(err)
	}
	ports := readRows[survey.PortRow](t, out.Bytes())
	if len(ports) != 2 {
		t.Fatalf("%d port rows, want 2: %s", len(ports), out.Bytes())
	}
	for _, r := range ports {
		if r.State != survey.PortUnreachable {
			t.Errorf("%s:%d is %s, want %s (%+v)", r.IP, r.Port, r.State, survey.PortUnreachable, r)
		}
	}

	w := surveytest.Start(t, surveytest.Options{Domains: 1, Addresses: 1, Prompt: true})
	domain := surveytest.Domain(0)
	w.SetA(domain, hostUnreach)
	out.Reset()
	_, err = survey.RunWeb(context.Background(), survey.WebConfig{
		Config:  survey.Config{StateDir: filepath.Join(t.TempDir(), "state"), Out: &out, Cluster: localFetch(context.Background(), t, 1, fc), Spec: webSpec(w)},
		Domains: writeFile(t, "domains.txt", domain+"\n"), Resolver: resolver(t, w),
	})
	if err != nil {
		t.Fatal(err)
	}
	web := readRows[survey.WebRow](t, out.Bytes())
	if len(web) != 1 {
		t.Fatalf("%d web rows, want 1: %s", len(web), out.Bytes())
	}
	r := web[0]
	want(t, r, survey.Unresponsive, survey.WebUnreachable)
	if len(r.Probes) != 2 || r.Probes[0].Class != survey.WebUnreachable || r.Probes[1].Class != survey.WebUnreachable {
		t.Errorf("probes %+v, want http and https unreachable", r.Probes)
	}
	t.Logf("ports %+v; web %+v", ports, r)
}

// icmpNet is the test network: a client namespace and a router
// namespace. Their names carry the test process's id, so concurrent runs
// never meet; both go when the test ends, and what a killed run left is
// removed by the next.
type icmpNet struct {
	client, router string
}

// icmpNetPrefix starts the names of the test's namespaces.
const icmpNetPrefix = "bfsv"

func newICMPNet(t *testing.T) *icmpNet {
	removeStaleNetns(t)
	prefix := fmt.Sprintf("%s%d-", icmpNetPrefix, os.Getpid())
	n := &icmpNet{client: prefix + "client", router: prefix + "router"}
	for _, ns := range []string{n.client, n.router} {
		ipCmd(t, "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		ipCmd(t, "-n", ns, "link", "set", "lo", "up")
	}
	ipCmd(t, "-n", n.client, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", n.router)
	ipCmd(t, "-n", n.client, "addr", "add", "10.9.0.1/30", "dev", "eth0")
	ipCmd(t, "-n", n.router, "addr", "add", "10.9.0.2/30", "dev", "eth0")
	ipCmd(t, "-n", n.client, "link", "set", "eth0", "up")
	ipCmd(t, "-n", n.router, "link", "set", "eth0", "up")
	for _, p := range []netip.Addr{hostUnreach, noRoute} {
		ipCmd(t, "-n", n.client, "route", "add", netip.PrefixFrom(p, 24).Masked().String(), "via", "10.9.0.2")
	}
	ipCmd(t, "-n", n.router, "route", "add", "unreachable", netip.PrefixFrom(hostUnreach, 24).Masked().String())
	// A router answers with ICMP only when it forwards; and it answers
	// every probe, not one a second.
	ipCmd(t, "netns", "exec", n.router, "sh", "-c",
		"echo 1 >/proc/sys/net/ipv4/ip_forward && echo 0 >/proc/sys/net/ipv4/icmp_ratelimit")
	return n
}

// destUnreachSent is the router's count of ICMP destination unreachable
// messages sent (/proc/net/snmp, Icmp OutDestUnreachs).
func (n *icmpNet) destUnreachSent(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", n.router, "cat", "/proc/net/snmp").Output()
	if err != nil {
		t.Fatalf("router's /proc/net/snmp: %v", err)
	}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "Icmp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, name := range names {
			if name == "OutDestUnreachs" && i < len(f) {
				v, _ := strconv.Atoi(f[i])
				return v
			}
		}
	}
	t.Fatalf("no Icmp OutDestUnreachs in the router's /proc/net/snmp:\n%s", out)
	return 0
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// removeStaleNetns deletes the namespaces of runs whose process is gone.
func removeStaleNetns(t *testing.T) {
	re := regexp.MustCompile(`^` + icmpNetPrefix + `(\d+)-`)
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		m := re.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if pid, _ := strconv.Atoi(m[1]); syscall.Kill(pid, 0) == syscall.ESRCH {
			exec.Command("ip", "netns", "del", e.Name()).Run()
			t.Logf("removed namespace %s, left by a run that died", e.Name())
		}
	}
}
