package dispatcher

import (
	"context"
	"errors"
	"sync"
	"time"

	"backfill/seconds"
	"backfill/wire"
)

const (
	// recvWait is the longest wait for a frame before the crawl has
	// settled (expect.go).
	recvWait = 20 * time.Millisecond
	// quietMax is the longest wait for a frame once settled: the loop
	// wakes without one only when something is due (quietUntil).
	quietMax      = 250 * time.Millisecond
	progressEvery = 250 * time.Millisecond
	// commitEvery bounds how long the state transaction stays open while
	// results keep coming: results are committed together by time, not
	// by step. Committing after every step put a WAL commit on every
	// handful of results, and a commit rewrites each page its rows
	// touched, so fewer commits write fewer pages; when results trickle
	// in from slow hosts, a quarter second held a few dozen. A crash
	// loses at most this much progress, and nothing of it for good:
	// uncommitted results are answers to leases the state still shows
	// open, so their tasks are sent again, and the supervisors answer
	// them from the answers they keep (supervisor's answers.go) without
	// a request.
	commitEvery = time.Second
	// dispatchEvery is the longest a step works through its batch
	// before it dispatches what the results so far have freed.
	dispatchEvery = 5 * time.Millisecond
)

// Run crawls until no work is left (every record complete, or nothing
// queued or leased) or ctx is done, and returns the summary. Results are
// handled in batches of the frames that came together (within gatherWait
// of the first), and the state transaction is committed at least every
// commitEvery, whenever the intake runs dry with no task out, and before
// Run returns. After an error, Close the Dispatcher;
// a new one resumes from the state.
func (d *Dispatcher) Run(ctx context.Context) (*Summary, error) {
	start := time.Now()
	// Frames are read and decoded by their own goroutine, so decoding the
	// next results overlaps with committing the last ones.
	intake := make(chan frame, intakeQueue)
	rctx, stopIntake := context.WithCancel(ctx)
	var rwg sync.WaitGroup
	rwg.Go(func() { d.readIntake(rctx, intake) })
	defer func() {
		stopIntake()
		rwg.Wait()
	}()
	if err := d.beginRun(ctx, start); err != nil {
		return nil, err
	}
	outbox := d.startOutbox(ctx)
	finished, runErr := d.newRunLoop(ctx, intake, start).run()
	runErr = d.commitRun(ctx, finished, runErr)
	lateDone := d.farewellRun(ctx, intake, finished && runErr == nil)
	stored := d.drainOutbox(ctx, outbox)
	sum, err := d.summary(context.WithoutCancel(ctx))
	if err != nil && runErr == nil {
		runErr = err
	}
	sum.Finished = finished && runErr == nil
	stored.fill(sum)
	d.finalStatus(sum, start, runErr)
	if lateDone != nil {
		<-lateDone // the intake reader stops when Run returns
	}
	d.log.Info("dispatcher finished", "steps", d.steps, "commits", d.st.commits, "records", sum.Records, "complete", sum.Complete, "partial", sum.Partial,
		"untouched", sum.Untouched, "pages", sum.Pages, "reused", sum.Reused, "late", sum.Late,
		"errors", sum.Errors, seconds.Attr("elapsed", sum.Elapsed.Round(time.Millisecond)), "pages_per_sec", int(sum.PagesPerSec))
	return sum, runErr
}

// beginRun starts the Run at start: the counts so far join the totals,
// and the start-of-run transactions run once each (the remap of answers
// to changed mappings, the retry of failed tasks, the refresh).
func (d *Dispatcher) beginRun(ctx context.Context, start time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.foldTotals() // what came before this Run (Load's filters included) joins the totals, and the counts start at zero
	d.runStart = start
	d.runState, d.runBegan = StateRunning, start
	d.log.Info("dispatcher running", "endpoint", d.recv.Endpoint(), "records", d.nRecords,
		"complete", d.nComplete, "queued", d.queuedN, "depth", d.cfg.Depth, "mappings", d.digest,
		"restarts", d.base.starts-1)
	if w := d.admit.Warning(d.recv.Endpoint()); w != "" {
		d.log.Warn(w)
	}
	if !d.remapBegun && !d.closed {
		d.remapBegun = true
		if err := d.inTx(context.WithoutCancel(ctx), d.remap); err != nil {
			return err
		}
	}
	if !d.retryBegun && !d.closed {
		if err := d.inTx(context.WithoutCancel(ctx), d.retryFailed); err != nil {
			return err
		}
	}
	if d.cfg.Refresh && !d.refreshBegun && !d.closed {
		if err := d.inTx(context.WithoutCancel(ctx), func(ctx context.Context) error { return d.startRefresh(ctx, start) }); err != nil {
			return err
		}
	}
	return nil
}

