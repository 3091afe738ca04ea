package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneProcessRunSaysNothingOfSecurity: `backfill run` is a dispatcher
// and its supervisors in one process, talking in process: it warns about
// nothing a cluster's operator must secure (the plaintext warning is for
// clusters whose members are on other machines).
func TestOneProcessRunSaysNothingOfSecurity(t *testing.T) {
	dir := t.TempDir()
	records := filepath.Join(dir, "r.csv")
	if err := os.WriteFile(records, []byte("id,name,email\nr1,Ann Lee,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := mainExit([]string{"run", "--records", records, "--state-dir", filepath.Join(dir, "state"),
		"--mappings", filepath.Join("testdata", "badinputs", "maps")}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	for _, word := range []string{"plaintext", "secure the cluster", "WARN", `"level":"WARN"`} {
		if strings.Contains(stderr.String(), word) {
			t.Errorf("a one-process run says %q:\n%s", word, stderr.String())
		}
	}
}
