package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"backfill/wire"
)

const (
	// intakeWait is how long the intake reader waits for a frame before
	// it looks whether Run stops.
	intakeWait = 100 * time.Millisecond
	// intakeQueue is how many decoded frames wait for the Run loop.
	intakeQueue = 1024
	maxBatch    = 4096 // frames handled in one step
	// gatherWait is how long a batch with a few results in it waits for
	// more to join it, while tasks are out that may answer (gather):
	// results that arrive close together are applied together. When
	// hosts answer slowly results come one by one, and a step each, with
	// its statements, its dispatch, its flush and its wake-up, cost per
	// result what a batch costs; a crawl bound by the hosts' pace loses
	// nothing by waiting this long (a paced host's task goes out
	// readyLead before its time), and one bound by the CPU has its
	// batches full before.
	gatherWait = 50 * time.Millisecond
)

// frame is one decoded intake frame and who sent it, a frame from that
// did not decode (bad), or the error that ended the intake.
type frame struct {
	kind wire.Kind
	v    any
	from wire.Peer
	bad  error
	err  error
}

// readIntake reads and decodes frames into out until ctx is done or the
// intake fails; a failure is passed on as the last frame.
func (d *Dispatcher) readIntake(ctx context.Context, out chan<- frame) {
	for ctx.Err() == nil {
		f, ok := d.readFrame(intakeWait)
		if !ok {
			continue
		}
		select {
		case out <- f:
		case <-ctx.Done():
			return
		}
		if f.err != nil {
			return
		}
		if p := d.pause.Load(); p != nil && p.hold(ctx) {
			// The gather is over: what came meanwhile joins its batch,
			// as much as the queue to the loop holds without waiting
			// (only this goroutine adds to it, and the loop waits).
			failed := false
			for !failed && len(out) < cap(out) {
				f, ok := d.readFrame(0)
				if !ok {
					break
				}
				out <- f
				failed = f.err != nil
			}
			close(p.drained)
			if failed {
				return // the intake failed: its error ends the Run
			}
		}
	}
}

// readFrame reads one frame, waiting up to wait; ok is false when none
// came.
func (d *Dispatcher) readFrame(wait time.Duration) (f frame, ok bool) {
	kind, v, from, err := d.recv.RecvFrom(wait)
	switch {
	case err == nil:
		return frame{kind: kind, v: v, from: from}, true
	case errors.Is(err, wire.ErrTimeout):
		return frame{}, false
	case errors.Is(err, wire.ErrBadFrame):
		return frame{from: from, bad: err}, true // counted and logged by the Run loop
	default:
		return frame{err: fmt.Errorf("dispatcher: intake: %w", err)}, true
	}
}

// intakePause holds the intake reader while the Run loop gathers a
// batch. Results that come one by one would otherwise wake the reader
// once each, to read what the loop leaves waiting until the gather ends
// anyway; a process woken that often spends more on the waking than on
// the frames. Held after the first frame of the gather, the reader reads
// the rest at its end, in one go.
type intakePause struct {
	resume  chan struct{} // closed when the gather ends
	drained chan struct{} // closed by a held reader once it read what came
	holding chan struct{} // closed when the reader holds: the gather waits for drained

	mu    sync.Mutex
	ended bool // the gather is over: the reader must not hold
}

func newIntakePause() *intakePause {
	return &intakePause{resume: make(chan struct{}), drained: make(chan struct{}), holding: make(chan struct{})}
}

// hold keeps the reader until the gather ends; false when it had ended
// already, or ctx ended first.
func (p *intakePause) hold(ctx context.Context) bool {
	p.mu.Lock()
	if p.ended {
		p.mu.Unlock()
		return false
	}
	close(p.holding)
	p.mu.Unlock()
	select {
	case <-p.resume:
		return true
	case <-ctx.Done():
		return false
	}
}

// end lets the reader go, and says whether it was held (and will close
// drained).
func (p *intakePause) end() bool {
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
	close(p.resume)
	select {
	case <-p.holding: // closed under mu, before ended was set, if at all
		return true
	default:
		return false
	}
}

// receive waits up to wait (recvWait but when a step is due at once) for
// one frame, then takes whatever else is ready, up to maxBatch. idle
// reports that nothing came: a good time to commit. (A queue that is merely empty for an instant is
// not idle: under load it is, between every two results.)
func (d *Dispatcher) receive(ctx context.Context, intake <-chan frame, wait time.Duration) (out []frame, idle bool, err error) {
	if wait <= 0 {
		select {
		case f := <-intake:
			if f.err != nil {
				return nil, true, f.err
			}
			out = append(out, f)
		default:
			return nil, true, nil
		}
		return d.receiveMore(intake, out)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case f := <-intake:
		if f.err != nil {
			return nil, true, f.err
		}
		out = append(out, f)
	case <-timer.C:
		return nil, true, nil
	case <-ctx.Done():
		return nil, true, nil // Run sees ctx.Err next
	}
	return d.receiveMore(intake, out)
}

// gather lets more frames join a batch that has results in it but fewer
// than resultBatch and than the out tasks on lease may bring: it waits
// gatherWait, then takes what came meanwhile, up to maxBatch frames. It
// sleeps rather than taking each frame as it comes, and holds the intake
// reader meanwhile (intakePause), so the process wakes once a batch, not
// once a frame.
func (d *Dispatcher) gather(ctx context.Context, intake <-chan frame, frames []frame, out int) ([]frame, error) {
	n := 0
	for _, f := range frames {
		if _, ok := f.v.(*wire.Result); ok {
			n++
		}
	}
	if n == 0 || n >= min(out, resultBatch) || len(frames) >= maxBatch {
		return frames, nil
	}
	p := newIntakePause()
	d.pause.Store(p)
	timer := time.NewTimer(gatherWait)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	d.pause.Store(nil)
	if p.end() {
		select {
		case <-p.drained:
		case <-ctx.Done():
		}
	}
	if ctx.Err() != nil {
		return frames, nil // Run sees ctx.Err next
	}
	frames, _, err := d.receiveMore(intake, frames)
	return frames, err
}

// receiveMore adds to out the frames already waiting, up to maxBatch.
func (d *Dispatcher) receiveMore(intake <-chan frame, out []frame) ([]frame, bool, error) {
	for len(out) < maxBatch {
		select {
		case f := <-intake:
			if f.err != nil {
				return out, false, f.err
			}
			out = append(out, f)
		default:
			return out, false, nil
		}
	}
	return out, false, nil
}