// runLoop is the Run loop's own state: its timers and flags.
type runLoop struct {
	d      *Dispatcher
	ctx    context.Context
	intake <-chan frame
	start  time.Time
	tick   time.Duration
	// The step's statements run under a context that is never
	// cancelled: with a cancellable one the driver and database/sql
	// start a goroutine per statement to watch it, a good part of
	// the step's cost. Cancellation is seen between steps, and
	// every statement of a step is short.
	stepCtx context.Context

	settled                            bool // once settled, dispatching never pauses again (see settle)
	kick                               bool // the next receive waits for no frame
	lastTick, lastProgress, lastStatus time.Time
	out                                int       // tasks out on lease after the last step: answers that may come
	due                                time.Time // when the loop is due to step without a frame
}

func (d *Dispatcher) newRunLoop(ctx context.Context, intake <-chan frame, start time.Time) *runLoop {
	return &runLoop{
		d:       d,
		ctx:     ctx,
		intake:  intake,
		start:   start,
		tick:    min(d.cfg.Lease/4, d.cfg.Heartbeat/2, time.Second),
		stepCtx: context.WithoutCancel(ctx),
		due:     start.Add(recvWait),
	}
}

// runReport is what a step has to report once mu is released: progress,
// status and history, each when it was due.
type runReport struct {
	progress *Progress
	status   *Status
	hist     *History
}

// run steps until no work is left (finished, as opposed to stopped), ctx
// is done or a step fails.
func (l *runLoop) run() (finished bool, err error) {
	for {
		if err := l.ctx.Err(); err != nil {
			return false, err
		}
		frames, idle, err := l.receive()
		if err != nil {
			return false, err
		}
		done, rep, err := l.step(frames, idle, time.Now())
		if err != nil {
			return false, err
		}
		l.d.report(rep)
		if done {
			return true, nil
		}
	}
}

// receive waits for the next batch of frames, until the loop is due to
// step without one, and lets more results join it (gather).
func (l *runLoop) receive() ([]frame, bool, error) {
	wait := min(max(time.Until(l.due), 0), quietMax)
	if l.kick {
		wait, l.kick = 0, false
	}
	frames, idle, err := l.d.receive(l.ctx, l.intake, wait)
	if err == nil && !idle {
		frames, err = l.d.gather(l.ctx, l.intake, frames, l.out)
	}
	return frames, idle, err
}

// step runs one step on frames under mu, and takes what is due to be
// reported and when the loop is due to step again.
func (l *runLoop) step(frames []frame, idle bool, now time.Time) (bool, runReport, error) {
	d := l.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false, runReport{}, errors.New("dispatcher: closed while running")
	}
	doTick := now.Sub(l.lastTick) >= l.tick
	if doTick {
		l.lastTick = now
	}
	d.steps++
	// step handles registrations before it dispatches, so a Hello in
	// this batch counts towards settling only from the next one.
	l.settled = l.settled || d.settle(l.start, now)
	done, err := d.step(l.stepCtx, frames, now, doTick, l.settled, idle)
	if !l.settled && err == nil && !done {
		// A Hello of this batch may have settled the crawl: the
		// next step dispatches without waiting for a frame.
		l.settled = d.settle(l.start, now)
		l.kick = l.settled
	}
	l.out = len(d.w.leased)
	rep := l.reports(now, done, err == nil)
	l.schedule(now)
	return done, rep, err
}

