package wire

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// plainPair is a plaintext Receiver on loopback and a Sender dialled to
// it, both closed when the test ends.
func plainPair(t *testing.T) (*Receiver, *Sender) {
	t.Helper()
	rx, err := Listen("tcp://127.0.0.1:*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rx.Close() })
	tx, err := Dial(rx.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Close() })
	return rx, tx
}

func TestSocketsCarryMessages(t *testing.T) {
	rx, tx := plainPair(t)

	const n = 100
	for i := 0; i < n; i++ {
		if err := tx.Send(KindTask, Task{ID: "t", Lease: int64(i)}, 5*time.Second); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	for i := 0; i < n; i++ {
		kind, v, err := rx.Recv(5 * time.Second)
		if err != nil {
			t.Fatalf("recv %d: %v", i, err)
		}
		if kind != KindTask || v.(*Task).Lease != int64(i) {
			t.Fatalf("recv %d: %v %#v (out of order or wrong kind)", i, kind, v)
		}
	}
	if _, _, err := rx.Recv(10 * time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("recv on empty socket: %v, want ErrTimeout", err)
	}
}

// A Sender with ZMQ_IMMEDIATE must not queue frames for a peer that is not
// there: Send times out instead of pretending to deliver.
func TestSendTimesOutWithoutPeer(t *testing.T) {
	// An ipc path nobody binds: unlike a closed tcp port, no other test
	// can take it over meanwhile.
	endpoint := "ipc://" + filepath.Join(t.TempDir(), "nobody")

	tx, err := Dial(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	err = tx.Send(KindHello, Hello{Supervisor: "s"}, 50*time.Millisecond)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("send to absent peer: %v, want ErrTimeout", err)
	}
}

// Frames from a foreign peer are dropped and counted; the socket goes on.
func TestReceiverDropsForeignFrames(t *testing.T) {
	rx, err := Listen("tcp://127.0.0.1:*")
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	raw, err := zmq.NewSocket(zmq.PUSH)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetLinger(0)
	if err := raw.Connect(rx.Endpoint()); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.SendBytes([]byte("GET / HTTP/1.0\r\n\r\n"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.SendMessage("part one", "part two"); err != nil {
		t.Fatal(err)
	}
	good, _ := Encode(KindWelcome, Welcome{Dispatcher: "d"})
	if _, err := raw.SendBytes(good, 0); err != nil {
		t.Fatal(err)
	}
	var bad int
	for {
		kind, v, err := rx.Recv(5 * time.Second)
		if errors.Is(err, ErrBadFrame) {
			bad++
			continue
		}
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		if kind != KindWelcome || v.(*Welcome).Dispatcher != "d" {
			t.Fatalf("got %v %#v", kind, v)
		}
		break
	}
	if bad != 2 || rx.Dropped() != 2 {
		t.Fatalf("bad frames seen %d, counted %d; want 2 and 2", bad, rx.Dropped())
	}
}

func TestListenRefusesBadEndpoint(t *testing.T) {
	for _, ep := range []string{"", "nonsense", "tcp://256.1.1.1:1"} {
		if r, err := Listen(ep); err == nil {
			r.Close()
			t.Errorf("Listen(%q) succeeded", ep)
		}
	}
	if s, err := Dial("nonsense"); err == nil {
		s.Close()
		t.Error("Dial(nonsense) succeeded")
	}
}
