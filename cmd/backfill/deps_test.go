package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryLeavesTestWebOut: the binary links none of the tests'
// fixture webs (testweb, the embedded MongoDB server): the demo serves
// its snapshot (demoweb) instead.
func TestBinaryLeavesTestWebOut(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, pkg := range []string{"backfill/testweb", "backfill/store/mongotest", "backfill/proctest"} {
		for _, d := range deps {
			if d == pkg {
				t.Errorf("the binary links %s", pkg)
			}
		}
	}
	found := false
	for _, d := range deps {
		found = found || d == "backfill/demoweb"
	}
	if !found {
		t.Error("the binary does not link demoweb, the demo's web")
	}
}