// reports takes the progress, status and history that are due at now.
// Callers hold mu.
func (l *runLoop) reports(now time.Time, done, ok bool) runReport {
	d := l.d
	var rep runReport
	if d.cfg.Progress != nil && (done || now.Sub(l.lastProgress) >= progressEvery) {
		l.lastProgress = now
		p := d.progress(l.start)
		rep.progress = &p
	}
	if ok && !done && now.Sub(l.lastStatus) >= StatusEvery {
		l.lastStatus = now
		d.noteRefusals(now)
		st := d.status(StateRunning, l.start, now)
		rep.status = &st
		d.led.sample(sampleOf(st), false)
		if now.Sub(d.led.lastSave) >= historyEvery {
			h := d.led.snapshot(now, sumMaps(d.base.errs, d.run.errs))
			rep.hist = &h
			d.led.lastSave = now
		}
	}
	return rep
}

// schedule sets when the loop is due to step without a frame: at once
// (recvWait) until the crawl has settled, then when something is due
// (quietUntil). Callers hold mu.
func (l *runLoop) schedule(now time.Time) {
	l.due = now.Add(recvWait)
	if l.settled {
		at := []time.Time{l.lastTick.Add(l.tick), l.lastStatus.Add(StatusEvery)}
		if l.d.cfg.Progress != nil {
			at = append(at, l.lastProgress.Add(progressEvery))
		}
		l.due = l.d.quietUntil(now, at...)
	}
}

// report hands on what a step took to report, outside mu.
func (d *Dispatcher) report(rep runReport) {
	if rep.progress != nil {
		d.cfg.Progress(*rep.progress)
	}
	if rep.status != nil {
		d.putStatus(*rep.status)
	}
	if rep.hist != nil {
		d.putHistory(*rep.hist)
	}
}

// commitRun ends the refresh of a finished crawl and commits what the
// Run's steps left in the state transaction.
func (d *Dispatcher) commitRun(ctx context.Context, finished bool, runErr error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed && finished && d.refreshOpen > 0 && runErr == nil {
		// The refresh is over: what it re-checked is settled now.
		runErr = d.inTx(context.WithoutCancel(ctx), d.finishRefresh)
	}
	if !d.closed {
		// Every step that finished left the state consistent: commit them,
		// whether Run ends done, cancelled or on an intake error. (A step
		// that failed has rolled the transaction back already.) A crawl
		// with no work left is finished: the next Dispatcher on the
		// state starts a new one (totals.go).
		qctx := context.WithoutCancel(ctx)
		err := d.st.begin(qctx)
		if err == nil && finished && runErr == nil {
			err = d.st.setMeta(qctx, metaFinished, 1)
		}
		if err == nil {
			err = d.commitState(qctx)
		}
		if err != nil {
			d.abandon()
			runErr = errors.Join(runErr, err)
		}
	}
	return runErr
}

// farewellRun tells the members of a finished crawl that it is over, and
// those that join within Config.LateJoinWait; the channel returned, if
// any, is closed once that wait is over.
func (d *Dispatcher) farewellRun(ctx context.Context, intake <-chan frame, finished bool) chan struct{} {
	if !finished {
		return nil
	}
	d.farewell()
	if d.cfg.LateJoinWait <= 0 {
		return nil
	}
	lateDone := make(chan struct{})
	until := time.Now().Add(d.cfg.LateJoinWait)
	go func() {
		defer close(lateDone)
		d.tellLateJoiners(ctx, intake, until)
	}()
	return lateDone
}

// finalStatus writes the status and history the Run ends with.
func (d *Dispatcher) finalStatus(sum *Summary, start time.Time, runErr error) {
	final := StateFinished
	if runErr != nil {
		final = StateStopped
	}
	d.mu.Lock()
	now := time.Now()
	d.runState = final
	st := d.status(final, start, now)
	st.Records, st.Complete, st.Partial = sum.Records, sum.Complete, sum.Partial
	d.led.sample(sampleOf(st), true)
	hist := d.led.snapshot(now, sumMaps(d.base.errs, d.run.errs))
	d.mu.Unlock()
	d.putStatus(st)
	d.putHistory(hist)
}

