package provisioning_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/provisioning"
	"backfill/store/mongotest"
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

// rehearsalInventory is the cluster rehearsed: a dispatcher, a
// supervisor, a render supervisor (Chromium) and a MongoDB host. The
// fixture web sits at a private address, hence allow_private.
const rehearsalInventory = `
name = "rehearsal"
contact = "https://crawler.example/rehearsal"
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
memory = "1G"
roles = ["render"]

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
// sample dataset, and the JavaScript sample on the render host, to
// completion and checks that the supervisors joined over CURVE, that the
// firewall keeps an outsider from the ZeroMQ and MongoDB ports that the
// cluster's own hosts reach (the render host's too, its browser
// running), that a supervisor whose key is not in the inventory gets no
// task, that a member whose key is authorized but which forges answers
// (forge) is quarantined and changes nothing, that MongoDB takes the
// rendered user and password and refuses a
// wrong password or none, that the password is in no process's command
// line and no log, and that the export equals a one-machine `backfill
// run` of the same records.
//
// What stands in for the machines: paths under /usr/local/bin/backfill,
// /etc/backfill and /var/lib/backfill point into the test's directory
// (the rendered files/ tree of each host); processes run as root, not as
// the unit's User. MongoDB is FerretDB's own server program (see
// mongotest.BuildCommand) listening where the rendered mongod.conf binds,
// with the rendered server certificate and CA, requiring client
// certificates and the rendered user with the rendered password (SCRAM),
// as the MongoDB host's setup makes it.
func TestRehearsal(t *testing.T) {
	proctest.Short(t, "the rehearsal crawls for some seconds")
	if os.Geteuid() != 0 {
		proctest.NotRoot(t, "the rehearsal builds network namespaces, which needs root (CI runs it as root)")
	}
	if !wire.HasCurve() {
		proctest.NoCurve(t, "libzmq was built without CURVE: no secured cluster to rehearse")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the rehearsal needs %s (apt-get install iproute2 nftables): %v", tool, err)
		}
	}
	if findBrowser() == "" {
		t.Fatal("the rehearsal's render host needs Chromium on PATH (make deps-render installs it)")
	}
	start := time.Now()
	dir := t.TempDir()
	bin := buildBackfill(t, dir)
	mongod, err := mongotest.BuildCommand(context.Background(), filepath.Join(dir, "mongod"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built in %v", time.Since(start).Round(time.Second))

	// The same records and fixture web for the cluster and for the
	// one-machine run it is compared with, which runs meanwhile: the
	// sample and the JavaScript sample, whose records only a render
	// supervisor fills.
	records, truth := testweb.Sample()
	js, jsTruth := testweb.SampleJS()
	_, body, _ := bytes.Cut(js, []byte("\n")) // the same header as Sample's
	records = append(records, body...)
	for id, f := range jsTruth {
		truth[id] = f
	}
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

	web := n.start(t, "web", "web", childCmd("web", addrWeb+":80", nil), nil)
	web.waitLine(t, `^ready$`, "did not start")

	// MongoDB, with the user the MongoDB host's setup makes: the
	// inventory's, with the password rendered for that host.
	mongoFiles := filepath.Join(deploy, "db", provisioning.FilesDir, "etc/backfill/mongodb")
	password := strings.TrimSpace(string(readFile(t, filepath.Join(mongoFiles, "password"))))
	if len(password) < 16 {
		t.Fatalf("the rendered MongoDB password %q is too short to look for", password)
	}
	server := mongotest.CommandConfig{
		Addr:     mongodAddr(t, filepath.Join(deploy, "db", provisioning.FilesDir, "etc/mongod.conf")),
		TLS:      mongotest.ServerTLS{CertFile: filepath.Join(mongoFiles, "server.pem"), KeyFile: filepath.Join(mongoFiles, "server.pem"), CAFile: filepath.Join(mongoFiles, "ca.pem")},
		DataDir:  t.TempDir(),
		User:     inv.MongoDB.User,
		Password: password,
	}
	db := n.start(t, "db", "mongodb", append([]string{mongod}, server.Args()...), server.Env())
	db.waitLine(t, regexp.QuoteMeta(mongotest.CommandListening), "did not listen")

	unit := func(host, name string) []string {
		return unitCommand(t, filepath.Join(deploy, host), name, shipped, filepath.Join(dir, "machines", host))
	}
	dispCmd := unit("disp", "backfill-dispatcher.service")
	copyRecords(t, filepath.Join(deploy, "disp"), filepath.Join(dir, "machines", "disp"))
	// A member the operator authorized, since compromised: its key is
	// among the dispatcher's, and it forges answers (forge).
	forgerKey := filepath.Join(dir, "forger")
	fk := newKeyFiles(t, forgerKey)
	writeTestFile(t, filepath.Join(flagValue(t, dispCmd, "--authorized-keys"), "forger.pub"), []byte(fk.Public+"\n"))
	disp := n.start(t, "disp", "dispatcher", dispCmd, nil)
	disp.waitLine(t, `dispatcher listening`, "never listened")
	zmqPort := ":" + strconv.Itoa(provisioning.DispatcherPort)
	n.expectReach(t, []probe{{"sup-1", addrDispatcher + zmqPort}}, []probe{{"out", addrDispatcher + zmqPort}})

	// A supervisor whose key is not in the inventory, on the dispatcher's
	// own machine, where the firewall lets everything through: only
	// CURVE stands between it and the tasks. It starts first, so that
	// were it accepted it would be a member before the crawl begins.
	stranger := filepath.Join(dir, "stranger")
	newKeyFiles(t, stranger)
	sup1 := unit("sup-1", "backfill-supervisor.service")
	forger := n.start(t, "disp", "forger", childCmd("forger", flagValue(t, sup1, "--dispatcher"), []string{
		"BACKFILL_FORGER_KEY=" + forgerKey + wire.SecretExt, "BACKFILL_FORGER_DISPATCHER_KEY=" + flagValue(t, sup1, "--dispatcher-key"),
	}), nil)
	forger.waitLine(t, `^forging \d+ tasks$`, "did not start forging")
	strangerCmd := replaceFlags(t, sup1, map[string]string{
		"--name": "stranger", "--key": stranger + wire.SecretExt, "--contact": "https://backfill.invalid/stranger",
		"--listen": "tcp://" + addrDispatcher + ":5552", "--state-dir": filepath.Join(dir, "stranger-state"),
	})
	strangerProc := n.start(t, "disp", "stranger", strangerCmd, nil)
	strangerProc.waitLine(t, `dispatcher not answering`, "did not report an unanswered hello")

	sup2 := unit("sup-2", "backfill-supervisor.service")
	if !slices.Contains(sup2, "--render") {
		t.Fatalf("the render host's unit lacks --render: %q", sup2)
	}
	sups := []*proc{
		n.start(t, "sup-1", "sup-1", sup1, nil),
		n.start(t, "sup-2", "sup-2", sup2, nil),
	}
	for _, s := range sups {
		s.waitLine(t, `registered with dispatcher`, "never registered")
	}
	taskPort := ":" + strconv.Itoa(provisioning.SupervisorPort)
	mongoPort := ":" + strconv.Itoa(provisioning.MongoDBPort)
	n.expectReach(t,
		[]probe{{"disp", addrSup1 + taskPort}, {"disp", addrSup2 + taskPort}, {"sup-1", addrDB + mongoPort}, {"sup-2", addrDB + mongoPort}, {"disp", addrDB + mongoPort}},
		[]probe{{"out", addrSup1 + taskPort}, {"out", addrSup2 + taskPort}, {"sup-2", addrSup1 + taskPort}, {"sup-1", addrSup2 + taskPort}, {"web", addrDB + mongoPort}, {"out", addrDB + mongoPort}})

	// Every process is up: the password is in none's command line, which
	// the dispatcher's shows to be read.
	if len(cmdlinesHolding(t, flagValue(t, dispCmd, "--authorized-keys"))) == 0 {
		t.Error("the dispatcher's command line is not among those read in /proc")
	}
	if pids := cmdlinesHolding(t, password); len(pids) > 0 {
		t.Errorf("the MongoDB password is in the command line of %s", strings.Join(pids, "; "))
	}

	if code := disp.waitExit(t, 3*time.Minute); code != 0 {
		t.Fatalf("dispatcher exit code %d\n%s", code, &disp.Stderr)
	}
	// The render host's firewall still holds, its browser started.
	sups[1].waitLine(t, `renderer started`, "never started its browser")
	n.expectReach(t, []probe{{"disp", addrSup2 + taskPort}}, []probe{{"out", addrSup2 + taskPort}, {"web", addrSup2 + taskPort}})
	// The forger was quarantined, by its key, and its answers refused:
	// the export below equals the one-machine run's all the same.
	forger.signal(syscall.SIGTERM)
	if code := forger.waitExit(t, time.Minute); code != 0 {
		t.Errorf("forger exit code %d\n%s", code, &forger.Stderr)
	}
	if !strings.Contains(disp.Stderr.String(), `member quarantined`) || !strings.Contains(disp.Stderr.String(), fk.Public) {
		t.Errorf("the dispatcher did not quarantine the forger's key %s:\n%s", fk.Public, &disp.Stderr)
	}
	t.Logf("the forger sent %s forged results", strings.TrimSpace(forger.stdout.String()))
	for _, p := range append(sups, strangerProc) {
		p.signal(syscall.SIGTERM)
		if code := p.waitExit(t, time.Minute); code != 0 {
			t.Errorf("%s exit code %d after SIGTERM\n%s", p.name, code, &p.Stderr)
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
		if !slices.Contains(dispCmd, a) {
			t.Errorf("the dispatcher's command line lacks %s: %q", a, dispCmd)
		}
	}
	joined := regexp.MustCompile(`supervisor joined.*"supervisor":"([^"]+)"`).FindAllStringSubmatch(disp.Stderr.String(), -1)
	var names []string
	for _, j := range joined {
		names = append(names, j[1])
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "sup-1,sup-2" {
		t.Errorf("members joined: %v, want sup-1 and sup-2", names)
	}
	if _, ok := strangerProc.Stderr.Wait(regexp.MustCompile(`registered with dispatcher`), time.Now()); ok {
		t.Error("the stranger registered with the dispatcher")
	}
	var log []testweb.Request
	if err := json.Unmarshal(web.stdout.Bytes(), &log); err != nil {
		t.Fatalf("the web's request log: %v", err)
	}
	bySup := map[string]int{}
	for _, r := range log {
		for _, who := range []string{"rehearsal", "stranger"} {
			if strings.Contains(r.UserAgent, "/"+who+")") {
				bySup[who]++
			}
		}
		if r.Path == "/favicon.ico" {
			t.Errorf("%s%s requested (User-Agent %q): a browser's own request went out", r.Host, r.Path, r.UserAgent)
		}
	}
	if bySup["stranger"] != 0 || bySup["rehearsal"] == 0 {
		t.Errorf("requests to the web: %v, want the cluster's only", bySup)
	}

	// The export, read from MongoDB on the dispatcher's machine with the
	// unit's store flags, equals the one-machine run's.
	storeFlags := func(file string) []string {
		return []string{"--store-file", file, "--store-ca-file", flagValue(t, dispCmd, "--store-ca-file"), "--store-cert", flagValue(t, dispCmd, "--store-cert"), "--store-retry", "0"}
	}
	storeFile := flagValue(t, dispCmd, "--store-file")
	exp := n.start(t, "disp", "export", append([]string{shipped, "export", "--format", "jsonl"}, storeFlags(storeFile)...), nil)
	if code := exp.waitExit(t, time.Minute); code != 0 {
		t.Fatalf("export exit code %d\n%s", code, &exp.Stderr)
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

	// MongoDB refuses a wrong password and none, and says so without
	// showing either.
	uri := readStoreURI(t, storeFile)
	wrongPassword := "not-" + password
	for _, c := range []struct{ name, uri, want string }{
		{"a wrong password", strings.Replace(uri, ":"+password+"@", ":"+wrongPassword+"@", 1), "Authentication failed"},
		{"no password", strings.NewReplacer(inv.MongoDB.User+":"+password+"@", "", "authSource=admin&", "").Replace(uri), "requires authentication"},
	} {
		f := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".uri")
		if c.uri == uri {
			t.Fatalf("%s: the URI was not changed", c.name)
		}
		if err := os.WriteFile(f, []byte(c.uri+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := n.start(t, "disp", "export with "+c.name, append([]string{shipped, "export"}, storeFlags(f)...), nil)
		code := p.waitExit(t, time.Minute)
		msg := p.Stderr.String()
		if code == 0 || !strings.Contains(msg, c.want) {
			t.Errorf("export with %s: exit %d, want a failure saying %q:\n%s", c.name, code, c.want, msg)
		}
		if strings.Contains(msg, password) || strings.Contains(msg, wrongPassword) {
			t.Errorf("export with %s shows the password:\n%s", c.name, msg)
		}
	}
	for _, p := range append(sups, disp, strangerProc) {
		if strings.Contains(p.Stderr.String(), password) {
			t.Errorf("%s logged the MongoDB password", p.name)
		}
	}
	db.signal(syscall.SIGTERM)
	db.waitExit(t, time.Minute)
	t.Logf("rehearsal took %v", time.Since(start).Round(time.Second))
}

// findBrowser is the Chromium a render supervisor finds on PATH, or "".
func findBrowser() string {
	for _, name := range []string{"chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// cmdlinesHolding lists the processes of this machine whose command line
// holds s: "PID: command line".
func cmdlinesHolding(t *testing.T, s string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	seen := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		seen++
		if bytes.Contains(b, []byte(s)) {
			out = append(out, e.Name()+": "+string(bytes.ReplaceAll(b, []byte{0}, []byte(" "))))
		}
	}
	if seen == 0 {
		t.Fatal("no process's command line could be read in /proc")
	}
	return out
}

// readStoreURI is the URI of a rendered --store-file.
func readStoreURI(t *testing.T, path string) string {
	t.Helper()
	for _, l := range strings.Split(string(readFile(t, path)), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	t.Fatalf("%s holds no URI", path)
	return ""
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
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

// singleMachineRun crawls the records with `backfill run --render`
// against the fixture web on loopback and exports the result.
func singleMachineRun(t *testing.T, bin, dir string, web *testweb.Web) *pending {
	p := &pending{done: make(chan struct{})}
	state := filepath.Join(dir, "single")
	args := []string{"run", "--records", filepath.Join(dir, "records.csv"), "--state-dir", state,
		"--allow-loopback", "--contact", "https://backfill.invalid/single"}
	for host, addr := range web.Resolve() {
		args = append(args, "--resolve", host+":"+addr)
	}
	args = append(args, "--render")
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

// unitCommand is the ExecStart of a host's rendered unit, split as
// systemd does, with the mapped paths pointing into the test's
// directories: the binary at bin, the configuration at the host's
// rendered files, the state under machine. A unit that sets variables
// (Environment=, EnvironmentFile=) fails it: the rendered units take
// everything from their command line and the files it names.
func unitCommand(t *testing.T, hostDir, unit, bin, machine string) []string {
	t.Helper()
	files := filepath.Join(hostDir, provisioning.FilesDir)
	b := readFile(t, filepath.Join(files, "etc/systemd/system", unit))
	var line string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			line = v
		}
		if strings.HasPrefix(l, "Environment") {
			t.Fatalf("%s sets variables, which the rehearsal does not: %s", unit, l)
		}
	}
	args, err := splitExecLine(line)
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

// splitExecLine splits an ExecStart the way systemd does for the forms
// ExecLine writes: bare and double-quoted words, %% and $$.
func splitExecLine(line string) ([]string, error) {
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
			if strings.Contains(strings.ReplaceAll(word, "$$", ""), "$") {
				return nil, fmt.Errorf("%s refers to a variable", word)
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

// newKeyFiles makes a CURVE key pair and writes it at name (.key, .pub).
func newKeyFiles(t *testing.T, name string) wire.Keys {
	t.Helper()
	k, err := wire.NewKeys()
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.WriteKeys(name, k, false); err != nil {
		t.Fatal(err)
	}
	return k
}

// childCmd runs this test binary as part role (see TestMain).
func childCmd(role, addr string, env []string) []string {
	exe, _ := os.Executable()
	return append([]string{"env", childEnv + "=" + role, "BACKFILL_REHEARSAL_ADDR=" + addr}, append(env, exe, "-test.run=^$")...)
}
