package wire

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// readiness waits for a ZeroMQ socket to hold a frame in Go's network
// poller, on a duplicate of the socket's ZMQ_FD, rather than in a
// blocking zmq_poll. A zmq_poll holds an OS thread in a C call for the
// whole wait, and each frame that ends it costs the thread's return to
// the scheduler and the hand-offs around it. Frames that come one at a
// time, as the results of slow hosts do, paid that once a frame; a
// goroutine parked in the poller is woken for the price of a channel
// send.
//
// ZMQ_FD signals edges, not levels: it becomes readable when the socket's
// events may have changed, and reading ZMQ_EVENTS resets it. A reader
// therefore receives until EAGAIN before it waits, and a wake-up reads the
// events again before it counts as a frame.
type readiness struct {
	f  *os.File
	rc syscall.RawConn
}

func newReadiness(sock *zmq.Socket) (*readiness, error) {
	fd, err := sock.GetFd()
	if err != nil {
		return nil, fmt.Errorf("socket's file descriptor: %w", err)
	}
	// A duplicate: the poller closes what it holds, and the original is
	// the socket's.
	dup, err := syscall.Dup(fd)
	if err != nil {
		return nil, fmt.Errorf("socket's file descriptor: %w", err)
	}
	syscall.CloseOnExec(dup)
	if err := syscall.SetNonblock(dup, true); err != nil {
		syscall.Close(dup)
		return nil, fmt.Errorf("socket's file descriptor: %w", err)
	}
	// A non-blocking descriptor makes a File the poller watches.
	f := os.NewFile(uintptr(dup), "zmq")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("socket's file descriptor: %w", err)
	}
	return &readiness{f: f, rc: rc}, nil
}

// wait returns once sock holds a frame, or ErrTimeout at deadline (none
// when zero). The caller has received until EAGAIN, and serialises the
// socket's use.
func (w *readiness) wait(sock *zmq.Socket, deadline time.Time) error {
	if err := w.f.SetReadDeadline(deadline); err != nil {
		return err
	}
	var evErr error
	err := w.rc.Read(func(uintptr) bool {
		ev, err := sock.GetEvents()
		if err != nil {
			evErr = err
			return true
		}
		return ev&zmq.POLLIN != 0
	})
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ErrTimeout
	case err != nil:
		return err
	}
	return evErr
}

func (w *readiness) close() error { return w.f.Close() }