// quietUntil is when the loop must step even if no frame comes: the
// earliest of the times given (the next tick, status and progress
// report), the commit of the open transaction, and the next host queue
// whose pace lets it go (pace.go), and at most quietMax from now. An idle
// dispatcher thus wakes a few times a second, not at every recvWait.
// Callers hold mu.
func (d *Dispatcher) quietUntil(now time.Time, at ...time.Time) time.Time {
	due := now.Add(quietMax)
	if d.st.inTx {
		at = append(at, d.st.txStart.Add(commitEvery))
	}
	if d.w.timed.Len() > 0 {
		at = append(at, d.w.timed[0].until)
	}
	for _, t := range at {
		if t.Before(due) {
			due = t
		}
	}
	return due
}

// step handles one batch under mu: membership, results, failed sends,
// expired leases, then new dispatches. Its writes go into the open state
// transaction, committed when it has been open for commitEvery, when the
// intake is idle, or when the work is done.
func (d *Dispatcher) step(ctx context.Context, frames []frame, now time.Time, tick, dispatch, idle bool) (bool, error) {
	if err := d.st.begin(ctx); err != nil {
		return false, err
	}
	if err := d.stepBatch(ctx, frames, now, tick, dispatch); err != nil {
		d.abandon()
		return false, err
	}
	if err := d.refill(ctx); err != nil {
		d.abandon()
		return false, err
	}
	if d.retryPending {
		if err := d.retryFailed(ctx); err != nil {
			d.abandon()
			return false, err
		}
	}
	done := d.workDone()
	// A quiet intake commits at once only when no answer is due: while
	// tasks are out, results trickling in (slow hosts) join one commit
	// every commitEvery, however far apart they come.
	if done || (idle && len(d.w.leased) == 0) || now.Sub(d.st.txStart) >= commitEvery {
		if err := d.commitState(ctx); err != nil {
			return false, err
		}
	}
	return done, nil
}

// stepBatch is the part of a step that a failure rolls back: the frames,
// the failed sends, the expired leases and the dispatch, flushed.
func (d *Dispatcher) stepBatch(ctx context.Context, frames []frame, now time.Time, tick, dispatch bool) error {
	if err := d.handleFrames(ctx, frames, now, dispatch); err != nil {
		return err
	}
	if err := d.requeueFailed(ctx); err != nil {
		return err
	}
	if tick {
		if err := d.expire(ctx, now); err != nil {
			return err
		}
	}
	if dispatch {
		if err := d.dispatch(ctx, now); err != nil {
			return err
		}
	}
	return d.flush(ctx)
}

// handleFrames handles the frames of a batch in their order.
func (d *Dispatcher) handleFrames(ctx context.Context, frames []frame, now time.Time, dispatch bool) error {
	lastDispatch := time.Now()
	// Results are applied resultBatch at a time, in their order
	// among the other frames.
	var results []result
	commit := func() error {
		if len(results) == 0 {
			return nil
		}
		err := d.commitResults(ctx, results, now)
		clear(results)
		results = results[:0]
		return err
	}
	for i, f := range frames {
		// A batch can take long (a page with many new links, or
		// hundreds of results after a pause): hand out the tasks its
		// results freed as it goes, so supervisors never wait for the
		// whole batch.
		if dispatch && i > 0 && time.Since(lastDispatch) >= dispatchEvery {
			if err := commit(); err != nil {
				return err
			}
			if err := d.dispatch(ctx, now); err != nil {
				return err
			}
			lastDispatch = time.Now()
		}
		if d.members.Quarantined(f.from) {
			// Refused, and counted, until an operator lifts it.
			d.members.Refuse(f.from, frameMember(f.v), now)
			continue
		}
		if f.bad != nil {
			d.run.malformed++
			d.members.Malformed(f.from, f.bad, now)
			continue
		}
		if v, ok := f.v.(*wire.Result); ok {
			if results = append(results, result{v, f.from}); len(results) == resultBatch {
				if err := commit(); err != nil {
					return err
				}
			}
			continue
		}
		if err := commit(); err != nil {
			return err
		}
		if err := d.handleMemberFrame(ctx, f, now); err != nil {
			return err
		}
	}
	return commit()
}

