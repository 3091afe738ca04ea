package proctest

import (
	"os"
	"strconv"
	"testing"
)

// A test that needs what the machine may lack (Chromium, CURVE support in
// libzmq, root) calls the helper of that need when it is missing: on a
// developer's machine the test is skipped, saying why; on CI (CI=true),
// whose setup (.ci/run) provides all three, it fails, so that a broken
// setup cannot pass by testing less.
//
//	if !wire.HasCurve() {
//		proctest.NoCurve(t, "libzmq was built without CURVE")
//	}

// NoChromium is called when no Chromium is found; why says what for.
func NoChromium(t testing.TB, why string) {
	t.Helper()
	missing(t, "Chromium", why)
}

// NoCurve is called when libzmq was built without CURVE.
func NoCurve(t testing.TB, why string) {
	t.Helper()
	missing(t, "CURVE support in libzmq", why)
}

// NotRoot is called when the test needs root and does not have it.
func NotRoot(t testing.TB, why string) {
	t.Helper()
	missing(t, "root", why)
}

// Missing is called when the test needs something else the machine
// lacks (a command, an address, a kernel behaviour): need names it.
func Missing(t testing.TB, need, why string) {
	t.Helper()
	missing(t, need, why)
}

// Short skips a test too long for -short mode (`make test-short`, the
// inner loop), saying what it does. On CI, which runs the whole suite,
// -short is a broken setup: the test fails instead.
func Short(t testing.TB, what string) {
	t.Helper()
	if !testing.Short() {
		return
	}
	if OnCI() {
		t.Fatalf("%s: skipped in -short mode, and CI=true, where the whole suite runs", what)
	}
	t.Skipf("%s (skipped in -short mode)", what)
}

// OptIn returns the value of the environment variable env, which runs an
// opt-in test (a soak, a long crash run, a real server elsewhere), and
// skips the test, saying how to run it, when env is not set. An opt-in
// test is not part of the suite: it skips on CI too.
func OptIn(t testing.TB, env, what string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skipf("%s: opt-in, set %s to run it", what, env)
	}
	return v
}

// NotApplicable skips a test (or a case of a shared suite) that does not
// apply where it runs, saying why: a store without an optional method, a
// test's own helper process. It never depends on the machine, so it
// skips on CI too.
func NotApplicable(t testing.TB, why string) {
	t.Helper()
	t.Skip(why)
}

// OnCI reports whether the tests run on CI: CI is set to a true value.
func OnCI() bool {
	on, _ := strconv.ParseBool(os.Getenv("CI"))
	return on
}

func missing(t testing.TB, need, why string) {
	t.Helper()
	if OnCI() {
		t.Fatalf("%s: %s is missing, and CI=true, where .ci/run installs it: a missing need fails there instead of skipping", why, need)
	}
	t.Skipf("%s (%s is missing; on CI this fails)", why, need)
}
