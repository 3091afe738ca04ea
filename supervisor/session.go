package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"backfill/backoff"
	"backfill/fetch"
	"backfill/wire"
)

// The supervisor's session with its dispatcher: what it says of itself
// (Hello, Heartbeat), the schedule it says it on (talk, register), the
// task socket it listens on (receive), and the frames it sends (send,
// sendResult). See "Talking to the dispatcher" in the package doc.

// hello is what the supervisor says about itself in Hello and Heartbeat.
func (s *Supervisor) hello() wire.Hello {
	return wire.Hello{
		Supervisor: s.cfg.Name,
		Endpoint:   s.advert,
		Capacity:   s.cfg.Capacity,
		Render:     s.render != nil,
		Mappings:   s.digest,
		Started:    s.started,
		Key:        s.cfg.Keys.Public,
		Survey:     s.cfg.Prober != nil,
		MaxRequest: s.maxRequest(),
		Busy:       s.inFlight.hosts(),
		// A Config's NoDelay is 0 here (see New).
		DefaultDelay: max(s.cfg.DefaultDelay, 0),
		Workers:      s.cfg.Workers,
	}
}

// maxRequest is the longest one request may take here: the fetcher's
// deadline.
func (s *Supervisor) maxRequest() time.Duration {
	if s.cfg.Fetch.Timeout > 0 {
		return s.cfg.Fetch.Timeout
	}
	return fetch.DefaultTimeout
}

// receive owns the task socket: it reads Welcomes, Tasks and Byes until
// ctx is done. A socket that fails is fatal: Run stops with its error. A
// Bye ends it with errDone under Config.ExitWhenDone; otherwise talk goes
// back to waiting for a dispatcher.
func (s *Supervisor) receive(ctx context.Context) error {
	for ctx.Err() == nil {
		kind, v, err := s.in.Recv(recvPoll)
		switch {
		case errors.Is(err, wire.ErrTimeout):
			continue
		case errors.Is(err, wire.ErrBadFrame):
			s.log.Warn("bad frame on task socket dropped", "error", err)
			continue
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("supervisor %s: task socket: %w", s.cfg.Name, err)
		}
		switch kind {
		case wire.KindWelcome:
			w := v.(*wire.Welcome)
			if w.Member != "" && w.Member != s.cfg.Name {
				// A secured dispatcher knows a member by its key's name.
				s.log.Info("registered with dispatcher", "dispatcher", w.Dispatcher, "run", w.Run, "as", w.Member)
			} else {
				s.log.Info("registered with dispatcher", "dispatcher", w.Dispatcher, "run", w.Run)
			}
			s.newDispatcher(w.Gen)
			s.renewed(w.Seq, w.Lease)
			s.markRegistered()
			s.resendAnswers(ctx)
		case wire.KindRenew:
			r := v.(*wire.Renew)
			s.renewed(r.Seq, r.Lease)
		case wire.KindTask:
			s.markRegistered()
			s.accept(ctx, v.(*wire.Task))
		case wire.KindSurveyTask:
			s.markRegistered()
			s.acceptSurvey(ctx, v.(*wire.SurveyTask))
		case wire.KindBye:
			b := v.(*wire.Bye)
			if s.cfg.ExitWhenDone {
				s.log.Info("the dispatcher's run is finished; exiting", "dispatcher", b.Dispatcher, "run", b.Run)
				return errDone
			}
			s.log.Info("the dispatcher's run is finished; waiting for its next run", "dispatcher", b.Dispatcher, "run", b.Run)
			s.registered.Store(false)
			// No host is held until the next run: nothing to fence.
			s.fence.grant(0, 0)
			// Task IDs are stable within a run only: the next run's
			// tasks ask afresh.
			s.answers.clear()
			select {
			case s.bye <- struct{}{}:
			default:
			}
		default:
			s.log.Warn("unexpected message on task socket dropped", "kind", kind.String())
		}
	}
	return nil
}

// markRegistered notes that the dispatcher knows us: a Welcome, or a Task
// (a dispatcher only sends tasks to members).
func (s *Supervisor) markRegistered() {
	s.registered.Store(true)
	select {
	case s.welcome <- struct{}{}:
	default:
	}
}

// talk owns the outgoing side's schedule: Hello with back-off until the
// dispatcher answers, then a Heartbeat every interval. Workers send Results
// on the same Sender themselves (it is safe for concurrent use).
func (s *Supervisor) talk(ctx context.Context) {
	if !s.register(ctx, false) {
		return
	}
	tick := time.NewTicker(s.cfg.Heartbeat)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.bye:
			// Its run is over: no heartbeats to a dispatcher that is
			// gone, only a quiet Hello now and then for the next one.
			if !s.register(ctx, true) {
				return
			}
			failing = false
			continue
		case <-tick.C:
		}
		err := s.send(ctx, wire.KindHeartbeat, s.heartbeat(), s.cfg.Heartbeat)
		s.fenceCheck(time.Now())
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			failing = true
			s.log.Warn("dispatcher not taking heartbeats; still trying", "dispatcher", s.cfg.Dispatcher, "error", err)
		case err == nil && failing:
			failing = false
			s.log.Info("dispatcher taking heartbeats again", "dispatcher", s.cfg.Dispatcher)
		}
	}
}

