package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"backfill/proctest"
)

// TestStateDirInUse starts a dispatcher process, which holds its state
// directory, and checks that a second run on the same directory is
// refused at once, naming the process that holds it.
func TestStateDirInUse(t *testing.T) {
	proctest.Short(t, "starts a process")
	dir := t.TempDir()
	records := oneRecord(t, dir)
	stateDir := filepath.Join(dir, "state")
	disp, _ := startDispatcher(t, "--records", records, "--state-dir", stateDir, "--listen", "tcp://127.0.0.1:*")

	var stdout, stderr bytes.Buffer
	code := mainExit([]string{"run", "--records", records, "--state-dir", stateDir}, &stdout, &stderr)
	if code != exitFail {
		t.Errorf("second run on a state directory in use: exit %d, want %d", code, exitFail)
	}
	want := fmt.Sprintf("state directory in use: %s is used by process %d (%s dispatcher --records", stateDir, disp.cmd.Process.Pid, backfillBinary(t))
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not name the holder (%q):\n%s", want, stderr.String())
	}

	// Once the holder is gone the directory is free again.
	disp.cmd.Process.Signal(syscall.SIGTERM)
	disp.waitExit(30 * time.Second)
	stderr.Reset()
	code = mainExit([]string{"status", "--state-dir", stateDir}, &stdout, &stderr)
	if code != exitOK {
		t.Errorf("status after the holder left: exit %d: %s", code, stderr.String())
	}
}

// TestStateDirReadOnly checks that a state directory that cannot be
// written is named as such, not as SQLite's "unable to open database
// file". As root (who may write anything) the directory is a read-only
// tmpfs mounted in a mount namespace of the run's own.
func TestStateDirReadOnly(t *testing.T) {
	proctest.Short(t, "starts a process")
	dir := t.TempDir()
	records := oneRecord(t, dir)
	stateDir := filepath.Join(dir, "state")
	if err := os.Mkdir(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := backfillBinary(t)
	args := []string{"run", "--records", records, "--state-dir", stateDir}
	var cmd *exec.Cmd
	want := "state directory not writable: " + stateDir
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("unshare"); err != nil {
			proctest.Missing(t, "unshare", "a read-only directory root may not write")
		}
		script := `mount -t tmpfs -o ro tmpfs "$1" && shift && exec "$@"`
		cmd = exec.Command("unshare", append([]string{"-m", "sh", "-c", script, "sh", stateDir, bin}, args...)...)
		want += ": read-only file system"
	} else {
		if err := os.Chmod(stateDir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(stateDir, 0o755) })
		cmd = exec.Command(bin, args...)
		want += ": permission denied"
	}
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitFail {
		t.Fatalf("run on a read-only state directory: %v, want exit %d\n%s", err, exitFail, out)
	}
	if !strings.Contains(string(out), want) || strings.Contains(string(out), "unable to open database file") {
		t.Errorf("output does not say %q:\n%s", want, out)
	}
}

// oneRecord writes a records file of one record into dir.
func oneRecord(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "r.csv")
	if err := os.WriteFile(path, []byte("id,name,email,homepage\n1,Ada,,http://ada.invalid/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOneStateDirFlag: --state-dir is defined once (stateDirFlag), with
// its default named once, for every command that takes it.
func TestOneStateDirFlag(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	defs, defaults := 0, 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		defs += strings.Count(string(b), `"state-dir"`)
		defaults += strings.Count(string(b), `"backfill-state"`)
	}
	if defs != 1 || defaults != 1 {
		t.Errorf(`"state-dir" appears %d times and "backfill-state" %d in the command's sources; want one definition (stateDirFlag)`, defs, defaults)
	}
	for _, cmd := range []string{"run", "dispatcher", "supervisor", "export", "report", "status", "demo"} {
		var stdout, stderr bytes.Buffer
		mainExit([]string{cmd, "-h"}, &stdout, &stderr)
		if !strings.Contains(stderr.String(), "-state-dir") {
			t.Errorf("%s -h lists no --state-dir", cmd)
		}
	}
}
