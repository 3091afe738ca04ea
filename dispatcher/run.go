package dispatcher

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"backfill/cluster"
	"backfill/seconds"
	"backfill/wire"
)

const (
	recvWait      = 20 * time.Millisecond // longest idle wait for a frame
	maxBatch      = 4096                  // frames handled in one step
	progressEvery = 250 * time.Millisecond
	// commitEvery bounds how long the state transaction stays open while
	// results keep coming. Committing after every step put a WAL commit on
	// every handful of results; a crash loses at most this much progress,
	// and nothing of it for good: uncommitted results are answers to
	// leases the state still shows open, so their tasks are sent again.
	commitEvery = 250 * time.Millisecond
	// intakeQueue is how many decoded frames wait for the Run loop.
	intakeQueue = 1024
	// dispatchEvery is the longest a step works through its batch
	// before it dispatches what the results so far have freed.
	dispatchEvery = 5 * time.Millisecond
)

// Run crawls until no work is left (every record complete, or nothing
// queued or leased) or ctx is done, and returns the summary. Results are
// handled in batches of the frames that were ready together, and the state
// transaction is committed at least every commitEvery, whenever the intake
// runs dry, and before Run returns. After an error, Close the Dispatcher;
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
	d.mu.Lock()
	d.foldTotals() // what came before this Run (Load's filters included) joins the totals, and the counts start at zero
	d.runStart = start
	d.runState, d.runBegan = StateRunning, start
	d.log.Info("dispatcher running", "endpoint", d.recv.Endpoint(), "records", d.nRecords,
		"complete", d.nComplete, "queued", d.queuedN, "depth", d.cfg.Depth, "mappings", d.digest,
		"restarts", d.base.starts-1)
	if w := d.admit.Warning(d.recv.Endpoint()); w != "" {
		d.log.Warn(w)
	}
	if !d.retryBegun && !d.closed {
		if err := d.inTx(context.WithoutCancel(ctx), d.retryFailed); err != nil {
			d.mu.Unlock()
			return nil, err
		}
	}
	if d.cfg.Refresh && !d.refreshBegun && !d.closed {
		if err := d.inTx(context.WithoutCancel(ctx), func(ctx context.Context) error { return d.startRefresh(ctx, start) }); err != nil {
			d.mu.Unlock()
			return nil, err
		}
	}
	d.mu.Unlock()
	outbox := d.startOutbox(ctx)

	tick := min(d.cfg.Lease/4, d.cfg.Heartbeat/2, time.Second)
	settled := false // once settled, dispatching never pauses again (see settle)
	kick := false    // the next receive waits for no frame
	var lastTick, lastProgress, lastStatus time.Time
	stepCtx := context.WithoutCancel(ctx)
	var runErr error
	finished := false // no work left, as opposed to stopped
	for {
		if err := ctx.Err(); err != nil {
			runErr = err
			break
		}
		wait := recvWait
		if kick {
			wait, kick = 0, false
		}
		frames, idle, err := d.receive(ctx, intake, wait)
		if err != nil {
			runErr = err
			break
		}
		now := time.Now()
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			runErr = errors.New("dispatcher: closed while running")
			break
		}
		doTick := now.Sub(lastTick) >= tick
		if doTick {
			lastTick = now
		}
		d.steps++
		// step handles registrations before it dispatches, so a Hello in
		// this batch counts towards settling only from the next one.
		settled = settled || d.settle(start, now)
		// The step's statements run under a context that is never
		// cancelled: with a cancellable one the driver and database/sql
		// start a goroutine per statement to watch it, a good part of
		// the step's cost. Cancellation is seen between steps, and
		// every statement of a step is short.
		done, err := d.step(stepCtx, frames, now, doTick, settled, idle)
		if !settled && err == nil && !done {
			// A Hello of this batch may have settled the crawl: the
			// next step dispatches without waiting for a frame.
			settled = d.settle(start, now)
			kick = settled
		}
		var p Progress
		report := d.cfg.Progress != nil && (done || now.Sub(lastProgress) >= progressEvery)
		if report {
			lastProgress = now
			p = d.progress(start)
		}
		var st Status
		var hist *History
		snap := err == nil && !done && now.Sub(lastStatus) >= StatusEvery
		if snap {
			lastStatus = now
			d.noteRefusals(now)
			st = d.status(StateRunning, start, now)
			d.led.sample(sampleOf(st), false)
			if now.Sub(d.led.lastSave) >= historyEvery {
				h := d.led.snapshot(now, sumMaps(d.base.errs, d.run.errs))
				hist = &h
				d.led.lastSave = now
			}
		}
		d.mu.Unlock()
		if err != nil {
			runErr = err
			break
		}
		if report {
			d.cfg.Progress(p)
		}
		if snap {
			d.putStatus(st)
		}
		if hist != nil {
			d.putHistory(*hist)
		}
		if done {
			finished = true
			break
		}
	}
	d.mu.Lock()
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
	d.mu.Unlock()
	var lateDone chan struct{}
	if finished && runErr == nil {
		d.farewell()
		if d.cfg.LateJoinWait > 0 {
			lateDone = make(chan struct{})
			until := time.Now().Add(d.cfg.LateJoinWait)
			go func() {
				defer close(lateDone)
				d.tellLateJoiners(ctx, intake, until)
			}()
		}
	}
	stored := d.drainOutbox(ctx, outbox)
	sum, err := d.summary(context.WithoutCancel(ctx))
	if err != nil && runErr == nil {
		runErr = err
	}
	sum.Finished = finished && runErr == nil
	stored.fill(sum)
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
	if lateDone != nil {
		<-lateDone // the intake reader stops when Run returns
	}
	d.log.Info("dispatcher finished", "steps", d.steps, "commits", d.st.commits, "records", sum.Records, "complete", sum.Complete, "partial", sum.Partial,
		"untouched", sum.Untouched, "pages", sum.Pages, "reused", sum.Reused, "late", sum.Late,
		"errors", sum.Errors, seconds.Attr("elapsed", sum.Elapsed.Round(time.Millisecond)), "pages_per_sec", int(sum.PagesPerSec))
	return sum, runErr
}

