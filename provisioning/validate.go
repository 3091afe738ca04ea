package provisioning

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"backfill/about"
	"backfill/etl"
)

// validName is what a cluster or host name may be: it becomes a file
// name, a unit description and a supervisor's --name.
var validName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// recordExts are the records formats the dispatcher reads.
var recordExts = []string{".csv", ".tsv", ".jsonl", ".ndjson", ".json"}

// validator collects an inventory's problems.
type validator struct {
	inv  *Inventory
	errs []error
}

func (v *validator) fail(field, format string, args ...any) {
	v.errs = append(v.errs, &Error{File: v.inv.path, Line: v.inv.pos.line(field), Field: field, Msg: fmt.Sprintf(format, args...)})
}

// host names the i-th host's field, counting from 1 like positions.
func hostField(i int, field string) string {
	f := fmt.Sprintf("hosts[%d]", i+1)
	if field != "" {
		f += "." + field
	}
	return f
}

func (inv *Inventory) validate() error {
	v := &validator{inv: inv}
	if !validName.MatchString(inv.Name) {
		v.fail("name", "%q: want 1 to 32 lower-case letters, digits and dashes", inv.Name)
	}
	v.contact()
	v.sshKeys()
	v.adminAddresses()
	if inv.Logs != "journal" && inv.Logs != "file" {
		v.fail("logs", "%q: want \"journal\" (journald rotates) or \"file\" (logrotate rotates)", inv.Logs)
	}
	v.binary()
	v.crawl()
	v.metrics()
	v.hosts()
	v.mongodb()
	v.keysDir()
	return errors.Join(v.errs...)
}

func (v *validator) contact() {
	c := v.inv.Contact
	if c == "" {
		v.fail("contact", "missing: the URL telling site operators who runs this crawl (sent in the User-Agent)")
		return
	}
	u, err := url.Parse(c)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.ContainsAny(c, " \t\"\\") {
		v.fail("contact", "%q: want an absolute http or https URL", c)
		return
	}
	if about.IsPlaceholder(c) {
		v.fail("contact", "%q: still the .invalid placeholder, which no site operator can reach: give the URL of your page about the crawl ([about] renders it)", c)
	}
	if a := v.inv.About; a != nil {
		p := about.Page{Contact: c, Operator: a.Operator, Email: a.Email, Purpose: a.Purpose}
		for _, err := range unjoin(p.Validate()) {
			v.fail("about", "%v", err)
		}
	}
	switch v.inv.Encryption {
	case "", EncryptProvider, EncryptLUKS:
	default:
		v.fail("encryption", "%q: want %q (the provider encrypts the volume) or %q (LUKS on a data volume)", v.inv.Encryption, EncryptProvider, EncryptLUKS)
	}
}

// unjoin splits an errors.Join error into its parts.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func (v *validator) sshKeys() {
	if len(v.inv.AdminSSHKeys) == 0 {
		v.fail("admin_ssh_keys", "missing: at least one OpenSSH public key must be able to log in, as password logins are turned off")
		return
	}
	for i, k := range v.inv.AdminSSHKeys {
		if err := checkSSHKey(k); err != nil {
			v.fail(fmt.Sprintf("admin_ssh_keys[%d]", i+1), "%v", err)
		}
	}
}

// checkSSHKey checks an authorized_keys line: type, base64 blob whose
// first field repeats the type, optional comment.
func checkSSHKey(line string) error {
	if strings.ContainsAny(line, "\n\r") {
		return errors.New("one key per string: it holds a line break")
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return fmt.Errorf("%q is not an OpenSSH public key (want \"ssh-ed25519 AAAA... comment\", as in ~/.ssh/id_ed25519.pub)", abbreviate(line))
	}
	blob, err := base64.StdEncoding.DecodeString(f[1])
	if err != nil || len(blob) < 4 {
		return fmt.Errorf("%s key: the base64 part does not decode", f[0])
	}
	n := binary.BigEndian.Uint32(blob)
	if uint64(n) > uint64(len(blob)-4) || string(blob[4:4+n]) != f[0] {
		return fmt.Errorf("%s key: its base64 part is not a %s key", f[0], f[0])
	}
	return nil
}

