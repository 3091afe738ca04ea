package provisioning_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
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

	"backfill/provisioning"
	"backfill/testweb"
	"backfill/wire"
)

// The rehearsal's network: one /24 on a bridge of its own. The web host
// stands for the internet; the outsider for anyone else on it.
const (
	rehearsalNet   = "10.77.0."
	addrDispatcher = rehearsalNet + "2"
	addrSup1       = rehearsalNet + "3"
	addrSup2       = rehearsalNet + "4"
	addrDB         = rehearsalNet + "5"
	addrWeb        = rehearsalNet + "6"
	addrOutsider   = rehearsalNet + "9"
)

// rehearsalInventory is the cluster rehearsed: a dispatcher, two
// supervisors and a MongoDB host. The fixture web sits at a private
// address, hence allow_private.
const rehearsalInventory = `
name = "rehearsal"
contact = "https://backfill.invalid/rehearsal"
admin_ssh_keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA+IP+iX90r+4oi42DMtA8w2NL5Bav8elMiumyXISmsu admin@rehearsal"]
admin_addresses = ["` + addrOutsider + `/32"]

[binary]
file = "backfill"

[crawl]
records = "records.csv"
allow_private = true

[mongodb]

[[hosts]]
name = "disp"
address = "` + addrDispatcher + `"
memory = "1G"
roles = ["dispatcher"]

[[hosts]]
name = "sup-1"
address = "` + addrSup1 + `"
memory = "512M"
roles = ["supervisor"]

[[hosts]]
name = "sup-2"
address = "` + addrSup2 + `"
memory = "512M"
roles = ["supervisor"]

[[hosts]]
name = "db"
address = "` + addrDB + `"
memory = "1G"
roles = ["mongodb"]
`

