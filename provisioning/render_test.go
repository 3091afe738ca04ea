package provisioning_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"backfill/proctest"
	"backfill/provisioning"
	"backfill/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files (and make the golden clusters' keys where missing)")

// goldenCases are the inventories under testdata/golden, each with its
// keys (made once, committed) and the files it renders (want/).
var goldenCases = []string{"one-host", "three-hosts", "six-hosts"}

// copyCase copies a golden case into a temporary directory, giving its
// secrets the mode git does not keep.
func copyCase(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("testdata", "golden", name)
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "want" || strings.HasPrefix(rel, "want"+string(filepath.Separator)) {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if strings.HasPrefix(rel, "keys") && !strings.HasSuffix(rel, ".pub") && filepath.Base(rel) != "ca.pem" {
			mode = 0o600
		}
		return os.WriteFile(filepath.Join(dst, rel), b, mode)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// render loads and renders a case copied by copyCase.
func render(t *testing.T, dir string) string {
	t.Helper()
	inv, err := provisioning.Load(filepath.Join(dir, "cluster.toml"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if _, err := provisioning.Render(inv, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// tree reads every file under dir: path → content.
func tree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		m[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The files user-data and install.sh carry, base64-encoded, are left out
// of their golden copies: each is compared where it is readable, under
// files/, and TestUserDataMatchesInstall checks that both carry exactly
// those files.
var (
	cloudPayload  = regexp.MustCompile(`(?m)^(    content: )[A-Za-z0-9+/=]+$`)
	scriptPayload = regexp.MustCompile(`(?m)(<<'EOF'\n)[A-Za-z0-9+/=\n]*?(\nEOF)$`)
)

const elided = "(a file under files/, base64-encoded)"

// elidePayloads is a rendered file as its golden copy holds it.
func elidePayloads(rel string, b []byte) []byte {
	switch path.Base(rel) {
	case provisioning.UserDataFile:
		return cloudPayload.ReplaceAll(b, []byte("${1}"+elided))
	case provisioning.InstallFile:
		return scriptPayload.ReplaceAll(b, []byte("${1}"+elided+"${2}"))
	}
	return b
}

// TestGolden renders the 1-, 3- and 6-host inventories and compares every
// file with testdata/golden/CASE/want (user-data and install.sh without
// the files they carry). go test -run TestGolden -update rewrites them.
func TestGolden(t *testing.T) {
	if !wire.HasCurve() {
		proctest.NoCurve(t, "libzmq was built without CURVE")
	}
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			dir := copyCase(t, name)
			out := render(t, dir)
			got := tree(t, out)
			for p, b := range got {
				got[p] = elidePayloads(p, b)
			}
			golden := filepath.Join("testdata", "golden", name)
			if *update {
				os.RemoveAll(filepath.Join(golden, "want"))
				if err := os.CopyFS(filepath.Join(golden, "want"), os.DirFS(out)); err != nil {
					t.Fatal(err)
				}
				for p, b := range got {
					if err := os.WriteFile(filepath.Join(golden, "want", filepath.FromSlash(p)), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				os.RemoveAll(filepath.Join(golden, "keys"))
				if err := os.CopyFS(filepath.Join(golden, "keys"), os.DirFS(filepath.Join(dir, "keys"))); err != nil {
					t.Fatal(err)
				}
				return
			}
			want := tree(t, filepath.Join(golden, "want"))
			for p, w := range want {
				if g, ok := got[p]; !ok {
					t.Errorf("%s: not rendered", p)
				} else if !bytes.Equal(g, w) {
					t.Errorf("%s differs from the golden file (go test -run TestGolden -update rewrites them):\n%s", p, firstDiff(g, w))
				}
			}
			for p := range got {
				if _, ok := want[p]; !ok {
					t.Errorf("%s: rendered, not in the golden files", p)
				}
			}
		})
	}
}

func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n  got:  " + gl + "\n  want: " + wl
		}
	}
	return ""
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestValidators runs every validator over the rendered golden clusters:
// cloud-init, systemd-analyze, shellcheck, nft, sshd and fail2ban must
// all accept them, and each secret must stay on its own host.
func TestValidators(t *testing.T) {
	if !wire.HasCurve() {
		proctest.NoCurve(t, "libzmq was built without CURVE")
	}
	if missing := provisioning.MissingValidators(); len(missing) > 0 {
		t.Fatalf("validators missing (make deps-provision installs them): %s", strings.Join(missing, ", "))
	}
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			out := render(t, copyCase(t, name))
			rep, err := provisioning.Check(context.Background(), out)
			if err != nil {
				t.Fatal(err)
			}
			hosts, _ := os.ReadDir(out)
			n := 0
			for _, h := range hosts {
				if h.IsDir() {
					n++
				}
			}
			// cloud-init, nft, sshd, fail2ban and secret modes per host at
			// least, shellcheck and secret spread once.
			if len(rep.Passed) < 5*n+2 {
				t.Errorf("%d checks passed for %d hosts: %q", len(rep.Passed), n, rep.Passed)
			}
		})
	}
}

// TestCheckFailsOnBrokenFiles breaks one rendered file for each validator
// and expects the check to name it.
func TestCheckFailsOnBrokenFiles(t *testing.T) {
	if !wire.HasCurve() {
		proctest.NoCurve(t, "libzmq was built without CURVE")
	}
	if missing := provisioning.MissingValidators(); len(missing) > 0 {
		t.Fatalf("validators missing (make deps-provision installs them): %s", strings.Join(missing, ", "))
	}
	out := render(t, copyCase(t, "three-hosts"))
	files := filepath.Join(out, "crawler-1", provisioning.FilesDir)
	edit := func(p, old, new string) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("%s has no %q", p, old)
		}
		info, _ := os.Stat(p)
		os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), info.Mode())
	}
	edit(filepath.Join(out, "crawler-1", provisioning.UserDataFile), "ssh_pwauth: false", "ssh_pwauth: 3")
	edit(filepath.Join(files, "etc/systemd/system/backfill-supervisor.service"), "MemoryMax=", "MemoryMax=1Q\nMemoryMaxx=")
	edit(filepath.Join(files, "etc/systemd/system/backfill-supervisor.service"), "--state-dir", "--store mongodb://crawler:hunter2-pw@10.0.0.9:27017/crawl --state-dir")
	edit(filepath.Join(files, "etc/nftables.conf"), "ct state invalid drop", "ct state invalidd drop")
	edit(filepath.Join(files, "etc/ssh/sshd_config.d/10-backfill.conf"), "MaxAuthTries 3", "MaxAuthTries three")
	edit(filepath.Join(files, "etc/fail2ban/jail.d/backfill.local"), "[sshd]", "[sshd")
	edit(filepath.Join(out, "crawler-1", provisioning.InstallFile), "set -euo pipefail", "set -euo pipefail\necho $undefined_variable")
	os.Chmod(filepath.Join(files, "etc/backfill/curve/crawler-1.key"), 0o644)
	key, _ := os.ReadFile(filepath.Join(files, "etc/backfill/curve/crawler-1.key"))
	os.WriteFile(filepath.Join(out, "crawler-2", provisioning.FilesDir, "etc/backfill/stolen"), key, 0o600)

	_, err := provisioning.Check(context.Background(), out)
	if err == nil {
		t.Fatal("broken files passed the check")
	}
	if strings.Contains(err.Error(), "hunter2-pw") {
		t.Errorf("the check's error shows the password:\n%v", err)
	}
	for _, want := range []string{
		"crawler-1: cloud-init schema", "ssh_pwauth",
		"crawler-1: systemd-analyze verify", "MemoryMaxx",
		"crawler-1: no password in a unit", "backfill-supervisor.service:14: a MongoDB URI with its password",
		"crawler-1: nft -c", "invalidd",
		"crawler-1: sshd -t", "MaxAuthTries",
		"crawler-1: fail2ban-client -t",
		"shellcheck", "undefined_variable",
		"crawler-1: secrets readable by their owner only", "crawler-1.key: readable by others",
		"crawler-2/files/etc/backfill/stolen holds a secret of crawler-1",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the check's error does not name %q:\n%v", want, err)
		}
	}
}

