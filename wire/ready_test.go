package wire

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// TestRecvWaitsInThePoller: a Receiver waits for frames in Go's poller
// (ready.go). Frames that come one at a time, each after the receiver
// began to wait, wake it every time; frames that came together are all
// read; an empty socket times out at the deadline; and closing the
// Receiver closes the descriptor its waits were on.
func TestRecvWaitsInThePoller(t *testing.T) {
	const n = 50
	tests := []struct {
		name string
		// lockstep sends each frame only once the one before it was
		// received: the receiver is waiting when it comes.
		lockstep bool
	}{
		{name: "one at a time", lockstep: true},
		{name: "all at once", lockstep: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rx, tx := plainPair(t)
			got := make(chan int64, n)
			errc := make(chan error, 1)
			go func() {
				for range n {
					kind, v, err := rx.Recv(10 * time.Second)
					if err != nil || kind != KindTask {
						errc <- errors.Join(err, errors.New("not a task"))
						return
					}
					got <- v.(*Task).Lease
				}
				errc <- nil
			}()
			for i := range n {
				if err := tx.Send(KindTask, Task{ID: "t", Lease: int64(i)}, 5*time.Second); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
				if tt.lockstep {
					if lease := <-got; lease != int64(i) {
						t.Fatalf("received lease %d, want %d", lease, i)
					}
				}
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if !tt.lockstep {
				for i := range n {
					if lease := <-got; lease != int64(i) {
						t.Fatalf("received lease %d, want %d", lease, i)
					}
				}
			}
			start := time.Now()
			if _, _, err := rx.Recv(30 * time.Millisecond); !errors.Is(err, ErrTimeout) {
				t.Fatalf("recv on an empty socket: %v, want ErrTimeout", err)
			}
			if waited := time.Since(start); waited < 30*time.Millisecond {
				t.Errorf("an empty socket timed out after %v, before its deadline", waited)
			}
		})
	}

	t.Run("close", func(t *testing.T) {
		rx, err := Listen("tcp://127.0.0.1:*")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := rx.Recv(0); !errors.Is(err, ErrTimeout) {
			t.Fatalf("recv with no wait: %v, want ErrTimeout", err)
		}
		fd := int(rx.ready.f.Fd())
		var open syscall.Stat_t
		if err := syscall.Fstat(fd, &open); err != nil {
			t.Fatalf("the descriptor waited on: %v", err)
		}
		if err := rx.Close(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := rx.Recv(0); !errors.Is(err, ErrClosed) {
			t.Fatalf("recv after close: %v, want ErrClosed", err)
		}
		// Closed, or the number now names another file.
		var after syscall.Stat_t
		if err := syscall.Fstat(fd, &after); err == nil && after.Dev == open.Dev && after.Ino == open.Ino {
			t.Errorf("descriptor %d is still open after Close", fd)
		}
	})
}
