package dispatcher

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LockFile is the name, inside Config.StateDir, of the file a Dispatcher
// holds an exclusive lock on (flock) for as long as it is open: two
// dispatchers on one state would fetch every page twice and both claim the
// work. The file says which process holds it; the lock, not the file, is
// what counts, so a process that died leaves nothing to clean up.
const LockFile = "state.lock"

// ErrStateInUse is wrapped by the error of a state directory another
// process holds.
var ErrStateInUse = errors.New("state directory in use")

// ErrStateNotWritable is wrapped by the error of a state directory this
// process cannot write.
var ErrStateNotWritable = errors.New("state directory not writable")

// stateLock is a held lock on a state directory.
type stateLock struct{ f *os.File }

// lockState takes the state directory's lock, creating the directory if
// needed, and writes who holds it.
func lockState(dir string) (*stateLock, error) {
	if err := writable(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: state directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := lockHolder(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("dispatcher: %w: %s is used by %s; one dispatcher at a time per state directory (wait for it, or stop it, or give another --state-dir)",
				ErrStateInUse, dir, holder)
		}
		return nil, fmt.Errorf("dispatcher: lock %s: %w", path, err)
	}
	info := fmt.Sprintf("pid %d\ncommand %s\nsince %s\n", os.Getpid(), strings.Join(os.Args, " "), time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(info), 0) // who holds it is for messages only
	}
	return &stateLock{f: f}, nil
}

// release gives the lock up.
func (l *stateLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the file drops the flock
	l.f = nil
	return err
}

// lockHolder says who holds the lock, from what the holder wrote.
func lockHolder(f *os.File) string {
	b := make([]byte, 4096)
	n, _ := f.ReadAt(b, 0)
	var pid, cmd string
	for _, line := range strings.Split(string(b[:n]), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "pid":
			pid = v
		case "command":
			cmd = v
		}
	}
	if _, err := strconv.Atoi(pid); err != nil {
		return "another process"
	}
	if cmd == "" {
		return "process " + pid
	}
	return fmt.Sprintf("process %s (%s)", pid, cmd)
}

// writable makes dir if needed and checks that files can be created in
// it, so that a read-only directory is named as such rather than met as
// SQLite's "unable to open database file".
func writable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return notWritable(dir, err)
	}
	f, err := os.CreateTemp(dir, ".write-test-*")
	if err != nil {
		return notWritable(dir, err)
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return nil
}

func notWritable(dir string, err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("dispatcher: %w: %s: %v (give a --state-dir this user can write)", ErrStateNotWritable, dir, err)
	}
	return fmt.Errorf("dispatcher: state directory %s: %w", dir, err)
}

// CheckStateDir reports, before anything is opened in it, whether a
// Dispatcher could use dir: that it can be written, and that no other
// process holds its lock. New takes the lock itself; this is for callers
// that open other files there first (the results store).
func CheckStateDir(dir string) error {
	_, err := CheckStateDirUndo(dir)
	return err
}

// CheckStateDirUndo is CheckStateDir, and returns undo, which removes what
// the check made (the lock file, and the directory when the check created
// it and nothing else was put there), for a caller that gives up before
// the state is used: a run that could not open its store leaves nothing
// behind.
func CheckStateDirUndo(dir string) (undo func(), err error) {
	_, dirErr := os.Stat(dir)
	path := filepath.Join(dir, LockFile)
	_, lockErr := os.Stat(path)
	l, err := lockState(dir)
	if err != nil {
		return func() {}, err
	}
	undo = func() {
		if errors.Is(lockErr, fs.ErrNotExist) {
			os.Remove(path)
		}
		if errors.Is(dirErr, fs.ErrNotExist) {
			os.Remove(dir) // only if empty
		}
	}
	return undo, l.release()
}