func abbreviate(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return s
}

func (v *validator) adminAddresses() {
	for i, a := range v.inv.AdminAddresses {
		if _, err := parsePrefix(a); err != nil {
			v.fail(fmt.Sprintf("admin_addresses[%d]", i+1), "%q: want an IP address or a CIDR such as 203.0.113.7/32", a)
		}
	}
}

// parsePrefix reads an address or a CIDR.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (v *validator) binary() {
	b := v.inv.Binary
	switch {
	case b.URL == "" && b.File == "":
		v.fail("binary", "missing: give url (with sha256) to download the binary on each machine, or file to copy one from here")
	case b.URL != "" && b.File != "":
		v.fail("binary.file", "give url or file, not both")
	case b.URL != "":
		u, err := url.Parse(b.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.ContainsAny(b.URL, " \t\"'\\$`") {
			v.fail("binary.url", "%q: want an http or https URL", b.URL)
		}
		if !hexSHA256.MatchString(b.SHA256) {
			v.fail("binary.sha256", "%q: want the release file's SHA-256, 64 lower-case hex digits (sha256sum FILE)", b.SHA256)
		}
	default:
		if b.SHA256 != "" {
			v.fail("binary.sha256", "not with file: render computes the copied file's checksum")
		}
		info, err := os.Stat(v.inv.rel(b.File))
		if err != nil {
			v.fail("binary.file", "%s", fileError(b.File, err))
		} else if !info.Mode().IsRegular() {
			v.fail("binary.file", "%s is not a file", b.File)
		}
	}
}

func (v *validator) crawl() {
	c := v.inv.Crawl
	if c.Records == "" {
		v.fail("crawl.records", "missing: the records file to crawl for, shipped to the dispatcher")
	} else {
		if !slices.Contains(recordExts, strings.ToLower(filepath.Ext(c.Records))) {
			v.fail("crawl.records", "%q: want a file ending in one of %s", c.Records, strings.Join(recordExts, " "))
		}
		if info, err := os.Stat(v.inv.rel(c.Records)); err != nil {
			v.fail("crawl.records", "%s", fileError(c.Records, err))
		} else if !info.Mode().IsRegular() {
			v.fail("crawl.records", "%s is not a file", c.Records)
		}
	}
	if c.Mappings != "" {
		if _, err := etl.LoadDir(v.inv.rel(c.Mappings)); err != nil {
			v.fail("crawl.mappings", "%v", err)
		}
	}
	if c.Depth != nil && *c.Depth < 0 {
		v.fail("crawl.depth", "%d: must not be negative", *c.Depth)
	}
	if c.Workers < 0 {
		v.fail("crawl.workers", "%d: must not be negative", c.Workers)
	}
	if strings.ContainsAny(c.Fields, " \t\"'\\$%") {
		v.fail("crawl.fields", "%q: want field names separated by commas", c.Fields)
	}
}

func (v *validator) metrics() {
	m := v.inv.Metrics
	if m.Port < 1 || m.Port > 65535 || slices.Contains([]int{SSHPort, DispatcherPort, SupervisorPort, MongoDBPort}, m.Port) {
		v.fail("metrics.port", "%d: want a free TCP port (not %d, %d, %d or %d)", m.Port, SSHPort, DispatcherPort, SupervisorPort, MongoDBPort)
	}
	if m.Expose && len(v.inv.AdminAddresses) == 0 {
		v.fail("metrics.expose", "exposing plaintext metrics needs admin_addresses, the only addresses the firewall lets reach them")
	}
}

