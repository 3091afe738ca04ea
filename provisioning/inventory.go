package provisioning

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Inventory is a cluster as its TOML file describes it: what the user
// writes, with the defaults filled in. Load reads and checks one.
type Inventory struct {
	// Name names the cluster; it prefixes the units' descriptions and
	// the firewall's comments.
	Name string `toml:"name"`
	// Contact is the URL sent in every request's User-Agent, telling site
	// operators who runs the crawl.
	Contact string `toml:"contact"`
	// AdminSSHKeys are the OpenSSH public keys that may log in as root.
	AdminSSHKeys []string `toml:"admin_ssh_keys"`
	// AdminAddresses (addresses or CIDRs) may reach the metrics port.
	AdminAddresses []string `toml:"admin_addresses"`
	// Keys is the directory, relative to the inventory, where render keeps
	// the cluster's secrets between runs.
	Keys string `toml:"keys"`
	// Logs is "journal" (the default; journald rotates) or "file".
	Logs string `toml:"logs"`

	// About fills the page the contact URL points to (about.html, beside
	// the hosts' directories): who runs the crawl and how to reach them.
	About *About `toml:"about"`
	// Encryption says how the state and results are encrypted at rest:
	// EncryptProvider, EncryptLUKS, or empty (provision check warns).
	Encryption string `toml:"encryption"`

	Binary  Binary   `toml:"binary"`
	Crawl   Crawl    `toml:"crawl"`
	MongoDB *MongoDB `toml:"mongodb"`
	Metrics Metrics  `toml:"metrics"`
	Hosts   []Host   `toml:"hosts"`

	path string    // the file read, for errors and relative paths
	dir  string    // the inventory's directory
	pos  positions // the line of each key in the file
}

// About is what the about page says besides the contact URL (about.Page).
type About struct {
	Operator string `toml:"operator"`
	Email    string `toml:"email"`
	Purpose  string `toml:"purpose"`
}

// Data at rest: how the droplets' state and results are encrypted.
const (
	// EncryptProvider: the provider encrypts the volumes (a block storage
	// volume encrypted at rest) and the state directory lives on one.
	EncryptProvider = "provider"
	// EncryptLUKS: the state directory is a LUKS volume on a data disk,
	// whose key is never written to the droplet's disk: the operator
	// sends it over SSH after each boot (backfill-unlock).
	EncryptLUKS = "luks"
)

// Binary says where each machine gets the backfill binary: downloaded from
// URL and checked against SHA256, or copied from File (a path relative to
// the inventory) whose checksum render computes.
type Binary struct {
	URL    string `toml:"url"`
	SHA256 string `toml:"sha256"`
	File   string `toml:"file"`
}

// Crawl holds the crawl's own settings, rendered into the dispatcher's and
// supervisors' command lines.
type Crawl struct {
	Records  string `toml:"records"`  // records file, relative to the inventory; shipped to the dispatcher
	Mappings string `toml:"mappings"` // directory of mappings; empty: the bundled ones
	Fields   string `toml:"fields"`   // --fields
	Depth    *int   `toml:"depth"`    // --depth
	Workers  int    `toml:"workers"`  // --workers per supervisor; 0: the binary's default
	// AllowPrivate lets supervisors fetch private addresses: an intranet
	// crawl (and the rehearsal's fixture web). Off by default.
	AllowPrivate bool `toml:"allow_private"`
}

// MongoDB, when present, makes the host with the mongodb role the results
// store and the supervisors' shared cache.
type MongoDB struct {
	Database string `toml:"database"`
	User     string `toml:"user"`
	// TLS defaults to true; false is accepted only when every client is
	// on the MongoDB host itself (a one-machine cluster on loopback).
	TLS *bool `toml:"tls"`
}

