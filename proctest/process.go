package proctest

import (
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"
)

// Process is a command a test started: its standard error kept as
// Lines, its end awaited.
type Process struct {
	Cmd    *exec.Cmd
	Stderr Lines
	done   chan struct{}
	err    error // Cmd.Wait's, once done is closed
}

// Start starts cmd, whose standard output is the caller's to set and
// whose standard error Start reads into Stderr. The test's end kills the
// process if it is still running, and waits for it.
func Start(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd, err)
	}
	go func() {
		p.Stderr.Scan(pipe)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Done is closed once the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits up to within for the process to end and returns its exit
// code; an error when it did not end in time or could not be waited for.
func (p *Process) Wait(within time.Duration) (int, error) {
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		return -1, fmt.Errorf("%s still running after %v", p.Cmd, within)
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0, nil
	case errors.As(p.err, &ee):
		return ee.ExitCode(), nil
	}
	return -1, fmt.Errorf("%s: %w", p.Cmd, p.err)
}