// TestRehearsal deploys a rendered cluster on this machine: each host is
// a network namespace on one bridge, with the host's rendered nftables
// ruleset applied, running its role's real process with the command line
// of its rendered unit (systemd itself does not run). It crawls the
// sample dataset to completion and checks that the supervisors joined
// over CURVE, that the firewall keeps an outsider from the ZeroMQ and
// MongoDB ports that the cluster's own hosts reach, that a supervisor
// whose key is not in the inventory gets no task, and that the export
// equals a one-machine `backfill run` of the same records.
//
// What stands in for the machines: paths under /usr/local/bin/backfill,
// /etc/backfill and /var/lib/backfill point into the test's directory
// (the rendered files/ tree of each host); processes run as root, not as
// the unit's User. MongoDB is the embedded MongoDB-protocol server
// (store/mongotest) listening where the rendered mongod.conf binds, with
// the rendered server certificate, CA and client certificates, so TLS
// with client certificates is exercised for real; it knows no SCRAM, so
// the rendered URI's user and password are dropped (the password itself
// is tested only as far as being rendered, 0600, into store.env).
func TestRehearsal(t *testing.T) {
	if testing.Short() {
		t.Skip("the rehearsal crawls for some seconds")
	}
	if os.Geteuid() != 0 {
		t.Skip("the rehearsal builds network namespaces, which needs root (CI runs it as root)")
	}
	if !wire.HasCurve() {
		t.Skip("libzmq was built without CURVE: no secured cluster to rehearse")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the rehearsal needs %s (apt-get install iproute2 nftables): %v", tool, err)
		}
	}
	start := time.Now()
	dir := t.TempDir()
	bin := buildBackfill(t, dir)

	// The same records and fixture web for the cluster and for the
	// one-machine run it is compared with, which runs meanwhile.
	records, truth := testweb.Sample()
	writeTestFile(t, filepath.Join(dir, "records.csv"), records)
	localWeb, err := testweb.Start(testweb.Options{CrawlDelay: testweb.DefaultCrawlDelay})
	if err != nil {
		t.Fatal(err)
	}
	defer localWeb.Close()
	single := singleMachineRun(t, bin, dir, localWeb)

	writeTestFile(t, filepath.Join(dir, "cluster.toml"), []byte(rehearsalInventory))
	inv, err := provisioning.Load(filepath.Join(dir, "cluster.toml"))
	if err != nil {
		t.Fatal(err)
	}
	deploy := filepath.Join(dir, "deploy")
	if _, err := provisioning.Render(inv, deploy); err != nil {
		t.Fatal(err)
	}
	shipped := filepath.Join(deploy, provisioning.BinaryFile)

	n := newNetns(t)
	for name, addr := range map[string]string{"disp": addrDispatcher, "sup-1": addrSup1, "sup-2": addrSup2, "db": addrDB, "web": addrWeb, "out": addrOutsider} {
		n.addHost(name, addr)
	}
	// The crawl hosts find the fixture web's names in their /etc/hosts.
	var hosts strings.Builder
	for _, h := range localWeb.Hosts() {
		fmt.Fprintf(&hosts, "%s %s\n", addrWeb, h)
	}
	for _, h := range []string{"disp", "sup-1", "sup-2"} {
		n.etcHosts(h, hosts.String())
	}
	for _, h := range []string{"disp", "sup-1", "sup-2", "db"} {
		n.run(h, "nft", "-f", filepath.Join(deploy, h, provisioning.FilesDir, "etc/nftables.conf"))
	}

	web := n.start(t, "web", "web", childCmd("web", addrWeb+":80", nil))
	web.waitStdout(t, "ready")
	dbAddr := mongodAddr(t, filepath.Join(deploy, "db", provisioning.FilesDir, "etc/mongod.conf"))
	mongoFiles := filepath.Join(deploy, "db", provisioning.FilesDir, "etc/backfill/mongodb")
	db := n.start(t, "db", "mongodb", childCmd("mongodb", dbAddr, []string{
		"BACKFILL_REHEARSAL_DATA=" + t.TempDir(),
		"BACKFILL_REHEARSAL_CERT=" + filepath.Join(mongoFiles, "server.pem"),
		"BACKFILL_REHEARSAL_CA=" + filepath.Join(mongoFiles, "ca.pem"),
	}))
	db.waitStdout(t, "ready")

	unit := func(host, name string) []string {
		return unitCommand(t, filepath.Join(deploy, host), name, shipped, filepath.Join(dir, "machines", host))
	}
	dispCmd := unit("disp", "backfill-dispatcher.service")
	copyRecords(t, filepath.Join(deploy, "disp"), filepath.Join(dir, "machines", "disp"))
	disp := n.start(t, "disp", "dispatcher", dispCmd)
	if _, ok := disp.stderr.wait(regexp.MustCompile(`dispatcher listening`), time.Now().Add(time.Minute)); !ok {
		t.Fatalf("the dispatcher never listened:\n%s", disp.stderr)
	}
	zmqPort := strconv.Itoa(provisioning.DispatcherPort)
	n.expectReach(t, map[string]string{"sup-1": addrDispatcher + ":" + zmqPort}, map[string]string{"out": addrDispatcher + ":" + zmqPort})

	// A supervisor whose key is not in the inventory, on the dispatcher's
	// own machine, where the firewall lets everything through: only
	// CURVE stands between it and the tasks. It starts first, so that
	// were it accepted it would be a member before the crawl begins.
	stranger := filepath.Join(dir, "stranger")
	k, err := wire.NewKeys()
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.WriteKeys(stranger, k, false); err != nil {
		t.Fatal(err)
	}
	sup2 := unit("sup-2", "backfill-supervisor.service")
	strangerCmd := replaceFlags(t, sup2, map[string]string{
		"--name": "stranger", "--key": stranger + wire.SecretExt, "--contact": "https://backfill.invalid/stranger",
		"--listen": "tcp://" + addrDispatcher + ":5552", "--state-dir": filepath.Join(dir, "stranger-state"),
	})
	strangerProc := n.start(t, "disp", "stranger", strangerCmd)
	if _, ok := strangerProc.stderr.wait(regexp.MustCompile(`dispatcher not answering`), time.Now().Add(time.Minute)); !ok {
		t.Fatalf("the stranger did not report an unanswered hello:\n%s", strangerProc.stderr)
	}

	sups := []*proc{
		n.start(t, "sup-1", "sup-1", unit("sup-1", "backfill-supervisor.service")),
		n.start(t, "sup-2", "sup-2", sup2),
	}
	for _, s := range sups {
		if _, ok := s.stderr.wait(regexp.MustCompile(`registered with dispatcher`), time.Now().Add(time.Minute)); !ok {
			t.Fatalf("%s never registered:\n%s", s.name, s.stderr)
		}
	}
	taskPort := strconv.Itoa(provisioning.SupervisorPort)
	mongoPort := strconv.Itoa(provisioning.MongoDBPort)
	n.expectReach(t,
		map[string]string{"disp": addrSup1 + ":" + taskPort, "sup-1": addrDB + ":" + mongoPort},
		map[string]string{"out": addrSup1 + ":" + taskPort, "sup-2": addrSup1 + ":" + taskPort, "web": addrDB + ":" + mongoPort})
	// The outsider's view of the MongoDB port, checked apart: expectReach
	// takes one probe per host.
	n.expectReach(t, map[string]string{"disp": addrDB + ":" + mongoPort}, map[string]string{"out": addrDB + ":" + mongoPort})

	if code := disp.waitExit(t, 3*time.Minute); code != 0 {
		t.Fatalf("dispatcher exit code %d\n%s", code, disp.stderr)
	}
	for _, p := range append(sups, strangerProc) {
		p.signal(syscall.SIGTERM)
		if code := p.waitExit(t, time.Minute); code != 0 {
			t.Errorf("%s exit code %d after SIGTERM\n%s", p.name, code, p.stderr)
		}
	}
	web.signal(syscall.SIGTERM)
	web.waitExit(t, time.Minute)
	rss := map[string]int64{"dispatcher": disp.maxRSS()}
	for _, s := range sups {
		rss[s.name] = s.maxRSS()
	}
	t.Logf("peak RSS (KiB): %v", rss)

	// The supervisors joined over CURVE, the stranger never did.
	for _, a := range []string{"--key", "--authorized-keys"} {
		if !strings.Contains(strings.Join(dispCmd, " "), a+" ") {
			t.Errorf("the dispatcher's command line lacks %s: %q", a, dispCmd)
		}
	}
	joined := regexp.MustCompile(`supervisor joined.*"supervisor":"([^"]+)"`).FindAllStringSubmatch(disp.stderr.String(), -1)
	var names []string
	for _, j := range joined {
		names = append(names, j[1])
	}
	if strings.Join(names, ",") != "sup-1,sup-2" && strings.Join(names, ",") != "sup-2,sup-1" {
		t.Errorf("members joined: %v, want sup-1 and sup-2", names)
	}
	if _, ok := strangerProc.stderr.wait(regexp.MustCompile(`registered with dispatcher`), time.Now()); ok {
		t.Error("the stranger registered with the dispatcher")
	}
	var log []testweb.Request
	if err := json.Unmarshal(web.stdoutAfter("ready"), &log); err != nil {
		t.Fatalf("the web's request log: %v", err)
	}
	bySup := map[string]int{}
	for _, r := range log {
		for _, who := range []string{"rehearsal", "stranger"} {
			if strings.Contains(r.UserAgent, "backfill.invalid/"+who+")") {
				bySup[who]++
			}
		}
	}
	if bySup["stranger"] != 0 || bySup["rehearsal"] == 0 {
		t.Errorf("requests to the web: %v, want the cluster's only", bySup)
	}

	// The export, read from MongoDB on the dispatcher's machine, equals the
	// one-machine run's.
	exportCmd := []string{shipped, "export", "--format", "jsonl"}
	for _, f := range []string{"--store", "--store-ca-file", "--store-cert"} {
		exportCmd = append(exportCmd, f, flagValue(t, dispCmd, f))
	}
	exp := n.start(t, "disp", "export", exportCmd)
	if code := exp.waitExit(t, time.Minute); code != 0 {
		t.Fatalf("export exit code %d\n%s", code, exp.stderr)
	}
	want := single.wait(t)
	if got := exp.stdout.Bytes(); !bytes.Equal(got, want) {
		t.Errorf("the cluster's export differs from the one-machine run's\ncluster:\n%s\none machine:\n%s", got, want)
	}
	filled := 0
	for id, fields := range truth {
		for f, v := range fields {
			if v != "" && bytes.Contains(exp.stdout.Bytes(), []byte(`"`+f+`":"`+v+`"`)) {
				filled++
			} else if v != "" {
				t.Errorf("record %s: %s %q not in the export", id, f, v)
			}
		}
	}
	if filled == 0 {
		t.Error("the export fills nothing")
	}
	db.signal(syscall.SIGTERM)
	db.waitExit(t, time.Minute)
	t.Logf("rehearsal took %v", time.Since(start).Round(time.Second))
}