// handleMemberFrame handles a frame of membership: a Hello or a
// Heartbeat.
func (d *Dispatcher) handleMemberFrame(ctx context.Context, f frame, now time.Time) error {
	switch v := f.v.(type) {
	case *wire.Hello:
		if _, err := d.register(ctx, *v, f.from, true, now); err != nil {
			return err
		}
	case *wire.Heartbeat:
		m, err := d.register(ctx, v.Hello, f.from, false, now)
		if err != nil {
			return err
		}
		if m != nil {
			m.beat(v)
			d.led.heartbeat(v)
			d.noteDNS(v)
			d.notePolite(v)
		}
	default:
		d.log.Debug("unexpected frame on intake", "kind", f.kind)
	}
	return nil
}

// requeueFailed re-queues the tasks whose send failed, if their lease is
// still the one sent.
func (d *Dispatcher) requeueFailed(ctx context.Context) error {
	for {
		select {
		case f := <-d.failed:
			if key, ok := parseTaskID(f.taskID); ok && d.w.leased[key] != nil && d.w.leased[key].lease.Token == f.lease {
				t := d.w.leased[key]
				d.log.Debug("send failed; task re-queued", "url", t.url, "host", t.host, "supervisor", t.lease.Member)
				if err := d.requeue(ctx, t); err != nil {
					return err
				}
			}
		default:
			return nil
		}
	}
}

// workDone reports that no work is left: every record complete, or
// nothing queued, spilled, leased, to seed or to retry, or only render
// tasks no member will take. Callers hold mu.
func (d *Dispatcher) workDone() bool {
	// Re-checks of answers given are made before the crawl ends.
	checking := d.checks.out > 0 || len(d.checks.pending) > 0
	return (d.nComplete == d.nRecords && !checking) ||
		(len(d.w.queued) == 0 && !d.w.spilled && len(d.w.leased) == 0 && !d.unseeded() && !d.retryPending && !checking) ||
		d.onlyUnrenderableLeft()
}

// inTx runs fn in the state transaction (begun if none is open), with the
// records it changed flushed, and commits. On failure the transaction is
// rolled back. Callers hold mu.
func (d *Dispatcher) inTx(ctx context.Context, fn func(context.Context) error) error {
	if err := d.st.begin(ctx); err != nil {
		return err
	}
	if err := fn(ctx); err != nil {
		d.abandon()
		return err
	}
	if err := d.flush(ctx); err != nil {
		d.abandon()
		return err
	}
	return d.commitState(ctx)
}

// commitState commits the open state transaction, with the lease counter.
// Callers hold mu.
func (d *Dispatcher) commitState(ctx context.Context) error {
	if !d.st.inTx {
		return nil
	}
	if err := d.putCounters(ctx); err != nil {
		d.abandon()
		return err
	}
	if err := d.saveTotals(ctx, false); err != nil {
		d.abandon()
		return err
	}
	if err := d.st.commit(ctx); err != nil {
		d.abandon()
		return err
	}
	return nil
}

// abandon rolls the open state transaction back and forgets what was
// cached on top of it. Callers hold mu.
func (d *Dispatcher) abandon() {
	d.st.rollback()
	clear(d.recCache)
	clear(d.dirtyRecs)
	d.dirtyRecs = d.dirtyRecs[:0]
	clear(d.hosts)
	clear(d.dirtyHosts)
	d.dirtyHosts = d.dirtyHosts[:0]
	d.work = nil
	d.w.cursor = nil
}

// onlyUnrenderableLeft reports that the work left is render tasks no
// member can take and none ever will: every supervisor the crawl expects
// has joined and none renders. (Without Expect, a render node may still
// join, and the tasks wait for it.) They are counted in Summary.Waiting.
// Callers hold mu.
func (d *Dispatcher) onlyUnrenderableLeft() bool {
	if d.cfg.Expect == 0 || d.members.Len() < d.cfg.Expect || len(d.w.leased) > 0 || d.w.spilled || d.unseeded() {
		return false
	}
	for _, m := range d.members.All() {
		if m.Render {
			return false
		}
	}
	return len(d.w.queued) > 0 && len(d.w.queued) == d.w.waitingRender()
}
