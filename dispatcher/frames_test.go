package dispatcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"backfill/wire"
)

// TestIntakeHeldWhileGathering: while the Run loop gathers a batch, the
// intake reader holds after its next frame and reads nothing more; when
// the gather ends it reads what came meanwhile in one go before the loop
// takes the batch. A pause that ended before the reader came to it, or a
// reader stopped while held, holds nothing.
func TestIntakeHeldWhileGathering(t *testing.T) {
	// inproc: a frame sent is in the receiver's queue when Send returns,
	// so what the reader has not read is known to be there.
	rx, err := wire.Listen("inproc://intake-held")
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := wire.Dial("inproc://intake-held")
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	send := func(n int) {
		for i := range n {
			if err := tx.Send(wire.KindResult, wire.Result{TaskID: "t", Lease: int64(i)}, 5*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	d := &Dispatcher{recv: rx}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan frame, 16)
	var wg sync.WaitGroup
	wg.Go(func() { d.readIntake(ctx, out) })
	defer func() {
		cancel()
		wg.Wait()
	}()

	p := newIntakePause()
	d.pause.Store(p)
	send(1)
	if f := <-out; f.kind != wire.KindResult {
		t.Fatalf("first frame: %+v", f)
	}
	<-p.holding
	send(4)
	if n := len(out); n != 0 {
		t.Fatalf("the reader read %d frames while held", n)
	}
	d.pause.Store(nil)
	if !p.end() {
		t.Fatal("end: the reader was holding, but end says not")
	}
	<-p.drained
	if n := len(out); n != 4 {
		t.Fatalf("%d frames read at the gather's end, want the 4 that came during it", n)
	}
	for range 4 {
		<-out
	}

	// Ended before the reader came to it: no hold, frames read as they come.
	late := newIntakePause()
	if late.end() {
		t.Error("end of a pause nobody held says it was held")
	}
	if late.hold(ctx) {
		t.Error("a reader held by a pause that had ended")
	}

	// A reader held when its context ends lets go without draining.
	stopped := newIntakePause()
	sctx, scancel := context.WithCancel(context.Background())
	scancel()
	if stopped.hold(sctx) {
		t.Error("a reader whose context ended stays held")
	}
}
