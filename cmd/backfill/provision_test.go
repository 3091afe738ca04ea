package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backfill/proctest"
	"backfill/wire"
)

// TestProvisionCommand walks the README's steps: init writes an inventory,
// render writes each host's files, and wrong arguments are usage errors.
// (The validators behind check are tested in provisioning.)
func TestProvisionCommand(t *testing.T) {
	if !wire.HasCurve() {
		proctest.NoCurve(t, "libzmq was built without CURVE")
	}
	dir := t.TempDir()
	inv := filepath.Join(dir, "cluster.toml")
	var out, errb bytes.Buffer
	if code := mainExit([]string{"provision", "init", inv}, &out, &errb); code != exitOK {
		t.Fatalf("init: exit %d: %s", code, errb.String())
	}
	if code := mainExit([]string{"provision", "init", inv}, &out, &errb); code != exitFail || !strings.Contains(errb.String(), "exists") {
		t.Errorf("init over an existing file: exit %d: %s", code, errb.String())
	}
	os.WriteFile(filepath.Join(dir, "records.csv"), []byte("id,url\n1,https://example.org/\n"), 0o644)
	deploy := filepath.Join(dir, "deploy")
	out.Reset()
	if code := mainExit([]string{"provision", "render", inv, "-o", deploy}, &out, &errb); code != exitOK {
		t.Fatalf("render: exit %d: %s", code, errb.String())
	}
	for _, h := range []string{"dispatcher", "crawler-1", "crawler-2"} {
		for _, f := range []string{"user-data", "install.sh", "files/etc/nftables.conf"} {
			if _, err := os.Stat(filepath.Join(deploy, h, f)); err != nil {
				t.Errorf("render wrote no %s for %s: %v", f, h, err)
			}
		}
		if !strings.Contains(out.String(), h+": ") {
			t.Errorf("render did not list %s:\n%s", h, out.String())
		}
	}
	for _, args := range [][]string{{"provision"}, {"provision", "bogus"}, {"provision", "render"}, {"provision", "check", "a", "b"}} {
		errb.Reset()
		if code := mainExit(args, &out, &errb); code != exitUsage {
			t.Errorf("%q: exit %d, want %d (%s)", args, code, exitUsage, errb.String())
		}
	}
}