// buildBackfill builds the binary the cluster ships.
func buildBackfill(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "backfill")
	out, err := exec.Command("go", "build", "-o", bin, "backfill/cmd/backfill").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func writeTestFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pending is a one-machine run going on while the cluster crawls.
type pending struct {
	done chan struct{}
	out  []byte
	err  error
}

func (p *pending) wait(t *testing.T) []byte {
	t.Helper()
	<-p.done
	if p.err != nil {
		t.Fatal(p.err)
	}
	return p.out
}

// singleMachineRun crawls the records with `backfill run` against the
// fixture web on loopback and exports the result.
func singleMachineRun(t *testing.T, bin, dir string, web *testweb.Web) *pending {
	p := &pending{done: make(chan struct{})}
	state := filepath.Join(dir, "single")
	args := []string{"run", "--records", filepath.Join(dir, "records.csv"), "--state-dir", state,
		"--allow-loopback", "--contact", "https://backfill.invalid/single"}
	for host, addr := range web.Resolve() {
		args = append(args, "--resolve", host+":"+addr)
	}
	go func() {
		defer close(p.done)
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			p.err = fmt.Errorf("backfill run: %v\n%s", err, out)
			return
		}
		out, err := exec.Command(bin, "export", "--state-dir", state, "--format", "jsonl").Output()
		if err != nil {
			p.err = fmt.Errorf("backfill export: %v", err)
		}
		p.out = out
	}()
	return p
}

