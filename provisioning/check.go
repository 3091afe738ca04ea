package provisioning

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Report lists the checks that passed, "host: what".
type Report struct {
	Passed []string
	// Warnings are what passes but should not stay so: a droplet whose
	// state and results are not encrypted at rest.
	Warnings []string
}

// validators are the tools Check runs, with the Debian package of each:
// a missing one fails the check, never skips it.
var validators = []struct{ tool, pkg string }{
	{"cloud-init", "cloud-init"},
	{"systemd-analyze", "systemd"},
	{"shellcheck", "shellcheck"},
	{"nft", "nftables"},
	{"sshd", "openssh-server"},
	{"ssh-keygen", "openssh-client"},
	{"fail2ban-client", "fail2ban"},
	{"python3", "python3-yaml"},
	{"unshare", "util-linux"},
}

// ErrValidatorMissing is wrapped by Check when a validator is not
// installed.
var ErrValidatorMissing = errors.New("validator missing")

// MissingValidators lists the validators not on PATH, with their packages.
func MissingValidators() []string {
	var out []string
	for _, v := range validators {
		if _, err := exec.LookPath(v.tool); err != nil {
			out = append(out, fmt.Sprintf("%s (apt-get install %s)", v.tool, v.pkg))
		}
	}
	return out
}

// CheckInventory loads an inventory, renders it into a temporary
// directory and checks that. Secrets come from the inventory's keys
// directory when it exists, else they are made for the check and thrown
// away.
func CheckInventory(ctx context.Context, path string) (*Report, error) {
	inv, err := Load(path)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "backfill-provision-check-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if _, err := os.Stat(inv.KeysDir()); errors.Is(err, fs.ErrNotExist) {
		inv.Keys = filepath.Join(tmp, "keys")
	}
	if _, err := Render(inv, filepath.Join(tmp, "out")); err != nil {
		return nil, err
	}
	return Check(ctx, filepath.Join(tmp, "out"))
}

// Check validates a rendered directory with the real tools: cloud-init's
// schema on every user-data, shellcheck on every script, systemd-analyze
// verify on every unit, nft -c on every ruleset, sshd -t on the SSH
// drop-in, fail2ban-client -t on the jail, that no unit holds a
// password, and that every secret is private to its host. Every problem is reported; a missing tool is one.
func Check(ctx context.Context, dir string) (*Report, error) {
	if missing := MissingValidators(); len(missing) > 0 {
		return nil, fmt.Errorf("provisioning: check: %w: %s", ErrValidatorMissing, strings.Join(missing, ", "))
	}
	hosts, err := renderedHosts(dir)
	if err != nil {
		return nil, err
	}
	env, err := newCheckEnv()
	if err != nil {
		return nil, err
	}
	defer env.close()
	rep := &Report{}
	var errs []error
	note := func(host, what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", host, what, err))
		} else {
			rep.Passed = append(rep.Passed, host+": "+what)
		}
	}
	var scripts []string
	for _, h := range hosts {
		hd := filepath.Join(dir, h)
		files := filepath.Join(hd, FilesDir)
		note(h, "cloud-init schema "+UserDataFile, env.cloudInit(ctx, filepath.Join(hd, UserDataFile)))
		scripts = append(scripts, filepath.Join(hd, InstallFile), filepath.Join(files, filepath.FromSlash(activatePath)))
		if unlock := filepath.Join(files, filepath.FromSlash(unlockPath)); fileExists(unlock) {
			scripts = append(scripts, unlock)
		}
		if w := atRestWarning(files); w != "" {
			rep.Warnings = append(rep.Warnings, h+": "+w)
		}
		// A MongoDB-only host runs no backfill unit.
		if units, _ := filepath.Glob(filepath.Join(files, "etc/systemd/system/*.service")); len(units) > 0 {
			note(h, "systemd-analyze verify "+strings.Join(baseNames(units), " "), env.systemd(ctx, files, units))
			note(h, "no password in a unit (a command line is anyone's to read)", checkUnitsHoldNoPassword(units))
		}
		note(h, "nft -c -f /etc/nftables.conf", env.nft(ctx, filepath.Join(files, "etc/nftables.conf")))
		note(h, "sshd -t -f /etc/ssh/sshd_config.d/10-backfill.conf", env.sshd(ctx, filepath.Join(files, "etc/ssh/sshd_config.d/10-backfill.conf")))
		note(h, "fail2ban-client -t with /etc/fail2ban/jail.d/backfill.local", env.fail2ban(ctx, filepath.Join(files, "etc/fail2ban/jail.d/backfill.local")))
		if _, err := os.Stat(filepath.Join(files, "etc/mongod.conf")); err == nil {
			note(h, "YAML syntax of /etc/mongod.conf (no mongod to run)", env.yaml(ctx, filepath.Join(files, "etc/mongod.conf")))
		}
		note(h, "secrets readable by their owner only", checkSecretModes(hd))
	}
	note("all hosts", "shellcheck "+fmt.Sprint(len(scripts))+" scripts", run(ctx, "shellcheck", append([]string{"--shell=bash", "--severity=style"}, scripts...)...))
	note("all hosts", "each secret key only on its own host", checkSecretsPrivate(dir, hosts))
	return rep, errors.Join(errs...)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// atRestWarning says what is wrong with a host's encryption at rest, ""
