package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestMakeDepsWithoutChromium: `make deps` installs what building and
// running takes, not Chromium, which only --render uses (`make
// deps-render`, which `make test` adds for the rendering tests).
func TestMakeDepsWithoutChromium(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on this machine")
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