// TestCheckNeedsValidators: with no validator on PATH the check fails,
// naming each with its package.
func TestCheckNeedsValidators(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := provisioning.Check(context.Background(), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "shellcheck (apt-get install shellcheck)") || !strings.Contains(err.Error(), "cloud-init") {
		t.Fatalf("check without validators: %v", err)
	}
}

// TestRenderTwice: a second render keeps the keys and writes the same
// files.
func TestRenderTwice(t *testing.T) {
	if !wire.HasCurve() {
		proctest.NoCurve(t, "libzmq was built without CURVE")
	}
	dir := copyCase(t, "six-hosts")
	os.RemoveAll(filepath.Join(dir, "keys")) // made by the first render
	first := tree(t, render(t, dir))
	keys := tree(t, filepath.Join(dir, "keys"))
	second := tree(t, render(t, dir))
	if len(first) != len(second) {
		t.Fatalf("%d files, then %d", len(first), len(second))
	}
	for p, b := range first {
		if !bytes.Equal(b, second[p]) {
			t.Errorf("%s changed between two renders", p)
		}
	}
	for p, b := range tree(t, filepath.Join(dir, "keys")) {
		if !bytes.Equal(b, keys[p]) {
			t.Errorf("key %s changed between two renders", p)
		}
	}
	info, err := os.Stat(filepath.Join(dir, "keys", "crawler-1.key"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("a secret key made by render: %v, mode %v", err, info.Mode())
	}
}

// TestUserDataMatchesInstall: on every host of every golden cluster,
// cloud-init and install.sh put exactly the files under files/, with the
// same modes and owners, and install the same packages.
func TestUserDataMatchesInstall(t *testing.T) {
	if !wire.HasCurve() {
		proctest.NoCurve(t, "libzmq was built without CURVE")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 with its yaml module (cloud-init's) is needed to read user-data")
	}
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			out := render(t, copyCase(t, name))
			hosts, err := os.ReadDir(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range hosts {
				if h.IsDir() {
					checkCarried(t, filepath.Join(out, h.Name()), smallDroplets[name+"/"+h.Name()])
				}
			}
		})
	}
}