// mongodAddr is where the rendered mongod.conf binds: its last bindIp
// (the first is loopback) at its port.
func mongodAddr(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bind := regexp.MustCompile(`(?m)^\s*bindIp:\s*(\S+)`).FindSubmatch(b)
	port := regexp.MustCompile(`(?m)^\s*port:\s*(\d+)`).FindSubmatch(b)
	if bind == nil || port == nil {
		t.Fatalf("%s names no bindIp or port:\n%s", path, b)
	}
	ips := strings.Split(string(bind[1]), ",")
	return ips[len(ips)-1] + ":" + string(port[1])
}

// Paths the rehearsal maps into a host's directories; every other part
// of a command line is the rendered unit's.
var mappedPrefixes = []string{provisioning.BinaryPath, provisioning.ConfigDir, provisioning.StateDir}

// unitCommand is the ExecStart of a host's rendered unit, split and
// expanded as systemd does (its EnvironmentFile read), with the mapped
// paths pointing into the test's directories: the binary at bin, the
// configuration at the host's rendered files, the state under machine.
func unitCommand(t *testing.T, hostDir, unit, bin, machine string) []string {
	t.Helper()
	files := filepath.Join(hostDir, provisioning.FilesDir)
	b, err := os.ReadFile(filepath.Join(files, "etc/systemd/system", unit))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	var line string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			line = v
		}
		if v, ok := strings.CutPrefix(l, "EnvironmentFile="); ok {
			readEnvFile(t, filepath.Join(files, filepath.FromSlash(v)), env)
		}
	}
	if store, ok := env["BACKFILL_STORE"]; ok {
		// The embedded server knows no SCRAM: see TestRehearsal.
		u, err := url.Parse(store)
		if err != nil || u.User == nil || !strings.Contains(u.RawQuery, "tls=true") {
			t.Fatalf("the rendered store URI is not TLS with a user: %v", err)
		}
		u.User = nil
		env["BACKFILL_STORE"] = u.String()
	}
	args, err := splitExecLine(line, env)
	if err != nil {
		t.Fatalf("%s: ExecStart %q: %v", unit, line, err)
	}
	for i, a := range args {
		for _, p := range mappedPrefixes {
			rest, ok := strings.CutPrefix(a, p)
			if !ok || (rest != "" && rest[0] != '/') {
				continue
			}
			switch p {
			case provisioning.BinaryPath:
				args[i] = bin
			case provisioning.ConfigDir:
				args[i] = filepath.Join(files, filepath.FromSlash(a))
			case provisioning.StateDir:
				args[i] = filepath.Join(machine, filepath.FromSlash(a))
			}
		}
	}
	return args
}

// copyRecords puts the dispatcher's rendered records on its machine.
func copyRecords(t *testing.T, hostDir, machine string) {
	t.Helper()
	src := filepath.Join(hostDir, provisioning.FilesDir, filepath.FromSlash(provisioning.StateDir))
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, filepath.Join(machine, filepath.FromSlash(provisioning.StateDir), e.Name()), b)
	}
}

func readEnvFile(t *testing.T, path string, env map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", path, l)
		}
		env[k] = v
	}
}

// splitExecLine splits an ExecStart the way systemd does for the forms
// ExecLine writes: bare and double-quoted words, %% and $$, ${NAME}.
func splitExecLine(line string, env map[string]string) ([]string, error) {
	var out []string
	for s := strings.TrimSpace(line); s != ""; s = strings.TrimLeft(s, " ") {
		var w strings.Builder
		if s[0] == '"' {
			i := 1
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated quote")
			}
			s = s[i+1:]
		} else {
			i := strings.IndexByte(s, ' ')
			if i < 0 {
				i = len(s)
			}
			word := s[:i]
			s = s[i:]
			if strings.HasPrefix(word, "${") && strings.HasSuffix(word, "}") {
				v, ok := env[word[2:len(word)-1]]
				if !ok {
					return nil, fmt.Errorf("%s is not in the environment", word)
				}
				out = append(out, v)
				continue
			}
			w.WriteString(word)
		}
		word := strings.ReplaceAll(strings.ReplaceAll(w.String(), "%%", "%"), "$$", "$")
		out = append(out, word)
	}
	return out, nil
}