// register sends Hello until a Welcome arrives, backing off from 200ms,
// doubling, up to HelloMax, with jitter (so supervisors that started
// together do not call together). It reports false when ctx ended first.
// It says so when the dispatcher does not answer: at once, with a hint at
// the keys after the first few attempts, and then only now and then, or
// never when quiet (waiting for a dispatcher's next run).
func (s *Supervisor) register(ctx context.Context, quiet bool) bool {
	pause := backoff.New(min(helloStart, s.cfg.HelloMax), s.cfg.HelloMax)
	answer := min(helloAnswer, s.cfg.HelloMax)
	for attempt := 1; ; attempt++ {
		h := s.hello()
		h.Seq = s.fence.sending(time.Now())
		err := s.send(ctx, wire.KindHello, h, answer)
		if ctx.Err() != nil {
			return false
		}
		if err == nil && s.awaitWelcome(ctx, answer) {
			return true
		}
		if s.registered.Load() {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		wait := pause.Next()
		s.noAnswer(attempt, quiet, wait, err)
		if s.awaitWelcome(ctx, wait) {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
	}
}

// hintAfter is the attempt after which a supervisor that gets no answer
// says what to check; noAnswerEvery is how often it says so again.
const (
	hintAfter     = 3
	noAnswerEvery = 20
)

// noAnswer reports a Hello left unanswered. A CURVE handshake the
// dispatcher refuses looks exactly like a dispatcher that is not there,
// so with keys the hint names both.
func (s *Supervisor) noAnswer(attempt int, quiet bool, wait time.Duration, err error) {
	wait = wait.Round(time.Millisecond)
	args := []any{"dispatcher", s.cfg.Dispatcher, "retry_in", wait, "attempts", attempt}
	if err != nil {
		args = append(args, "error", err)
	}
	switch {
	case quiet:
		s.log.Debug("waiting for the dispatcher's next run", args...)
	case attempt == hintAfter && !s.cfg.Keys.IsZero():
		args = append(args, "our_key", s.cfg.Keys.Public, "dispatcher_key", s.cfg.DispatcherKey)
		s.log.Warn(fmt.Sprintf("no answer from %s: check the dispatcher's public key and that ours is authorised", s.cfg.Dispatcher), args...)
	case attempt == hintAfter:
		s.log.Warn(fmt.Sprintf("no answer from %s: check that the dispatcher runs there and that this host can reach it", s.cfg.Dispatcher), args...)
	case attempt == 1 || attempt%noAnswerEvery == 0:
		s.log.Warn(fmt.Sprintf("dispatcher not answering at %s; retrying in %v", s.cfg.Dispatcher, wait), args...)
	default:
		s.log.Debug("dispatcher not answering", args...)
	}
}

// awaitWelcome waits up to d for a Welcome.
func (s *Supervisor) awaitWelcome(ctx context.Context, d time.Duration) bool {
	if s.registered.Load() {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.welcome:
		return true
	case <-t.C:
		return s.registered.Load()
	case <-ctx.Done():
		return false
	}
}

func (s *Supervisor) heartbeat() wire.Heartbeat {
	held, _ := s.sched.counts()
	hb := wire.Heartbeat{
		Hello:    s.hello(),
		InFlight: held,
		Fetched:  s.fetched.Load(),
		Failed:   s.failedTotal(),
		RSS:      rss(),
		At:       time.Now().UTC(),
		Surveys:  s.surveyHeld.list(),
		DNS:      s.dnsStats(),

		HostInFlight: s.inFlight.max(),
		Repeated:     s.repeated(),
		Retried:      s.unansweredRetries.Load(),
	}
	hb.Seq = s.fence.sending(time.Now())
	if s.render != nil {
		rs := s.render.Stats()
		hb.RenderRSS = renderMemory(rs)
		hb.Rendered = rs.Rendered
	}
	for i, name := range robotsOutcomes {
		if n := s.meter.robots[i].Load(); n > 0 {
			if hb.Robots == nil {
				hb.Robots = make(map[string]int64, len(robotsOutcomes))
			}
			hb.Robots[name] = n
		}
	}
	hb.Hosts = s.paces.report()
	hb.Backoff = s.health.backoffs(time.Now(), reportBackoff)
	return hb
}

// renderMemory is what a heartbeat reports of the browser's memory: the
// proportional set size of its process tree (its real cost), else the
// resident set size where the kernel has no PSS.
func renderMemory(st RenderStats) uint64 {
	if st.PSS > 0 {
		return st.PSS
	}
	return st.RSS
}

// send tries to queue one message for up to total, in short attempts so a
// shutdown is noticed quickly and other senders get their turn on the
// shared Sender.
func (s *Supervisor) send(ctx context.Context, kind wire.Kind, v any, total time.Duration) error {
	deadline := time.Now().Add(total)
	for {
		slice := min(sendSlice, time.Until(deadline))
		if slice <= 0 {
			slice = time.Millisecond
		}
		err := s.out.Send(kind, v, slice)
		if err == nil || !errors.Is(err, wire.ErrTimeout) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !time.Now().Before(deadline) {
			return err
		}
	}
}

// sendResult sends one Result; one that cannot be sent is counted and
// left to the lease.
func (s *Supervisor) sendResult(ctx context.Context, r *wire.Result) {
	err := s.send(ctx, wire.KindResult, r, resultTimeout)
	if err == nil {
		return
	}
	if ctx.Err() != nil {
		return // shutting down: the lease covers it
	}
	// While the dispatcher is away every result fails alike: say it the
	// first time and every hundredth after.
	if n := s.unsent.Add(1); n == 1 || n%100 == 0 {
		s.log.Warn("result not sent; its lease will re-send the task", "task", r.TaskID, "url", r.URL, "class", r.Class, "error", err, "unsent", n)
	}
}