func (v *validator) hosts() {
	inv := v.inv
	if len(inv.Hosts) == 0 {
		v.fail("hosts", "missing: at least one [[hosts]] table")
		return
	}
	names := map[string]int{}
	addrs := map[string]int{}
	withPrivate := 0
	var dispatchers, supervisors, mongos []int
	for i, h := range inv.Hosts {
		if !validName.MatchString(h.Name) {
			v.fail(hostField(i, "name"), "%q: want 1 to 32 lower-case letters, digits and dashes", h.Name)
		} else if j, dup := names[h.Name]; dup {
			v.fail(hostField(i, "name"), "duplicate host %q (first at line %d)", h.Name, inv.pos.line(hostField(j, "name")))
		} else {
			names[h.Name] = i
		}
		if a, err := netip.ParseAddr(h.Address); err != nil || !a.Is4() {
			v.fail(hostField(i, "address"), "%q: want the droplet's public IPv4 address", h.Address)
		} else if j, dup := addrs[h.Address]; dup {
			v.fail(hostField(i, "address"), "%s is also the address of %s", h.Address, inv.Hosts[j].Name)
		} else {
			addrs[h.Address] = i
		}
		if h.PrivateAddress != "" {
			withPrivate++
			if a, err := netip.ParseAddr(h.PrivateAddress); err != nil || !a.Is4() || !a.IsPrivate() {
				v.fail(hostField(i, "private_address"), "%q: want the droplet's private (VPC) IPv4 address", h.PrivateAddress)
			}
		}
		if _, err := parseMemory(h.Memory); err != nil {
			v.fail(hostField(i, "memory"), "%v", err)
		}
		if len(h.Roles) == 0 {
			v.fail(hostField(i, "roles"), "missing: give one or more of %s", strings.Join(knownRoles, ", "))
		}
		seen := map[string]bool{}
		for _, r := range h.Roles {
			switch {
			case !slices.Contains(knownRoles, r):
				v.fail(hostField(i, "roles"), "unknown role %q (want %s)", r, strings.Join(knownRoles, ", "))
			case seen[r]:
				v.fail(hostField(i, "roles"), "role %q given twice", r)
			}
			seen[r] = true
		}
		if seen[RoleSupervisor] && seen[RoleRender] {
			v.fail(hostField(i, "roles"), "a render host is a supervisor with Chromium: give render or supervisor, not both")
		}
		if seen[RoleDispatcher] {
			dispatchers = append(dispatchers, i)
		}
		if seen[RoleSupervisor] || seen[RoleRender] {
			supervisors = append(supervisors, i)
		}
		if seen[RoleMongoDB] {
			mongos = append(mongos, i)
		}
	}
	if withPrivate != 0 && withPrivate != len(inv.Hosts) {
		for i, h := range inv.Hosts {
			if h.PrivateAddress == "" {
				v.fail(hostField(i, "private_address"), "missing: give every host a private address or none (the cluster talks over one network)")
			}
		}
	}
	switch len(dispatchers) {
	case 0:
		v.fail("hosts", "no host has the dispatcher role: give exactly one")
	case 1:
	default:
		for _, i := range dispatchers[1:] {
			v.fail(hostField(i, "roles"), "a second dispatcher (%s is one already): a cluster has exactly one", inv.Hosts[dispatchers[0]].Name)
		}
	}
	if len(supervisors) == 0 {
		v.fail("hosts", "no host has the supervisor or render role: nobody would fetch")
	}
	for _, i := range mongos[min(1, len(mongos)):] {
		v.fail(hostField(i, "roles"), "a second mongodb host (%s is one already): give one", inv.Hosts[mongos[0]].Name)
	}
	if len(mongos) > 0 && inv.MongoDB == nil {
		v.fail(hostField(mongos[0], "roles"), "the mongodb role needs a [mongodb] table")
	}
	if len(mongos) == 0 && inv.MongoDB != nil {
		v.fail("mongodb", "no host has the mongodb role")
	}
	for i, h := range inv.Hosts {
		v.memoryFits(i, h)
	}
}

