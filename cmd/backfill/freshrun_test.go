package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"backfill/dispatcher"
	"backfill/testweb"
)

// freshRunArgs are the flags of a `backfill run` of records with the
// mappings in maps over a Fresh web, its state in stateDir: loopback
// allowed, no delay, every host resolved to the web.
func freshRunArgs(records, stateDir, maps string, web *testweb.Fresh) []string {
	args := []string{"run", "--records", records, "--state-dir", stateDir, "--mappings", maps,
		"--allow-loopback", "--delay", "0", "--workers", "2", "--contact", "https://backfill.invalid/e2e"}
	for host, addr := range web.Resolve() {
		args = append(args, "--resolve", host+":"+addr)
	}
	return args
}

// runSummary runs the binary with args and extra as a process named
// name, which must succeed, and returns its summary (--summary, written
// in dir) and its output.
func runSummary(t *testing.T, dir, name string, args []string, extra ...string) (dispatcher.Summary, string) {
	t.Helper()
	sumPath := filepath.Join(dir, name+".json")
	p := start(t, name, append(append(append([]string(nil), args...), "--summary", sumPath), extra...)...)
	if code := p.waitExit(2 * time.Minute); code != 0 {
		t.Fatalf("%s exit code %d\n%s", name, code, p.stderr)
	}
	b, err := os.ReadFile(sumPath)
	if err != nil {
		t.Fatal(err)
	}
	var s dispatcher.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s summary: %v", name, err)
	}
	return s, p.stdout.String() + p.stderr.String()
}

// writeMappings writes each mapping (file name → JSON) into dir/mappings
// and returns that folder.
func writeMappings(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	maps := filepath.Join(dir, "mappings")
	if err := os.MkdirAll(maps, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(maps, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return maps
}
