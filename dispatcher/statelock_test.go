package dispatcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateLock checks that a state directory holds one Dispatcher at a
// time, that the refusal names the holder, and that the lock goes with
// the holder.
func TestStateLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	first, err := lockState(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockState(dir)
	if !errors.Is(err, ErrStateInUse) {
		t.Fatalf("second lock: %v, want ErrStateInUse", err)
	}
	if want := fmt.Sprintf("is used by process %d (%s", os.Getpid(), os.Args[0]); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the holder (%q)", err, want)
	}
	if err := CheckStateDir(dir); !errors.Is(err, ErrStateInUse) {
		t.Errorf("CheckStateDir while held: %v", err)
	}
	if err := first.release(); err != nil {
		t.Fatal(err)
	}
	again, err := lockState(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.release()

	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if err := CheckStateDir(file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("CheckStateDir on a file: %v", err)
	}
}
