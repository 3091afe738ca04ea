package proctest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNeedsHelper is not a test of its own: TestNeeds runs the test
// binary again on it, with the need and CI named in the environment.
func TestNeedsHelper(t *testing.T) {
	need := os.Getenv("PROCTEST_NEED")
	if need == "" {
		t.Skip("run by TestNeeds")
	}
	map[string]func(testing.TB, string){"chromium": NoChromium, "curve": NoCurve, "root": NotRoot}[need](t, "the helper's test")
	t.Log("still running after the need was found missing")
}

// TestNeeds: a missing need skips the test on a developer's machine and
// fails it on CI.
func TestNeeds(t *testing.T) {
	for _, need := range []string{"chromium", "curve", "root"} {
		for _, c := range []struct {
			ci       string
			fail     bool
			wantText string
		}{
			{"", false, "--- SKIP: TestNeedsHelper"},
			{"false", false, "--- SKIP: TestNeedsHelper"},
			{"true", true, "--- FAIL: TestNeedsHelper"},
			{"1", true, "--- FAIL: TestNeedsHelper"},
		} {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestNeedsHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "PROCTEST_NEED="+need, "CI="+c.ci)
			out, err := cmd.CombinedOutput()
			if failed := err != nil; failed != c.fail || !strings.Contains(string(out), c.wantText) ||
				strings.Contains(string(out), "still running") || !strings.Contains(string(out), "the helper's test") {
				t.Errorf("need %s, CI=%q: exit error %v, want failure %v and %q:\n%s", need, c.ci, err, c.fail, c.wantText, out)
			}
		}
	}
}