// Metrics is the Prometheus endpoint of dispatchers and supervisors.
// Enabled adds --metrics to their command lines (off by default); the
// firewall opens Port to AdminAddresses whether or not it is enabled, so
// that turning it on needs no firewall change.
type Metrics struct {
	Enabled bool `toml:"enabled"`
	Port    int  `toml:"port"`
	// Expose listens on the host's cluster address (plaintext HTTP that
	// the firewall opens to admin_addresses only) instead of loopback.
	Expose bool `toml:"expose"`
}

// Host is one droplet.
type Host struct {
	Name           string   `toml:"name"`
	Address        string   `toml:"address"`         // public IPv4
	PrivateAddress string   `toml:"private_address"` // optional VPC address
	Roles          []string `toml:"roles"`
	Memory         string   `toml:"memory"` // RAM: "512M", "1G", "2G", ...
}

// The roles a host may carry.
const (
	RoleDispatcher = "dispatcher"
	RoleSupervisor = "supervisor"
	RoleRender     = "render" // a supervisor with Chromium
	RoleMongoDB    = "mongodb"
)

var knownRoles = []string{RoleDispatcher, RoleSupervisor, RoleRender, RoleMongoDB}

// Defaults.
const (
	defaultLogs        = "journal"
	defaultMetricsPort = 9550
	defaultMongoDB     = "backfill"
	defaultMongoUser   = "backfill"
)

// Load reads the inventory at path and checks it. Every problem found is
// reported, each as "file:line: field: what is wrong", joined in one error.
func Load(path string) (*Inventory, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("provisioning: inventory: %w", err)
	}
	return Parse(path, data)
}

// Parse is Load of data already read; path names it in errors and anchors
// its relative paths.
func Parse(path string, data []byte) (*Inventory, error) {
	inv := &Inventory{path: path, dir: filepath.Dir(path)}
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(inv); err != nil {
		return nil, decodeError(path, err)
	}
	pos, err := keyPositions(data)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()} // the decoder accepted it: cannot happen
	}
	inv.pos = pos
	inv.defaults()
	if err := inv.validate(); err != nil {
		return nil, err
	}
	return inv, nil
}

// Path is the file the inventory was read from.
func (inv *Inventory) Path() string { return inv.path }

func (inv *Inventory) defaults() {
	if inv.Logs == "" {
		inv.Logs = defaultLogs
	}
	if inv.Keys == "" {
		base := strings.TrimSuffix(filepath.Base(inv.path), filepath.Ext(inv.path))
		inv.Keys = base + ".keys"
	}
	if inv.Metrics.Port == 0 {
		inv.Metrics.Port = defaultMetricsPort
	}
	if m := inv.MongoDB; m != nil {
		if m.Database == "" {
			m.Database = defaultMongoDB
		}
		if m.User == "" {
			m.User = defaultMongoUser
		}
		if m.TLS == nil {
			t := true
			m.TLS = &t
		}
	}
}

// rel resolves a path of the inventory against its directory.
func (inv *Inventory) rel(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(inv.dir, p)
}

// KeysDir is the directory of the cluster's secrets.
func (inv *Inventory) KeysDir() string { return inv.rel(inv.Keys) }

// syntaxError and decodeError turn the parser's errors into
// "file:line: field: message".
func syntaxError(path string, err error) error {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		return &Error{File: path, Line: row, Field: strings.Join(de.Key(), "."), Msg: de.Error()}
	}
	return &Error{File: path, Msg: err.Error()}
}

func decodeError(path string, err error) error {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) {
		var errs []error
		for _, e := range sm.Errors {
			row, _ := e.Position()
			errs = append(errs, &Error{File: path, Line: row, Field: strings.Join(e.Key(), "."),
				Msg: "unknown field (see `backfill provision init` for the fields there are)"})
		}
		return errors.Join(errs...)
	}
	return syntaxError(path, err)
}

// Error is a problem in an inventory, at a line and a field of its file.
type Error struct {
	File  string
	Line  int // 0 when the field is missing from the file
	Field string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}