// memoryFits checks that the host's roles fit its memory.
func (v *validator) memoryFits(i int, h Host) {
	mem, err := parseMemory(h.Memory)
	if err != nil {
		return
	}
	small := false
	for _, r := range h.Roles {
		if need := roleMinMemory[r]; mem < need {
			v.fail(hostField(i, "memory"), "%s: the %s role needs a droplet of at least %d MiB", h.Memory, r, need)
			small = true
		}
	}
	if small {
		return
	}
	if _, err := memoryBudgets(mem, h.Roles); err != nil {
		v.fail(hostField(i, "memory"), "%s: %v", h.Memory, err)
	}
}

// fileError says why a file the inventory names cannot be read.
func fileError(name string, err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("%s: no such file (paths are relative to the inventory)", name)
	}
	return err.Error()
}

// parseMemory reads a droplet's RAM, "512M" or "2G" (MiB, GiB), into MiB.
func parseMemory(s string) (int, error) {
	if s == "" {
		return 0, errors.New("missing: the droplet's RAM, e.g. \"512M\", \"1G\", \"2G\"")
	}
	t := strings.TrimSuffix(strings.ToUpper(s), "B")
	mult := 0
	switch {
	case strings.HasSuffix(t, "M"):
		mult = 1
	case strings.HasSuffix(t, "G"):
		mult = 1024
	}
	n, err := strconv.Atoi(t[:max(0, len(t)-1)])
	if mult == 0 || err != nil || n <= 0 || n > 1<<20 {
		return 0, fmt.Errorf("%q: want the droplet's RAM, e.g. \"512M\", \"1G\", \"2G\"", s)
	}
	return n * mult, nil
}

func (v *validator) mongodb() {
	inv := v.inv
	m := inv.MongoDB
	if m == nil {
		return
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_-]{1,63}$`).MatchString(m.Database) {
		v.fail("mongodb.database", "%q: want letters, digits, - and _", m.Database)
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_-]{1,63}$`).MatchString(m.User) {
		v.fail("mongodb.user", "%q: want letters, digits, - and _", m.User)
	}
	if *m.TLS {
		return
	}
	// Plaintext is fine only when no byte leaves the MongoDB host.
	var db *Host
	for i := range inv.Hosts {
		if slices.Contains(inv.Hosts[i].Roles, RoleMongoDB) {
			db = &inv.Hosts[i]
		}
	}
	if db == nil {
		return
	}
	for _, h := range inv.Hosts {
		if h.Name != db.Name && (slices.Contains(h.Roles, RoleDispatcher) || slices.Contains(h.Roles, RoleSupervisor) || slices.Contains(h.Roles, RoleRender)) {
			addr := db.Address
			if db.PrivateAddress != "" {
				addr = db.PrivateAddress
			}
			kind := "a public"
			if a, err := netip.ParseAddr(addr); err == nil && a.IsPrivate() {
				kind = "a private-network"
			}
			v.fail("mongodb.tls", "false would serve MongoDB in plaintext on %s address (%s:%d) for %s: TLS is required off loopback", kind, addr, MongoDBPort, h.Name)
			return
		}
	}
}

// keysDir refuses a secret in the keys directory that others may read:
// render would copy it, and whoever read it could join the cluster.
func (v *validator) keysDir() {
	dir := v.inv.KeysDir()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !isSecretFile(d.Name()) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm()&0o077 != 0 {
			v.fail("keys", "secret %s is readable by others (mode %04o): chmod 600 it", path, info.Mode().Perm())
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		v.fail("keys", "%v", err)
	}
}

// isSecretFile says which files of the keys directory are secrets:
// everything but public keys and the CA's certificate.
func isSecretFile(name string) bool {
	return !strings.HasSuffix(name, ".pub") && name != caCertFile
}
