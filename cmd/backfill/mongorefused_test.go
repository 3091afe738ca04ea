package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunMongoRefused: a run whose MongoDB refuses connections fails at
// once (not after the retry budget), names the address once, and leaves
// no state directory behind, as if it had not been started.
func TestRunMongoRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	records, _ := writeSample(t, dir)
	state := filepath.Join(dir, "state")
	var stdout, stderr bytes.Buffer
	code := mainExit([]string{"run", "--records", records, "--state-dir", state, "--store", "mongodb://" + closed + "/bf",
		"--contact", "https://backfill.invalid/mongo-refused"}, &stdout, &stderr)
	if code != exitFail {
		t.Fatalf("exit %d, want %d:\n%s", code, exitFail, stderr.String())
	}
	out := stderr.String()
	if !strings.Contains(out, "connection refused") || strings.Count(out, closed) != 1 || strings.Contains(out, "retrying") {
		t.Errorf("stderr should say the connection was refused, name %s once and retry nothing:\n%s", closed, out)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(state)
		t.Errorf("the state directory is left behind (%v): %v", err, entries)
	}
}