// when its state and results are on an encrypted volume.
func atRestWarning(files string) string {
	b, err := os.ReadFile(filepath.Join(files, filepath.FromSlash(encryptionPath)))
	choice := "none"
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				choice = line
			}
		}
	}
	if choice == EncryptProvider || choice == EncryptLUKS {
		return ""
	}
	return fmt.Sprintf("the state and results are not encrypted at rest: set encryption = %q (the provider's volume encryption) or %q (LUKS on a data volume, its key off the droplet) in the inventory; see docs/deploy.md", EncryptProvider, EncryptLUKS)
}

func baseNames(p []string) []string {
	out := make([]string, len(p))
	for i, s := range p {
		out[i] = filepath.Base(s)
	}
	return out
}

// renderedHosts are the subdirectories of dir holding a user-data.
func renderedHosts(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("provisioning: check: %w", err)
	}
	var hosts []string
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), UserDataFile)); e.IsDir() && err == nil {
			hosts = append(hosts, e.Name())
		}
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("provisioning: check: %s holds no rendered host (a directory with a %s): run backfill provision render first", dir, UserDataFile)
	}
	sort.Strings(hosts)
	return hosts, nil
}

// run runs a validator; any output with a failure, or a failure, is the
// error.
func run(ctx context.Context, name string, args ...string) error {
	return runEnv(ctx, nil, name, args...)
}

func runEnv(ctx context.Context, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", name, err, indent(out))
	}
	return nil
}

func indent(b []byte) string {
	s := strings.TrimRight(string(b), "\n")
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// checkEnv holds what several validators reuse: a copy of the system's
// units for systemd-analyze, a host key for sshd, fail2ban's config.
type checkEnv struct {
	tmp     string
	hostKey string
}

func newCheckEnv() (*checkEnv, error) {
	tmp, err := os.MkdirTemp("", "backfill-provision-validate-")
	if err != nil {
		return nil, err
	}
	e := &checkEnv{tmp: tmp, hostKey: filepath.Join(tmp, "ssh_host_ed25519_key")}
	if err := run(context.Background(), "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", e.hostKey); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *checkEnv) close() { os.RemoveAll(e.tmp) }

// cloudInit validates a user-data against cloud-init's schema; a
// deprecation it reports fails too.
func (e *checkEnv) cloudInit(ctx context.Context, path string) error {
	out, err := exec.CommandContext(ctx, "cloud-init", "schema", "--config-file", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cloud-init schema: %v\n%s", err, indent(out))
	}
	for _, l := range strings.Split(string(out), "\n") {
		if _, rest, ok := strings.Cut(l, "deprecations:"); ok && strings.TrimSpace(rest) != "" {
			return fmt.Errorf("cloud-init schema:\n%s", indent(out))
		}
	}
	return nil
}

// systemd runs systemd-analyze verify on units inside a root holding a
// copy of the system's units (the targets they name), the host's
// rendered files and a stand-in at each ExecStart path, which verify
// wants executable. Any line it prints is a failure: it warns of unknown
// keys and bad values but exits 0.
func (e *checkEnv) systemd(ctx context.Context, files string, units []string) error {
	root, err := os.MkdirTemp(e.tmp, "root-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	sys := "/usr/lib/systemd/system"
	if _, err := os.Stat(sys); err != nil {
		sys = "/lib/systemd/system"
	}
	if err := copyTree(sys, filepath.Join(root, "usr/lib/systemd/system")); err != nil {
		return fmt.Errorf("copy the system's units: %w", err)
	}
	if err := copyTree(files, root); err != nil {
		return err
	}
	stub := filepath.Join(root, filepath.FromSlash(BinaryPath))
	if err := writeFile(stub, []byte("#!/bin/sh\n"), 0o755); err != nil {
		return err
	}
	args := []string{"verify", "--root=" + root, "--man=no"}
	for _, u := range units {
		args = append(args, filepath.Base(u))
	}
	out, err := exec.CommandContext(ctx, "systemd-analyze", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("systemd-analyze verify: %v\n%s", err, indent(out))
	}
	if len(bytes.TrimSpace(out)) > 0 {
		return fmt.Errorf("systemd-analyze verify warns:\n%s", indent(out))
	}
	return nil
}

// nft checks a ruleset without loading it. Without root it runs in a
// user and network namespace of its own, where it may.
func (e *checkEnv) nft(ctx context.Context, path string) error {
	if os.Geteuid() == 0 {
		return run(ctx, "nft", "-c", "-f", path)
	}
	return run(ctx, "unshare", "--user", "--map-root-user", "--net", "nft", "-c", "-f", path)
}

// sshd tests the drop-in as sshd's whole configuration, with a host key
// of the check's own. sshd insists on its privilege separation directory,
// which the ssh service makes at start; where it is missing (a container)
// and this runs as root, a private mount namespace provides one.
func (e *checkEnv) sshd(ctx context.Context, path string) error {
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		return err
	}
	if _, err := os.Stat("/run/sshd"); err == nil {
		return run(ctx, sshd, "-t", "-f", path, "-h", e.hostKey)
	}
	if os.Geteuid() != 0 {
		return errors.New("sshd -t needs /run/sshd, which the ssh service makes: start it once, or mkdir -p /run/sshd as root")
	}
	return run(ctx, "unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs -o mode=0755 tmpfs /run && mkdir -m 0755 /run/sshd && exec "$0" -t -f "$1" -h "$2"`,
		sshd, path, e.hostKey)
}

// fail2ban tests the jail within a copy of the system's fail2ban
// configuration, whose filters and actions it names.
func (e *checkEnv) fail2ban(ctx context.Context, jail string) error {
	conf, err := os.MkdirTemp(e.tmp, "fail2ban-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(conf)
	if err := copyTree("/etc/fail2ban", conf); err != nil {
		return fmt.Errorf("copy the system's fail2ban configuration: %w", err)
	}
	b, err := os.ReadFile(jail)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(conf, "jail.d", filepath.Base(jail)), b, 0o644); err != nil {
		return err
	}
	return run(ctx, "fail2ban-client", "-c", conf, "-t")
}

// yaml parses a YAML file with the parser cloud-init itself uses.
func (e *checkEnv) yaml(ctx context.Context, path string) error {
	return run(ctx, "python3", "-c", "import sys, yaml; yaml.safe_load(open(sys.argv[1]))", path)
}

// copyTree copies the regular files and symlinks under src into dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			os.Remove(target)
			return os.Symlink(l, target)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			return writeFile(target, b, info.Mode().Perm())
		}
		return nil
	})
}