// smallDroplets are the golden clusters' hosts under 1 GiB, which get a
// swap file.
var smallDroplets = map[string]bool{"three-hosts/crawler-1": true, "three-hosts/crawler-2": true, "six-hosts/crawler-3": true}

// checkCarried checks one host's user-data and install.sh against its
// files/; wantSwap: the host is a droplet small enough for a swap file.
func checkCarried(t *testing.T, hd string, wantSwap bool) {
	t.Helper()
	type file struct{ Mode, Owner, Content string }
	putRE := regexp.MustCompile(`(?m)^put (\S+) (\d{4}) (\S+) <<'EOF'\n([A-Za-z0-9+/=\n]*?)\nEOF$`)
	pkgRE := regexp.MustCompile(`(?m)^apt-get install -y -qq -o Dpkg::Options::=--force-confold (.*) >/dev/null$`)
	host := filepath.Base(hd)
	cmd := exec.Command("python3", "-c", "import sys, yaml, json; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)", filepath.Join(hd, provisioning.UserDataFile))
	js, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: read user-data: %v", host, err)
	}
	var ud struct {
		Packages   []string `json:"packages"`
		WriteFiles []struct {
			Path, Permissions, Owner, Encoding, Content string
			Defer                                       bool
		} `json:"write_files"`
		Swap map[string]any `json:"swap"`
	}
	if err := json.Unmarshal(js, &ud); err != nil {
		t.Fatal(err)
	}
	fromCloud := map[string]file{}
	for _, f := range ud.WriteFiles {
		b, err := base64.StdEncoding.DecodeString(f.Content)
		if err != nil || f.Encoding != "b64" && f.Encoding != "gz+b64" || !f.Defer {
			t.Fatalf("%s: user-data file %s: encoding %s, defer %v: %v", host, f.Path, f.Encoding, f.Defer, err)
		}
		if f.Encoding == "gz+b64" {
			b = gunzip(t, b)
		}
		fromCloud[f.Path] = file{f.Permissions, f.Owner, string(b)}
	}
	install, err := os.ReadFile(filepath.Join(hd, provisioning.InstallFile))
	if err != nil {
		t.Fatal(err)
	}
	fromScript := map[string]file{}
	for _, m := range putRE.FindAllSubmatch(install, -1) {
		b, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(string(m[4]), "\n", ""))
		if err != nil {
			t.Fatal(err)
		}
		fromScript[string(m[1])] = file{string(m[2]), string(m[3]), string(b)}
	}
	onDisk := 0
	filepath.WalkDir(filepath.Join(hd, provisioning.FilesDir), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			onDisk++
		}
		return err
	})
	if onDisk == 0 || len(fromCloud) != onDisk || len(fromScript) != onDisk {
		t.Errorf("%s: user-data writes %d files, install.sh %d, files/ holds %d", host, len(fromCloud), len(fromScript), onDisk)
	}
	for p, f := range fromCloud {
		if fromScript[p] != f {
			t.Errorf("%s: %s differs between user-data and install.sh", host, p)
		}
		disk, err := os.ReadFile(filepath.Join(hd, provisioning.FilesDir, filepath.FromSlash(p)))
		if err != nil || string(disk) != f.Content {
			t.Errorf("%s: %s differs from files/: %v", host, p, err)
		}
	}
	pk := pkgRE.FindSubmatch(install)
	if pk == nil || !slices.Equal(strings.Fields(string(pk[1])), ud.Packages) {
		t.Errorf("%s: packages differ: user-data %v, install.sh %q", host, ud.Packages, pk)
	}
	if (ud.Swap != nil) != wantSwap || bytes.Contains(install, []byte("mkswap")) != wantSwap {
		t.Errorf("%s: swap in user-data %v, in install.sh %v; want %v", host, ud.Swap, bytes.Contains(install, []byte("mkswap")), wantSwap)
	}
}
