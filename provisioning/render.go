package provisioning

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/template"

	"backfill/about"
)

//go:embed templates
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"join": strings.Join,
}).ParseFS(templateFS, "templates/*"))

// File is one file a host receives, at its path on the host.
type File struct {
	Path  string      // absolute, on the host
	Mode  fs.FileMode // permissions
	Owner string      // user:group
	Data  []byte
}

// ModeString is the mode as four octal digits.
func (f File) ModeString() string { return fmt.Sprintf("%04o", f.Mode.Perm()) }

// Base64 is the content in base64, wrapped at 76 columns.
func (f File) Base64() string { return wrap(base64.StdEncoding.EncodeToString(f.Data), 76) }

func wrap(s string, n int) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + "\n")
		s = s[n:]
	}
	b.WriteString(s)
	return b.String()
}

// HostOutput is what render writes for one host: its directory holds
// user-data, install.sh and, under files/, every file at its path on the
// host.
type HostOutput struct {
	Name  string
	Dir   string
	Files []File
	Notes []string // what the user must know (printed by render)
}

// Output directory layout.
const (
	UserDataFile = "user-data"
	InstallFile  = "install.sh"
	FilesDir     = "files"
	// BinaryFile is the copied binary, at the output's top, when the
	// inventory names a file.
	BinaryFile = "backfill"
)

// userDataLimit is the largest user-data that every provider takes
// (DigitalOcean's limit; AWS takes 16 KiB); larger records stay out of it
// and reach the dispatcher with install.sh.
const userDataLimit = 64 << 10

// Render writes what each host of inv needs under out/HOST/, and the
// binary under out/ when the inventory copies one. Secrets are made in
// the inventory's keys directory the first time and kept after, so a
// second render writes the same files.
func Render(inv *Inventory, out string) ([]HostOutput, error) {
	c := newCluster(inv)
	sec, err := loadSecrets(c)
	if err != nil {
		return nil, err
	}
	sum, err := c.binarySum(out)
	if err != nil {
		return nil, err
	}
	var outs []HostOutput
	for _, n := range c.nodes {
		files, err := c.files(n, sec, sum)
		if err != nil {
			return nil, err
		}
		ho := HostOutput{Name: n.Name, Dir: filepath.Join(out, n.Name), Files: files}
		if err := c.writeHost(&ho, n, sum); err != nil {
			return nil, err
		}
		if inv.Encryption == EncryptLUKS {
			key := luksKeyPath(inv, n)
			ho.Notes = append(ho.Notes, fmt.Sprintf("LUKS key %s (kept here, never on the droplet): format the data volume once with "+
				"ssh root@%s %s --format /dev/disk/by-id/VOLUME < %s, then open it after each boot without --format", key, n.Address, unlockPath, key))
		}
		outs = append(outs, ho)
	}
	note, err := renderAbout(inv, out)
	if err != nil {
		return nil, err
	}
	outs[0].Notes = append(outs[0].Notes, note)
	return outs, nil
}

// Encryption at rest: encryptionPath says what the inventory chose (check
// warns on "none"); unlockPath opens a LUKS data volume (EncryptLUKS).
const (
	encryptionPath = ConfigDir + "/encryption"
	unlockPath     = "/usr/local/sbin/backfill-unlock"
	mongoDataDir   = "/var/lib/mongodb"
)

// atRest is the inventory's encryption, "none" when it chose none.
func (c *cluster) atRest() string {
	if c.inv.Encryption == "" {
		return "none"
	}
	return c.inv.Encryption
}

// unlockMount is a directory backfill-unlock keeps on the data volume.
type unlockMount struct{ Dir, Sub, Owner string }

// unlockPlan is what backfill-unlock mounts on node n, and the services
// it starts once they are mounted.
func (c *cluster) unlockPlan(n *node) map[string]any {
	var mounts []unlockMount
	var dirs, units []string
	if n == c.mongo {
		mounts = append(mounts, unlockMount{Dir: mongoDataDir, Sub: "mongodb", Owner: "mongodb:mongodb"})
		dirs, units = append(dirs, mongoDataDir), append(units, "mongod.service")
	}
	if n.crawls() {
		mounts = append(mounts, unlockMount{Dir: StateDir, Sub: "backfill", Owner: serviceOwner})
		dirs, units = append(dirs, StateDir), append(units, n.units()...)
	}
	return map[string]any{"Mounts": mounts, "Dirs": dirs, "Units": units}
}