// frame is one decoded intake frame and who sent it, or the error that
// ended the intake.
type frame struct {
	kind wire.Kind
	v    any
	from wire.Peer
	err  error
}

// readIntake reads and decodes frames into out until ctx is done or the
// intake fails; a failure is passed on as the last frame.
func (d *Dispatcher) readIntake(ctx context.Context, out chan<- frame) {
	for ctx.Err() == nil {
		kind, v, from, err := d.recv.RecvFrom(recvWait)
		f := frame{kind: kind, v: v, from: from}
		switch {
		case err == nil:
		case errors.Is(err, wire.ErrTimeout):
			continue
		case errors.Is(err, wire.ErrBadFrame):
			d.log.Debug("bad frame dropped", "error", err)
			continue
		default:
			f = frame{err: fmt.Errorf("dispatcher: intake: %w", err)}
		}
		select {
		case out <- f:
		case <-ctx.Done():
			return
		}
		if f.err != nil {
			return
		}
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

// step handles one batch under mu: membership, results, failed sends,
// expired leases, then new dispatches. Its writes go into the open state
// transaction, committed when it has been open for commitEvery, when the
// intake is idle, or when the work is done.
func (d *Dispatcher) step(ctx context.Context, frames []frame, now time.Time, tick, dispatch, idle bool) (bool, error) {
	if err := d.st.begin(ctx); err != nil {
		return false, err
	}
	err := func() error {
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
			if d.quar.Has(f.from.Key) {
				// Refused, and counted, until an operator lifts it.
				d.quar.Add(f.from, frameMember(f.v), "a frame from a quarantined key", now)
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
			switch v := f.v.(type) {
			case *wire.Hello:
				if err := d.register(ctx, *v, f.from, true, now); err != nil {
					return err
				}
			case *wire.Heartbeat:
				if err := d.register(ctx, v.Hello, f.from, false, now); err != nil {
					return err
				}
				if m := d.members[v.Supervisor]; m != nil && m.key == f.from.Key {
					m.beat(v)
					d.led.heartbeat(v)
					d.noteDNS(v)
					d.notePolite(v)
				}
			default:
				d.log.Debug("unexpected frame on intake", "kind", f.kind)
			}
		}
		if err := commit(); err != nil {
			return err
		}
		for more := true; more; {
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
				more = false
			}
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
	}()
	if err != nil {
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
	done := d.nComplete == d.nRecords ||
		(len(d.w.queued) == 0 && !d.w.spilled && len(d.w.leased) == 0 && !d.unseeded() && !d.retryPending) ||
		d.onlyUnrenderableLeft()
	if done || idle || now.Sub(d.st.txStart) >= commitEvery {
		if err := d.commitState(ctx); err != nil {
			return false, err
		}
	}
	return done, nil
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
	if err := d.saveTotals(ctx); err != nil {
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
	clear(d.hosts)
	d.work = nil
	d.w.cursor = nil
}

// register handles a Hello or Heartbeat from the sender from: a supervisor
// unknown, or known under another incarnation (Started) or endpoint, is
// (re-)registered. A member is its key (cluster.Admission binds the task
// socket's key to the sender's): a Hello under a member's name from
// another key is an impersonation, and its sender is quarantined.
func (d *Dispatcher) register(ctx context.Context, h wire.Hello, from wire.Peer, hello bool, now time.Time) error {
	if h.Supervisor == "" || h.Endpoint == "" {
		d.log.Warn("registration without a name or endpoint ignored", "supervisor", h.Supervisor, "endpoint", h.Endpoint)
		return nil
	}
	if h.Mappings != d.digest {
		d.run.refused++
		key := h.Supervisor + "\x00" + h.Mappings
		if !d.refused[key] {
			d.refused[key] = true
			d.log.Error("supervisor refused: its mappings differ from the dispatcher's",
				"supervisor", h.Supervisor, "endpoint", h.Endpoint, "its_digest", h.Mappings, "our_digest", d.digest)
		}
		return nil
	}
	capacity := max(h.Capacity, 1)
	sec, trusted, err := d.memberSecurity(ctx, h, from, now)
	if !trusted || err != nil {
		return err
	}
	m := d.members[h.Supervisor]
	if m != nil && m.key != from.Key {
		return d.forged(ctx, from, h.Supervisor, "it registered under the name of another member", now)
	}
	if other := d.memberByKey(from.Key); other != nil && other != m && from.Key != "" {
		// One key, one member: the same supervisor under a new name.
		if err := d.drop(ctx, other, "renamed"); err != nil {
			return err
		}
	}
	if m != nil && (!m.started.Equal(h.Started) || m.endpoint != h.Endpoint || m.render != h.Render || m.sec.ServerKey != sec.ServerKey) {
		if err := d.drop(ctx, m, "restarted"); err != nil {
			return err
		}
		m = nil
	}
	if m != nil {
		m.lastSeen = now
		if m.capacity != capacity {
			m.capacity = capacity
			d.domains.Join(m.name, capacity) // a new weight; nothing moves
			if m.render {
				d.renderDomains.Join(m.name, capacity)
			}
			d.w.unparkMember(m)
		}
		m.maxRequest = h.MaxRequest
		if hello { // our Welcome was lost, or it has not connected yet
			m.enqueue(wire.KindWelcome, d.welcome(h))
		} else {
			m.enqueue(wire.KindRenew, wire.Renew{Seq: h.Seq, Lease: d.cfg.MemberLease})
		}
		return nil
	}
	m = &member{name: h.Supervisor, key: from.Key, endpoint: h.Endpoint, capacity: capacity, render: h.Render, started: h.Started,
		lastSeen: now, joined: now, sec: sec, maxRequest: h.MaxRequest}
	if err := m.start(d.ctx, &d.wg, d.failed); err != nil {
		d.log.Error("supervisor unreachable", "supervisor", h.Supervisor, "endpoint", h.Endpoint, "error", err)
		return nil
	}
	d.members[m.name] = m
	d.domains.Join(m.name, m.capacity)
	if m.render {
		d.renderDomains.Join(m.name, m.capacity)
	}
	d.lastJoin = now
	d.led.joined++
	if !hello {
		d.joinedByBeat = true
	}
	d.heldElsewhere(m, h.Busy, now)
	d.epoch++
	d.w.unparkAll(d.members)
	m.enqueue(wire.KindWelcome, d.welcome(h))
	d.log.Info("supervisor joined", "supervisor", m.name, "endpoint", m.endpoint, "capacity", m.capacity,
		"render", m.render, "members", len(d.members))
	if m.render {
		return d.renderPending(ctx)
	}
	return nil
}

// welcome is the Welcome that answers h, granting the member its lease.
func (d *Dispatcher) welcome(h wire.Hello) wire.Welcome {
	return wire.Welcome{Dispatcher: d.name, Run: d.runID, Seq: h.Seq, Lease: d.cfg.MemberLease, Gen: d.gen}
}

// drop removes a member and re-queues what it held.
func (d *Dispatcher) drop(ctx context.Context, m *member, reason string) error {
	m.stop()
	d.noteLeft(m, reason, time.Now())
	d.led.lost[reason]++
	delete(d.members, m.name)
	d.domains.Leave(m.name)
	d.renderDomains.Leave(m.name)
	d.epoch++
	n := 0
	fenced := d.fenceEnd(m)
	for _, t := range maps.Clone(d.w.leased) {
		if t.lease.Member == m.name {
			if err := d.requeue(ctx, t); err != nil {
				return err
			}
			// Its hosts go to another member once the member may no
			// longer be asking them anything (fenceEnd).
			d.w.hostLast[t.host] = handover{at: fenced, member: m.name}
			n++
		}
	}
	d.w.unparkMember(m)
	d.w.unparkAll(d.members)
	d.log.Info("supervisor left", "supervisor", m.name, "reason", reason, "requeued", n, "members", len(d.members))
	return nil
}

// expire re-queues tasks whose lease ran out, drops silent members and
// bounds what the window and the balancers remember.
func (d *Dispatcher) expire(ctx context.Context, now time.Time) error {
	d.w.pruneHostLast(now)
	d.w.prunePaces(now)
	if max(d.domains.Assigned(), d.renderDomains.Assigned()) > cluster.AssignedCap {
		busy := d.w.busyDomains()
		d.domains.Prune(func(dom string) bool { return busy[dom] })
		d.renderDomains.Prune(func(dom string) bool { return busy[dom] })
	}
	for _, t := range d.w.leased {
		if now.After(t.lease.Deadline) {
			d.run.expired++
			d.log.Debug("lease expired; task re-queued", "url", t.url, "host", t.host, "supervisor", t.lease.Member)
			if err := d.requeue(ctx, t); err != nil {
				return err
			}
		}
	}
	silent := 3 * d.cfg.Heartbeat
	for _, m := range maps.Clone(d.members) {
		if now.Sub(m.lastSeen) > silent {
			if err := d.drop(ctx, m, "silent"); err != nil {
				return err
			}
		}
	}
	return nil
}

// dispatch leases tasks to members, walking host queues in frontier order.
// A queue that cannot go now is parked where the blocking condition will
// release it: its host's in-flight limit, its supervisor's capacity, or
// the absence of any supervisor that can take it.
func (d *Dispatcher) dispatch(ctx context.Context, now time.Time) error {
	w := d.w
	if len(d.members) == 0 {
		return nil
	}
	w.releaseDue(now)
	for w.ready.Len() > 0 {
		q := heap.Pop(&w.ready).(*hostQueue)
		q.where = parkNone
		if len(q.tasks) == 0 {
			w.forget(q)
			continue
		}
		if w.hostInFlight[q.host] >= w.inFlightLimit(q.host, d.cfg.HostInFlight) {
			q.where = parkHost
			w.hostWait[q.host] = append(w.hostWait[q.host], q)
			continue
		}
		if at := w.notBefore(q.host, now); !at.IsZero() {
			w.parkUntil(q, at)
			continue
		}
		if q.routeEpoch != d.epoch {
			q.route, q.routeEpoch = "", d.epoch
			if m := d.route(q.domain, q.render); m != nil {
				q.route = m.name
			}
		}
		m := d.members[q.route]
		if m == nil {
			q.where = parkNobody
			w.nobody = append(w.nobody, q)
			continue
		}
		if holder, ok := w.hostHolder[q.host]; ok && holder != m.name {
			// The host changed owner (a member joined or left) while
			// tasks of it are out with the old one: wait for them.
			q.where = parkHost
			w.hostWait[q.host] = append(w.hostWait[q.host], q)
			continue
		}
		if m.inFlight >= m.capacity || len(m.out) >= cap(m.out) {
			q.where = parkMember
			m.waiting = append(m.waiting, q)
			continue
		}
		t := heap.Pop(&q.tasks).(*task)
		delete(w.queued, t.key)
		heap.Remove(&w.worst, t.widx)
		t.hq = nil
		t.lease = d.tokens.Grant(taskID(t.key), m.name, m.key, now.Add(d.cfg.Lease))
		w.leased[t.key] = t
		m.inFlight++
		w.hostInFlight[t.host]++
		w.hostHolder[t.host] = m.name
		d.queuedN--
		// The lease is not written to the state: it lives in memory, and a
		// restarted dispatcher queues every unfinished task again anyway.
		// In the state the task stays queued until its result is done; its
		// holder's answer is still known by its token (adopt).
		etag, lastMod, err := d.taskValidators(ctx, t)
		if err != nil {
			return err
		}
		wt := wire.Task{ID: taskID(t.key), Lease: t.lease.Token, URL: t.url, Host: t.host, Depth: t.depth, Render: t.render,
			ETag: etag, LastModified: lastMod, Hops: t.hops}
		if ho, ok := w.hostLast[t.host]; ok && ho.member != m.name {
			wt.HostLast = ho.at // the host moved: hand its last request over
		}
		if !m.enqueue(wire.KindTask, wt) {
			// Cannot happen (only this goroutine fills m.out, and it was
			// checked above); re-queue and end the round rather than spin.
			return d.requeue(ctx, t)
		}
		if len(q.tasks) > 0 {
			w.makeReady(q)
		} else {
			w.forget(q)
		}
	}
	return nil
}

func (d *Dispatcher) progress(start time.Time) Progress {
	return Progress{
		Records:  d.nRecords,
		Complete: d.nComplete,
		Partial:  d.nPartial,
		Queued:   d.queuedN,
		InFlight: len(d.w.leased),
		Waiting:  d.w.waitingRender(),
		Members:  len(d.members),
		Pages:    d.total(&d.run.pages),
		Elapsed:  time.Since(start),
	}
}

// summary reads the record counts and outcomes from the state, writes the
// outcomes to the store, adds the crawl's counters, and ends the Run's
// share of the totals.
func (d *Dispatcher) summary(ctx context.Context) (*Summary, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := &Summary{
		Restarts:    int(d.base.starts - 1),
		BadLines:    d.badLines,
		Pages:       d.total(&d.run.pages),
		Reused:      d.total(&d.run.reused),
		Disagreeing: d.total(&d.run.disagreeing),
		Late:        d.total(&d.run.late),
		Forged:      d.total(&d.run.forged),
		Quarantined: d.quar.List(),
		Adopted:     d.total(&d.run.adopted),
		Expired:     d.total(&d.run.expired),
		Errors:      sumMaps(d.base.errs, d.run.errs),
		BlockedBy:   sumMaps(d.base.blocked, d.run.blocked),
		FieldErrors: d.total(&d.run.fieldErrs),
		Waiting:     d.w.waitingRender(),
		Filtered:    sumMaps(d.base.filtered, d.run.filtered),
		LinkFarms:   d.total(&d.run.linkFarms),
		Duplicates:  d.total(&d.run.duplicates),
		BadTopSites: d.badTopSites,
		Elapsed:     d.elapsed(),

		Retried:        maps.Clone(d.retried),
		RetryKept:      d.retryKept,
		RetryExhausted: d.retryExhausted,

		RenderRetried: d.total(&d.run.renderRetried),
		RenderWanted:  d.base.n["render_wanted"] + d.renderWantedTotal(),

		Recrawled:   d.total(&d.run.recrawled),
		NotModified: d.total(&d.run.notModified),
		Refreshed:   d.total(&d.run.refreshed),
		Changed:     d.total(&d.run.changed),
		Unconfirmed: d.total(&d.run.unconfirmed),
		DNS:         d.dnsTotal(),
		Politeness:  d.politeness(),
	}
	s.RefusedBy = map[string]int64{}
	for why, n := range map[string]int64{"match-key": d.total(&d.run.keyRefused), "registration": d.total(&d.run.refused), "handshake": d.recv.Refused()} {
		if n > 0 {
			s.RefusedBy[why] = n
			s.Refused += n
		}
	}
	s.ElapsedSeconds = s.Elapsed.Seconds()
	if s.Elapsed > 0 {
		s.PagesPerSec = float64(s.Pages) / s.Elapsed.Seconds()
	}
	d.foldTotals()
	if d.closed {
		return s, nil
	}
	if err := d.saveTotals(ctx); err != nil {
		return s, err
	}
	err := d.st.conn.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(complete), 0), COALESCE(SUM(skipped), 0),
		COALESCE(SUM(complete = 0 AND nfilled > 0), 0), COALESCE(SUM(complete = 0 AND nfilled = 0), 0) FROM records`).
		Scan(&s.Records, &s.Complete, &s.Skipped, &s.Partial, &s.Untouched)
	if err != nil {
		return s, fmt.Errorf("dispatcher: summary: %w", err)
	}
	if s.Reasons, err = d.outcomes(ctx, true); err != nil {
		return s, err
	}
	s.UntouchedIDs, err = column[string](d.st.conn.QueryContext(ctx, `SELECT id FROM records WHERE complete = 0 AND nfilled = 0 ORDER BY seq LIMIT 50`))
	return s, err
}

// onlyUnrenderableLeft reports that the work left is render tasks no
// member can take and none ever will: every supervisor the crawl expects
// has joined and none renders. (Without Expect, a render node may still
// join, and the tasks wait for it.) They are counted in Summary.Waiting.
// Callers hold mu.
func (d *Dispatcher) onlyUnrenderableLeft() bool {
	if d.cfg.Expect == 0 || len(d.members) < d.cfg.Expect || len(d.w.leased) > 0 || d.w.spilled || d.unseeded() {
		return false
	}
	for _, m := range d.members {
		if m.render {
			return false
		}
	}
	return len(d.w.queued) > 0 && len(d.w.queued) == d.w.waitingRender()
}
