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