// AboutFile is the page about the crawl, at the output's top: a static
// file the operator hosts at the inventory's contact URL.
const AboutFile = "about.html"

// renderAbout writes the about page from the inventory's [about] table,
// and says where it goes (or how to write one without the table).
func renderAbout(inv *Inventory, out string) (string, error) {
	if inv.About == nil {
		return "no [about] table in the inventory: the page at " + inv.Contact + " must say who runs the crawl and how to reach you (backfill about writes one)", nil
	}
	var b bytes.Buffer
	p := about.Page{Contact: inv.Contact, Operator: inv.About.Operator, Email: inv.About.Email, Purpose: inv.About.Purpose}
	if err := about.Render(&b, nil, p); err != nil {
		return "", fmt.Errorf("provisioning: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("provisioning: %w", err)
	}
	path := filepath.Join(out, AboutFile)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("provisioning: %w", err)
	}
	return "host " + path + " at " + inv.Contact + ": the page the crawl's User-Agent links to", nil
}

// binarySum is the binary's SHA-256: the inventory's, or that of the file
// it copies, which is written to out.
func (c *cluster) binarySum(out string) (string, error) {
	b := c.inv.Binary
	if b.URL != "" {
		return b.SHA256, nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("provisioning: %w", err)
	}
	src, err := os.Open(c.inv.rel(b.File))
	if err != nil {
		return "", fmt.Errorf("provisioning: binary: %w", err)
	}
	defer src.Close()
	dst := filepath.Join(out, BinaryFile)
	tmp, err := os.CreateTemp(out, ".backfill-*")
	if err != nil {
		return "", fmt.Errorf("provisioning: binary: %w", err)
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(tmp, h), src)
	if err2 := tmp.Close(); err == nil {
		err = err2
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o755)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("provisioning: binary: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// execute runs a template into a string.
func execute(name string, data any) ([]byte, error) {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		return nil, fmt.Errorf("provisioning: template %s: %w", name, err)
	}
	return b.Bytes(), nil
}

const (
	rootOwner    = "root:root"
	serviceOwner = serviceUser + ":" + serviceUser
)

// files are every file node n receives, sorted by path.
func (c *cluster) files(n *node, sec *secrets, sum string) ([]File, error) {
	var fl []File
	var errs []error
	add := func(p string, mode fs.FileMode, owner string, data []byte) {
		fl = append(fl, File{Path: p, Mode: mode, Owner: owner, Data: data})
	}
	tmpl := func(p string, mode fs.FileMode, name string, data any) {
		b, err := execute(name, data)
		errs = append(errs, err)
		add(p, mode, rootOwner, b)
	}
	roles := strings.Join(n.Roles, ", ")
	common := map[string]any{"Cluster": c.inv.Name, "Host": n.Name, "Roles": roles}

	var keys []string
	for _, k := range c.inv.AdminSSHKeys {
		keys = append(keys, strings.TrimSpace(k))
	}
	add("/root/.ssh/authorized_keys", 0o600, rootOwner, []byte(strings.Join(keys, "\n")+"\n"))
	tmpl("/etc/nftables.conf", 0o755, "nftables.conf", merge(common, map[string]any{"SSHPort": SSHPort, "Rules": c.firewall(n)}))
	tmpl("/etc/ssh/sshd_config.d/10-backfill.conf", 0o644, "sshd.conf", nil)
	tmpl("/etc/fail2ban/jail.d/backfill.local", 0o644, "fail2ban.local", nil)
	tmpl("/etc/systemd/journald.conf.d/backfill.conf", 0o644, "journald.conf", nil)
	tmpl("/etc/apt/apt.conf.d/20auto-upgrades", 0o644, "auto-upgrades", nil)
	if c.inv.Logs == "file" {
		tmpl("/etc/logrotate.d/backfill", 0o644, "logrotate", map[string]any{"LogDir": logDir})
	}

	if n.crawls() {
		k := sec.curve[n.Name]
		add(curveDir+"/"+n.Name+".key", 0o600, serviceOwner, []byte("# backfill CURVE secret key of "+n.Name+": keep it on this machine only\n"+k.Secret+"\n"))
		add(curveDir+"/"+n.Name+".pub", 0o644, rootOwner, []byte("# backfill CURVE public key of "+n.Name+"\n"+k.Public+"\n"))
		if n.roles[RoleDispatcher] {
			for _, s := range c.supervisors {
				add(curveDir+"/authorized/"+s.Name+".pub", 0o644, rootOwner, []byte("# backfill CURVE public key of supervisor "+s.Name+"\n"+sec.curve[s.Name].Public+"\n"))
			}
		}
		if n.has(RoleSupervisor, RoleRender) {
			add(curveDir+"/dispatcher.pub", 0o644, rootOwner, []byte("# backfill CURVE public key of dispatcher "+c.dispatcher.Name+"\n"+sec.curve[c.dispatcher.Name].Public+"\n"))
		}
		if c.inv.Crawl.Mappings != "" {
			mf, err := c.mappingFiles()
			errs = append(errs, err)
			fl = append(fl, mf...)
		}
		if c.mongo != nil {
			add(storeURIFile, 0o600, serviceOwner, []byte("# The MongoDB URI of the backfill services (--store-file), password included: keep it 0600\n"+c.storeURI(sec.password)+"\n"))
		}
		for _, unit := range n.units() {
			b, err := c.unit(n, unit)
			errs = append(errs, err)
			add("/etc/systemd/system/"+unit, 0o644, rootOwner, b)
		}
	}
	if n.roles[RoleDispatcher] {
		b, err := os.ReadFile(c.inv.rel(c.inv.Crawl.Records))
		errs = append(errs, err)
		add(c.recordsPath(), 0o640, serviceOwner, b)
	}
	if c.usesTLS() && (n == c.mongo || n.crawls()) {
		add(mongoDir+"/ca.pem", 0o644, rootOwner, sec.caPEM)
		if n.crawls() {
			add(mongoDir+"/client.pem", 0o600, serviceOwner, sec.certs[n.Name])
		}
	}
	if n == c.mongo {
		m := c.inv.MongoDB
		if c.usesTLS() {
			add(mongoDir+"/server.pem", 0o600, rootOwner, sec.certs[n.Name])
			if !n.crawls() {
				add(mongoDir+"/client.pem", 0o600, rootOwner, sec.certs[n.Name])
			}
		}
		add(mongoDir+"/password", 0o600, rootOwner, []byte(sec.password+"\n"))
		bind := "127.0.0.1"
		if n.addr != "127.0.0.1" {
			bind += "," + n.addr
		}
		cache := float64(n.budgets[RoleMongoDB]) / 2 / 1024
		tmpl("/etc/mongod.conf", 0o644, "mongod.conf", merge(common, map[string]any{
			"CacheGB": fmt.Sprintf("%.2f", max(0.25, cache)), "Port": MongoDBPort, "BindIP": bind, "TLS": *m.TLS,
			"ServerPEM": mongoDir + "/server.pem", "CAFile": mongoDir + "/ca.pem",
		}))
		tmpl("/etc/systemd/system/mongod.service.d/backfill.conf", 0o644, "mongod-override.conf", map[string]any{"MemoryMax": n.budgets[RoleMongoDB], "Encrypted": c.inv.Encryption == EncryptLUKS})
	}
	add(encryptionPath, 0o644, rootOwner, []byte("# How this droplet's state and results are encrypted at rest (the inventory's\n# encryption: provider, luks, or none); backfill provision check reads it.\n"+c.atRest()+"\n"))
	if c.inv.Encryption == EncryptLUKS {
		tmpl(unlockPath, 0o755, "unlock.sh", merge(common, c.unlockPlan(n)))
	}
	act, err := c.activate(n, sum)
	errs = append(errs, err)
	add(activatePath, 0o755, rootOwner, act)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.Slice(fl, func(i, j int) bool { return fl[i].Path < fl[j].Path })
	return fl, nil
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// mappingFiles are the inventory's mappings, shipped to every crawl host.
func (c *cluster) mappingFiles() ([]File, error) {
	dir := c.inv.rel(c.inv.Crawl.Mappings)
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var fl []File
	for _, p := range names {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("provisioning: mappings: %w", err)
		}
		fl = append(fl, File{Path: mappingsDir + "/" + filepath.Base(p), Mode: 0o644, Owner: rootOwner, Data: b})
	}
	return fl, nil
}

// unit renders a backfill systemd unit.
func (c *cluster) unit(n *node, unit string) ([]byte, error) {
	role, args := "supervisor", c.supervisorArgs(n)
	budget := n.budgets[RoleSupervisor]
	if n.roles[RoleRender] {
		role, budget = "render supervisor", n.budgets[RoleRender]
	}
	cond := ""
	if unit == "backfill-dispatcher.service" {
		role, args, budget = "dispatcher", c.dispatcherArgs(n), n.budgets[RoleDispatcher]
		cond = c.recordsPath()
	}
	exec, err := ExecLine(args)
	if err != nil {
		return nil, err
	}
	data := map[string]any{
		"Role": role, "Cluster": c.inv.Name, "Host": n.Name, "User": serviceUser,
		"Condition": cond, "ExecStart": exec, "MemoryMax": budget, "HostMemory": n.mem,
		"StateDir": StateDir, "AfterMongoDB": n == c.mongo, "Encrypted": c.inv.Encryption == EncryptLUKS,
	}
	if c.inv.Logs == "file" {
		data["LogFile"] = logDir + "/" + strings.TrimSuffix(strings.TrimPrefix(unit, "backfill-"), ".service") + ".log"
	}
	return execute("backfill.service", data)
}

// rule is one firewall opening.
type rule struct {
	Port   int
	Family string // ip or ip6
	From   []string
	Why    string
}

// firewall lists what node n opens besides SSH.
func (c *cluster) firewall(n *node) []rule {
	var rs []rule
	addrs := func(ns []*node) []string {
		var a []string
		for _, m := range ns {
			if m != n && !slices.Contains(a, m.addr) {
				a = append(a, m.addr)
			}
		}
		sort.Strings(a)
		return a
	}
	open := func(port int, from []string, why string) {
		var v4, v6 []string
		for _, a := range from {
			if strings.Contains(a, ":") {
				v6 = append(v6, a)
			} else {
				v4 = append(v4, a)
			}
		}
		if len(v4) > 0 {
			rs = append(rs, rule{port, "ip", v4, why})
		}
		if len(v6) > 0 {
			rs = append(rs, rule{port, "ip6", v6, why})
		}
	}
	if n.roles[RoleDispatcher] {
		open(DispatcherPort, addrs(c.supervisors), "dispatcher: the supervisors' hellos, heartbeats and results (CURVE)")
	}
	if n.has(RoleSupervisor, RoleRender) {
		open(SupervisorPort, addrs([]*node{c.dispatcher}), "supervisor: tasks from the dispatcher (CURVE)")
	}
	if n == c.mongo {
		why := "MongoDB for the crawl hosts (TLS, password)"
		if !c.usesTLS() {
			why = "MongoDB for the crawl hosts (password)"
		}
		open(MongoDBPort, addrs(c.storeClients()), why)
	}
	if n.crawls() {
		var admin []string
		for _, a := range c.inv.AdminAddresses {
			p, _ := parsePrefix(a)
			admin = append(admin, p.String())
		}
		open(c.inv.Metrics.Port, admin, "metrics, for the admin's addresses only")
	}
	return rs
}

// activate renders the host's activation script.
func (c *cluster) activate(n *node, sum string) ([]byte, error) {
	data := map[string]any{
		"Cluster": c.inv.Name, "Host": n.Name, "Roles": strings.Join(n.Roles, ", "),
		"User": serviceUser, "StateDir": StateDir, "Units": n.units(),
		"SHA256": sum, "URL": c.inv.Binary.URL, "UploadPath": uploadPath, "BinaryPath": BinaryPath,
	}
	if c.inv.Logs == "file" {
		data["LogDir"] = logDir
	}
	if n == c.mongo {
		m := c.inv.MongoDB
		data["MongoDB"] = map[string]any{
			"Version": mongoDBVersion, "TLS": *m.TLS, "Port": MongoDBPort,
			"ServerPEM": mongoDir + "/server.pem", "CAFile": mongoDir + "/ca.pem", "ClientPEM": mongoDir + "/client.pem",
			"PasswordFile": mongoDir + "/password", "User": m.User, "Database": m.Database,
		}
	}
	return execute("activate.sh", data)
}

// mongoDBVersion is the MongoDB release series installed on the mongodb
// host, from MongoDB's repository.
const mongoDBVersion = "8.0"

// cloudFile is a File as user-data carries it.
type cloudFile struct {
	File
	Encoding string
	Encoded  string
}

// writeHost writes a host's directory: files/, install.sh, user-data.
func (c *cluster) writeHost(ho *HostOutput, n *node, sum string) error {
	if err := os.RemoveAll(ho.Dir); err != nil {
		return fmt.Errorf("provisioning: %w", err)
	}
	for _, f := range ho.Files {
		if err := writeFile(filepath.Join(ho.Dir, FilesDir, filepath.FromSlash(f.Path)), f.Data, f.Mode); err != nil {
			return err
		}
	}
	swap := 0
	if n.mem < swapBelowMiB {
		swap = swapMiB
	}
	data := map[string]any{
		"Cluster": c.inv.Name, "Host": n.Name, "Roles": strings.Join(n.Roles, ", "), "Address": n.Address,
		"Packages": c.packages(n), "User": serviceUser, "StateDir": StateDir,
		"SwapMiB": swap, "SwapBytes": swap << 20, "SwapBelowMiB": swapBelowMiB, "SwapFile": swapFile,
		"Files": ho.Files, "ActivatePath": activatePath,
	}
	install, err := execute("install.sh", data)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(ho.Dir, InstallFile), install, 0o700); err != nil {
		return err
	}
	ud, notes, err := c.userData(n, ho.Files, data)
	if err != nil {
		return err
	}
	ho.Notes = notes
	if c.inv.Binary.File != "" && n.crawls() {
		ho.Notes = append(ho.Notes, fmt.Sprintf("copy the binary before running install.sh: scp %s root@%s:%s", BinaryFile, n.Address, uploadPath))
	}
	return writeFile(filepath.Join(ho.Dir, UserDataFile), ud, 0o600)
}

