package provisioning

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// The ports the cluster listens on. SSH is open to all (fail2ban bans
// abusers); the others only to the hosts that need them.
const (
	SSHPort        = 22
	DispatcherPort = 5550  // the dispatcher's intake: supervisors' hellos, heartbeats, results
	SupervisorPort = 5551  // a supervisor's task socket, which the dispatcher dials
	MongoDBPort    = 27017 // MongoDB, for the dispatcher and supervisors
)

// Paths on the machines. The rehearsal maps BinaryPath, ConfigDir and
// StateDir into its temporary directory; every other path is used as is.
const (
	BinaryPath   = "/usr/local/bin/backfill"
	ConfigDir    = "/etc/backfill"
	StateDir     = "/var/lib/backfill"
	curveDir     = ConfigDir + "/curve"
	mongoDir     = ConfigDir + "/mongodb"
	storeURIFile = ConfigDir + "/store.uri"
	mappingsDir  = ConfigDir + "/mappings"
	activatePath = "/usr/local/lib/backfill/activate.sh"
	logDir       = "/var/log/backfill"
	swapFile     = "/swapfile"
	serviceUser  = "backfill"
	// uploadPath is where the user copies the binary when the inventory
	// names a file rather than a URL.
	uploadPath = "/root/backfill"
)

// Memory. The figures behind them are in docs/deploy.md ("Sizes that
// fit"): each role's peak RSS measured on the demo, with room to grow.
const (
	// osReserveMiB is what the system itself keeps: kernel, journald,
	// sshd, fail2ban, unattended-upgrades.
	osReserveMiB = 192
	// swapBelowMiB: droplets with less RAM get a swap file of swapMiB.
	swapBelowMiB = 1024
	swapMiB      = 1024
)

// roleWeight shares a host's memory (less osReserveMiB) among its roles;
// roleFloorMiB is the least MemoryMax a role is given; roleMinMemory the
// smallest droplet that may carry the role at all.
var (
	roleWeight    = map[string]int{RoleDispatcher: 2, RoleSupervisor: 2, RoleRender: 6, RoleMongoDB: 4}
	roleFloorMiB  = map[string]int{RoleDispatcher: 128, RoleSupervisor: 128, RoleRender: 512, RoleMongoDB: 384}
	roleMinMemory = map[string]int{RoleDispatcher: 512, RoleSupervisor: 512, RoleRender: 1024, RoleMongoDB: 1024}
)

// memoryBudgets shares mem MiB among roles: each role's MemoryMax.
func memoryBudgets(mem int, roles []string) (map[string]int, error) {
	total := 0
	for _, r := range roles {
		total += roleWeight[r]
	}
	out := map[string]int{}
	if total == 0 {
		return out, nil
	}
	avail := mem - osReserveMiB
	for _, r := range roles {
		b := avail * roleWeight[r] / total
		if b < roleFloorMiB[r] {
			return nil, fmt.Errorf("too small for %s: the %s role would get %d MiB, it needs %d", strings.Join(roles, " + "), r, b, roleFloorMiB[r])
		}
		out[r] = b
	}
	return out, nil
}

// cluster is an inventory worked out: who talks to whom, at which
// address, with how much memory.
type cluster struct {
	inv         *Inventory
	nodes       []*node
	dispatcher  *node
	mongo       *node // nil without MongoDB
	supervisors []*node
}

// node is one host worked out.
type node struct {
	Host
	addr    string          // the address the cluster reaches it at
	mem     int             // MiB
	roles   map[string]bool //
	budgets map[string]int  // MemoryMax by role, MiB
}

func (n *node) has(roles ...string) bool {
	for _, r := range roles {
		if n.roles[r] {
			return true
		}
	}
	return false
}

// crawls says whether the node runs a backfill process.
func (n *node) crawls() bool { return n.has(RoleDispatcher, RoleSupervisor, RoleRender) }

// newCluster works out a validated inventory.
func newCluster(inv *Inventory) *cluster {
	c := &cluster{inv: inv}
	for _, h := range inv.Hosts {
		n := &node{Host: h, addr: h.Address, roles: map[string]bool{}}
		if h.PrivateAddress != "" {
			n.addr = h.PrivateAddress
		}
		if len(inv.Hosts) == 1 {
			n.addr = "127.0.0.1" // nothing leaves the machine
		}
		n.mem, _ = parseMemory(h.Memory)
		for _, r := range h.Roles {
			n.roles[r] = true
		}
		n.budgets, _ = memoryBudgets(n.mem, h.Roles)
		c.nodes = append(c.nodes, n)
		if n.roles[RoleDispatcher] {
			c.dispatcher = n
		}
		if n.roles[RoleMongoDB] {
			c.mongo = n
		}
		if n.has(RoleSupervisor, RoleRender) {
			c.supervisors = append(c.supervisors, n)
		}
	}
	return c
}

// storeClients are the nodes that use MongoDB.
func (c *cluster) storeClients() []*node {
	if c.mongo == nil {
		return nil
	}
	var out []*node
	for _, n := range c.nodes {
		if n.crawls() {
			out = append(out, n)
		}
	}
	return out
}