// isRenderedSecret says which rendered files hold secrets.
func isRenderedSecret(p string) bool {
	base := filepath.Base(p)
	return strings.HasSuffix(base, ".key") || base == "client.pem" || base == "server.pem" ||
		base == "password" || base == "store.uri" || base == "authorized_keys" ||
		base == UserDataFile || base == InstallFile
}

// uriWithPassword matches a MongoDB URI that carries a password.
var uriWithPassword = regexp.MustCompile(`mongodb(\+srv)?://[^/\s@]*:[^/\s@]*@`)

// checkUnitsHoldNoPassword checks that no unit passes a store URI with
// its password: on the command line or in the environment, every local
// user could read it in /proc; --store-file is the way.
func checkUnitsHoldNoPassword(units []string) error {
	var errs []error
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i, l := range strings.Split(string(b), "\n") {
			if uriWithPassword.MatchString(l) {
				errs = append(errs, fmt.Errorf("%s:%d: a MongoDB URI with its password; give it with --store-file", u, i+1))
			}
		}
	}
	return errors.Join(errs...)
}

// checkSecretModes checks that a host's secrets are readable by their
// owner only.
func checkSecretModes(hostDir string) error {
	var errs []error
	err := filepath.WalkDir(hostDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isRenderedSecret(p) {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm()&0o077 != 0 {
			errs = append(errs, fmt.Errorf("%s: readable by others (mode %04o)", p, info.Mode().Perm()))
		}
		return nil
	})
	return errors.Join(err, errors.Join(errs...))
}

// checkSecretsPrivate checks that each host's CURVE secret key, and its
// MongoDB client or server key, appears in no other host's files. The
// files/ trees are what user-data and install.sh carry, encoded.
func checkSecretsPrivate(dir string, hosts []string) error {
	secrets := map[string]string{} // secret line → owner
	for _, h := range hosts {
		keys, _ := filepath.Glob(filepath.Join(dir, h, FilesDir, "etc/backfill/curve/*.key"))
		pems, _ := filepath.Glob(filepath.Join(dir, h, FilesDir, "etc/backfill/mongodb/*.pem"))
		for _, k := range append(keys, pems...) {
			if filepath.Ext(k) == ".key" && strings.TrimSuffix(filepath.Base(k), ".key") != h {
				return fmt.Errorf("%s: %s holds the secret key of another host", h, k)
			}
			for _, s := range secretLines(k) {
				secrets[s] = h
			}
		}
	}
	var errs []error
	for _, h := range hosts {
		err := filepath.WalkDir(filepath.Join(dir, h, FilesDir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for s, owner := range secrets {
				if owner != h && bytes.Contains(b, []byte(s)) {
					errs = append(errs, fmt.Errorf("%s holds a secret of %s", p, owner))
				}
			}
			return nil
		})
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// secretLines are the lines of a key file that are secret: the CURVE key,
// or the base64 body of a PEM private key.
func secretLines(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	inKey := false
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "-----BEGIN") && strings.Contains(l, "PRIVATE KEY"):
			inKey = true
		case strings.HasPrefix(l, "-----END"):
			inKey = false
		case inKey && len(l) >= 40:
			out = append(out, l)
		case filepath.Ext(path) == ".key" && len(l) == 40 && !strings.HasPrefix(l, "#"):
			out = append(out, l)
		}
	}
	return out
}
