package main

import (
	"os/exec"
	"strings"
	"testing"

	"backfill/proctest"
)

// TestMakeDepsWithoutChromium: `make deps` installs what building and
// running takes, not Chromium, which only --render uses (`make
// deps-render`, which `make test` adds for the rendering tests).
func TestMakeDepsWithoutChromium(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		proctest.Missing(t, "make", "the Makefile's targets")
	}
	dryRun := func(target string) string {
		out, err := exec.Command("make", "-n", "-C", "../..", target).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		return string(out)
	}
	if out := dryRun("deps"); strings.Contains(out, "chromium") || !strings.Contains(out, "libzmq3-dev") {
		t.Errorf("make deps would run:\n%s\nwant libzmq3-dev and no chromium", out)
	}
	if out := dryRun("deps-render"); !strings.Contains(out, "chromium") {
		t.Errorf("make deps-render would run:\n%s\nwant chromium", out)
	}
	if out := dryRun("test"); !strings.Contains(out, "chromium") {
		t.Errorf("make test does not install chromium for the rendering tests:\n%s", out)
	}
}

// TestMakeRunInstallsOnlyTheDemo: a newcomer's `make run` installs what the
// demo needs and nothing of provisioning; the validators `provision check`
// and the rehearsal run come with `make deps-provision`, which `make test`
// and `make rehearse` use.
func TestMakeRunInstallsOnlyTheDemo(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		proctest.Missing(t, "make", "the Makefile's targets")
	}
	dryRun := func(target string) string {
		out, err := exec.Command("make", "-n", "-C", "../..", target).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		return string(out)
	}
	validators := []string{"cloud-init", "shellcheck", "nftables", "openssh-server", "fail2ban", "systemd"}
	for _, target := range []string{"run", "build", "deps"} {
		out := dryRun(target)
		if !strings.Contains(out, "libzmq3-dev") || !strings.Contains(out, "pkg-config") {
			t.Errorf("make %s would not install libzmq3-dev and pkg-config:\n%s", target, out)
		}
		for _, v := range append(validators, "chromium") {
			if strings.Contains(out, v) {
				t.Errorf("make %s would install %s, which the demo does not need:\n%s", target, v, out)
			}
		}
	}
	for _, target := range []string{"deps-provision", "test", "rehearse"} {
		out := dryRun(target)
		for _, v := range validators {
			if !strings.Contains(out, v) {
				t.Errorf("make %s would not install the validator %s:\n%s", target, v, out)
			}
		}
	}
}