// userData renders the cloud-config; a records file that would take it
// over userDataLimit is left to install.sh.
func (c *cluster) userData(n *node, files []File, data map[string]any) ([]byte, []string, error) {
	var notes []string
	var cf []cloudFile
	for _, f := range files {
		if n.roles[RoleDispatcher] && f.Path == c.recordsPath() {
			continue // added below, if it fits
		}
		cf = append(cf, cloudFile{File: f, Encoding: "b64", Encoded: base64.StdEncoding.EncodeToString(f.Data)})
	}
	render := func(cf []cloudFile, notes []string) ([]byte, error) {
		d := merge(data, map[string]any{"CloudFiles": cf, "Notes": notes})
		return execute("user-data", d)
	}
	if n.roles[RoleDispatcher] {
		var rec File
		for _, f := range files {
			if f.Path == c.recordsPath() {
				rec = f
			}
		}
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		zw.Write(rec.Data)
		zw.Close()
		with := append(append([]cloudFile(nil), cf...), cloudFile{File: rec, Encoding: "gz+b64", Encoded: base64.StdEncoding.EncodeToString(gz.Bytes())})
		sort.Slice(with, func(i, j int) bool { return with[i].Path < with[j].Path })
		b, err := render(with, nil)
		if err != nil || len(b) <= userDataLimit {
			return b, nil, err
		}
		notes = append(notes, fmt.Sprintf("The records file is too large for user-data (over %d KiB): the dispatcher starts once install.sh has put it at %s.", userDataLimit>>10, c.recordsPath()))
	}
	b, err := render(cf, notes)
	return b, notes, err
}

// writeFile writes a rendered file with its mode.
func writeFile(p string, data []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("provisioning: %w", err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		return fmt.Errorf("provisioning: %w", err)
	}
	// WriteFile keeps an existing file's mode, and the umask narrows it.
	if err := os.Chmod(p, mode); err != nil {
		return fmt.Errorf("provisioning: %w", err)
	}
	return nil
}