// replaceFlags sets flag values in a command line.
func replaceFlags(t *testing.T, args []string, set map[string]string) []string {
	t.Helper()
	out := append([]string(nil), args...)
	for f, v := range set {
		found := false
		for i := 0; i+1 < len(out); i++ {
			if out[i] == f {
				out[i+1], found = v, true
			}
		}
		if !found {
			t.Fatalf("%s is not in %q", f, args)
		}
	}
	return out
}

func flagValue(t *testing.T, args []string, f string) string {
	t.Helper()
	for i := 0; i+1 < len(args); i++ {
		if args[i] == f {
			return args[i+1]
		}
	}
	t.Fatalf("%s is not in %q", f, args)
	return ""
}

// childCmd runs this test binary as part role (see TestMain).
func childCmd(role, addr string, env []string) []string {
	exe, _ := os.Executable()
	return append([]string{"env", childEnv + "=" + role, "BACKFILL_REHEARSAL_ADDR=" + addr}, append(env, exe, "-test.run=^$")...)
}

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

// expectReach dials from hosts at once: each of allowed must connect,
// each of blocked must time out (dropped by the firewall), proving that
// the port is open to the allowed and closed to the others.
func (n *netns) expectReach(t *testing.T, allowed, blocked map[string]string) {
	t.Helper()
	type probe struct{ from, to, want string }
	var probes []probe
	for from, to := range allowed {
		probes = append(probes, probe{from, to, "connected"})
	}
	for from, to := range blocked {
		probes = append(probes, probe{from, to, "timeout"})
	}
	results := make([]string, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
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
	for i, p := range probes {
		if results[i] != p.want {
			t.Errorf("%s dialling %s: %s, want %s", p.from, p.to, results[i], p.want)
		}
	}
}

// proc is a process running in a host's namespace.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr *lines
	done   chan struct{}
}

// start runs args inside host's namespace; the test's end kills it if
// it is still running.
func (n *netns) start(t *testing.T, host, name string, args []string) *proc {
	t.Helper()
	p := &proc{name: name, stderr: &lines{more: make(chan struct{})}, done: make(chan struct{})}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", n.ns(host)}, args...)...)
	p.cmd.Stdout = &p.stdout
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.stderr.add(sc.Text())
		}
		io.Copy(io.Discard, pipe)
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *proc) signal(s os.Signal) { p.cmd.Process.Signal(s) }

func (p *proc) waitExit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("%s still running after %v\n%s", p.name, within, p.stderr)
		return -1
	}
}

// maxRSS is the finished process's peak resident memory, KiB.
func (p *proc) maxRSS() int64 {
	if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && runtime.GOOS == "linux" {
		return ru.Maxrss
	}
	return 0
}

// waitStdout waits for a line on the process's standard output.
func (p *proc) waitStdout(t *testing.T, line string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !bytes.Contains(p.stdout.Bytes(), []byte(line+"\n")) {
		select {
		case <-p.done:
			t.Fatalf("%s ended before saying %q\n%s", p.name, line, p.stderr)
		case <-time.After(20 * time.Millisecond): // polling a pipe's copy: nothing to wait on
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not say %q within a minute\n%s", p.name, line, p.stderr)
		}
	}
}

// stdoutAfter is the standard output after the line given.
func (p *proc) stdoutAfter(line string) []byte {
	_, after, _ := bytes.Cut(p.stdout.Bytes(), []byte(line+"\n"))
	return after
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}

// lines keeps a process's stderr and lets the test wait for a line.
type lines struct {
	mu   sync.Mutex
	all  []string
	more chan struct{}
}

func (l *lines) add(s string) {
	l.mu.Lock()
	l.all = append(l.all, s)
	close(l.more)
	l.more = make(chan struct{})
	l.mu.Unlock()
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// wait returns the first line matching re, waiting until deadline.
func (l *lines) wait(re *regexp.Regexp, deadline time.Time) (string, bool) {
	for i := 0; ; {
		l.mu.Lock()
		for ; i < len(l.all); i++ {
			if re.MatchString(l.all[i]) {
				s := l.all[i]
				l.mu.Unlock()
				return s, true
			}
		}
		more := l.more
		l.mu.Unlock()
		select {
		case <-more:
		case <-time.After(time.Until(deadline)):
			return "", false
		}
	}
}