// recordsPath is where the records file lives on the dispatcher.
func (c *cluster) recordsPath() string {
	return StateDir + "/records" + strings.ToLower(filepath.Ext(c.inv.Crawl.Records))
}

// usesTLS says whether MongoDB is reached over TLS.
func (c *cluster) usesTLS() bool { return c.inv.MongoDB != nil && *c.inv.MongoDB.TLS }

// storeURI is the MongoDB URI the crawl processes use.
func (c *cluster) storeURI(password string) string {
	m := c.inv.MongoDB
	q := "authSource=admin"
	if *m.TLS {
		q += "&tls=true"
	}
	return fmt.Sprintf("mongodb://%s:%s@%s:%d/%s?%s", m.User, password, c.mongo.addr, MongoDBPort, m.Database, q)
}

// dispatcherArgs is the dispatcher's command line.
func (c *cluster) dispatcherArgs(n *node) []string {
	cr := c.inv.Crawl
	a := []string{BinaryPath, "dispatcher",
		"--listen", zmqEndpoint(n.addr, DispatcherPort),
		"--expect", fmt.Sprint(len(c.supervisors)),
		"--key", curveDir + "/" + n.Name + ".key",
		"--authorized-keys", curveDir + "/authorized",
		"--records", c.recordsPath(),
		"--state-dir", StateDir + "/state",
		"--summary", StateDir + "/summary.json",
	}
	if cr.Mappings != "" {
		a = append(a, "--mappings", mappingsDir)
	}
	if cr.Fields != "" {
		a = append(a, "--fields", cr.Fields)
	}
	if cr.Depth != nil {
		a = append(a, "--depth", fmt.Sprint(*cr.Depth))
	}
	a = append(a, c.storeArgs()...)
	return append(a, c.metricsArgs(n)...)
}

// supervisorArgs is a supervisor's command line.
func (c *cluster) supervisorArgs(n *node) []string {
	cr := c.inv.Crawl
	a := []string{BinaryPath, "supervisor",
		"--name", n.Name,
		"--dispatcher", zmqEndpoint(c.dispatcher.addr, DispatcherPort),
		"--listen", zmqEndpoint(n.addr, SupervisorPort),
		"--key", curveDir + "/" + n.Name + ".key",
		"--dispatcher-key", curveDir + "/dispatcher.pub",
		"--contact", c.inv.Contact,
		"--state-dir", StateDir + "/state",
	}
	if n.roles[RoleRender] {
		a = append(a, "--render")
	}
	if cr.Workers > 0 {
		a = append(a, "--workers", fmt.Sprint(cr.Workers))
	}
	if cr.AllowPrivate {
		a = append(a, "--allow-private")
	}
	if cr.Mappings != "" {
		a = append(a, "--mappings", mappingsDir)
	}
	a = append(a, c.storeArgs()...)
	return append(a, c.metricsArgs(n)...)
}

// storeArgs point a crawl process at MongoDB. The URI holds the
// password, so it comes from a file (--store-file) that only the service
// user reads: a command line is anyone's to read in /proc.
func (c *cluster) storeArgs() []string {
	if c.mongo == nil {
		return nil
	}
	a := []string{"--store-file", storeURIFile}
	if c.usesTLS() {
		a = append(a, "--store-ca-file", mongoDir+"/ca.pem", "--store-cert", mongoDir+"/client.pem")
	}
	return a
}

// metricsArgs are the --metrics flags, only when the inventory asks.
func (c *cluster) metricsArgs(n *node) []string {
	m := c.inv.Metrics
	switch {
	case !m.Enabled:
		return nil
	case m.Expose:
		return []string{"--metrics", fmt.Sprintf("%s:%d", n.addr, m.Port), "--metrics-insecure"}
	default:
		return []string{"--metrics", fmt.Sprintf("127.0.0.1:%d", m.Port)}
	}
}

func zmqEndpoint(addr string, port int) string { return fmt.Sprintf("tcp://%s:%d", addr, port) }

// packages are the Debian packages a node needs.
func (c *cluster) packages(n *node) []string {
	p := []string{"ca-certificates", "curl", "fail2ban", "nftables", "python3-systemd", "unattended-upgrades"}
	if n.crawls() {
		p = append(p, "libzmq5")
	}
	if n.roles[RoleRender] {
		// The headless shell, not the whole browser: a render node
		// needs no window, and it takes a third less memory per node
		// and renders faster (BENCHMARKS.md); it is what a supervisor
		// started with --render looks for first.
		p = append(p, "chromium-headless-shell", "fonts-liberation")
	}
	if n.roles[RoleMongoDB] {
		p = append(p, "gnupg")
	}
	if c.inv.Logs == "file" {
		p = append(p, "logrotate")
	}
	if c.inv.Encryption == EncryptLUKS {
		p = append(p, "cryptsetup")
	}
	sort.Strings(p)
	return slices.Compact(p)
}

// units are the backfill systemd units a node runs, by role.
func (n *node) units() []string {
	var u []string
	if n.roles[RoleDispatcher] {
		u = append(u, "backfill-dispatcher.service")
	}
	if n.has(RoleSupervisor, RoleRender) {
		u = append(u, "backfill-supervisor.service")
	}
	return u
}
