//go:build unix

package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// build is one backfill binary a benchmark runs: "base" (built from the
// base commit of a change, outside the benchmark) or "branch" (built from
// this tree).
type build struct{ name, bin string }

// baseAndBranch are the builds a before-and-after benchmark runs, in
// that order: the base when the environment variable env names its
// binary, then the branch, built from .. into dir. Both run in the same
// benchmark, so they meet the same machine and load.
func baseAndBranch(b *testing.B, env, dir string) []build {
	var builds []build
	if base := os.Getenv(env); base != "" {
		builds = append(builds, build{"base", base})
	}
	return append(builds, build{"branch", goBuild(b, "..", "./cmd/backfill", filepath.Join(dir, "backfill"))})
}
