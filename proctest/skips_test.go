package proctest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSkipsGoThroughProctest: no test of the project skips but through
// this package's helpers (NoChromium, NoCurve, NotRoot, Missing, Short,
// OptIn, NotApplicable), so every skip says what it lacks and a skip that
// CI must not take fails there instead.
func TestSkipsGoThroughProctest(t *testing.T) {
	skip := regexp.MustCompile(`\b\w+\.(Skip|Skipf|SkipNow)\(`)
	root := ".."
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || filepath.Dir(path) == filepath.Join(root, "proctest") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		for i, line := range strings.Split(string(b), "\n") {
			if skip.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d: a skip that bypasses proctest: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("looked at %d Go files: not the project's tree", n)
	}
}
