package provisioning_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"backfill/proctest"
)

// netns is the rehearsal's network: a namespace holding the bridge, and
// one namespace per host joined to it by a veth pair. Names carry the
// test process's id, so concurrent runs never meet; everything is
// removed when the test ends, and what a killed run left is removed by
// the next.
type netns struct {
	t      *testing.T
	prefix string
	sw     string
}

// netnsPrefix starts the names of the rehearsal's namespaces.
const netnsPrefix = "bfrh"

func newNetns(t *testing.T) *netns {
	removeStale(t)
	n := &netns{t: t, prefix: fmt.Sprintf("%s%d-", netnsPrefix, os.Getpid())}
	n.sw = n.prefix + "sw"
	n.ip("netns", "add", n.sw)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", n.sw).Run() })
	n.ip("-n", n.sw, "link", "add", "br0", "type", "bridge")
	n.ip("-n", n.sw, "link", "set", "br0", "up")
	return n
}

// removeStale deletes the namespaces (and their /etc/netns files) of
// rehearsals whose process is gone.
func removeStale(t *testing.T) {
	re := regexp.MustCompile(`^` + netnsPrefix + `(\d+)-`)
	for _, d := range []string{"/run/netns", "/etc/netns"} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			m := re.FindStringSubmatch(e.Name())
			if m == nil {
				continue
			}
			pid, _ := strconv.Atoi(m[1])
			if syscall.Kill(pid, 0) == syscall.ESRCH {
				if d == "/run/netns" {
					exec.Command("ip", "netns", "del", e.Name()).Run()
				} else {
					os.RemoveAll(filepath.Join(d, e.Name()))
				}
				t.Logf("removed %s/%s, left by a rehearsal that died", d, e.Name())
			}
		}
	}
}

func (n *netns) ns(host string) string { return n.prefix + host }

func (n *netns) ip(args ...string) {
	n.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		n.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// run runs a command inside a host's namespace.
func (n *netns) run(host string, args ...string) {
	n.t.Helper()
	n.ip(append([]string{"netns", "exec", n.ns(host)}, args...)...)
}

// addHost makes a host's namespace, with addr/24 on its link to the bridge.
func (n *netns) addHost(host, addr string) {
	n.t.Helper()
	ns := n.ns(host)
	n.ip("netns", "add", ns)
	n.t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	n.ip("-n", ns, "link", "set", "lo", "up")
	n.ip("-n", n.sw, "link", "add", "v-"+host, "type", "veth", "peer", "name", "eth0", "netns", ns)
	n.ip("-n", n.sw, "link", "set", "v-"+host, "master", "br0", "up")
	n.ip("-n", ns, "addr", "add", addr+"/24", "dev", "eth0")
	n.ip("-n", ns, "link", "set", "eth0", "up")
}

// etcHosts gives a host's namespace its own /etc/hosts (ip netns exec
// mounts /etc/netns/NAME/hosts over it).
func (n *netns) etcHosts(host, content string) {
	n.t.Helper()
	d := filepath.Join("/etc/netns", n.ns(host))
	n.t.Cleanup(func() { os.RemoveAll(d) })
	writeTestFile(n.t, filepath.Join(d, "hosts"), []byte("127.0.0.1 localhost\n"+content))
}

// probe is one connection expectReach tries: from a host to an address.
type probe struct{ from, to string }

// expectReach dials from hosts at once: each of allowed must connect,
// each of blocked must time out (dropped by the firewall), proving that
// the port is open to the allowed and closed to the others.
func (n *netns) expectReach(t *testing.T, allowed, blocked []probe) {
	t.Helper()
	type try struct {
		probe
		want string
	}
	var tries []try
	for _, p := range allowed {
		tries = append(tries, try{p, "connected"})
	}
	for _, p := range blocked {
		tries = append(tries, try{p, "timeout"})
	}
	results := make([]string, len(tries))
	var wg sync.WaitGroup
	for i, p := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			timeout := "20s" // an answer comes at once; only a drop waits
			if p.want == "timeout" {
				timeout = "1500ms"
			}
			cmd := exec.Command("ip", append([]string{"netns", "exec", n.ns(p.from)}, childCmd("dial", p.to, []string{"BACKFILL_REHEARSAL_TIMEOUT=" + timeout})...)...)
			out, err := cmd.CombinedOutput()
			results[i] = strings.TrimSpace(string(out))
			if err != nil {
				results[i] += " (" + err.Error() + ")"
			}
		}()
	}
	wg.Wait()
	for i, p := range tries {
		if results[i] != p.want {
			t.Errorf("%s dialling %s: %s, want %s", p.from, p.to, results[i], p.want)
		}
	}
}

// proc is a process running in a host's namespace.
type proc struct {
	*proctest.Process
	name   string
	stdout bytes.Buffer // read once the process has ended
}

// start runs args inside host's namespace with env added to the test's
// environment; the test's end kills it if it is still running.
func (n *netns) start(t *testing.T, host, name string, args, env []string) *proc {
	t.Helper()
	p := &proc{name: name}
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.ns(host)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = &p.stdout
	p.Process = proctest.Start(t, cmd)
	return p
}

// waitLine waits for a line of the process's stderr matching re.
func (p *proc) waitLine(t *testing.T, re string, what string) string {
	t.Helper()
	line, ok := p.Stderr.Wait(regexp.MustCompile(re), time.Now().Add(time.Minute))
	if !ok {
		t.Fatalf("%s %s within a minute:\n%s", p.name, what, &p.Stderr)
	}
	return line
}

func (p *proc) signal(s os.Signal) { p.Cmd.Process.Signal(s) }

func (p *proc) waitExit(t *testing.T, within time.Duration) int {
	t.Helper()
	code, err := p.Wait(within)
	if err != nil {
		t.Fatalf("%s: %v\n%s", p.name, err, &p.Stderr)
	}
	return code
}

// maxRSS is the finished process's peak resident memory, KiB.
func (p *proc) maxRSS() int64 {
	if ru, ok := p.Cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && runtime.GOOS == "linux" {
		return ru.Maxrss
	}
	return 0
}
