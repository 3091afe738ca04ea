package supervisor

import (
	"context"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"backfill/wire"
)

// Prober runs host-survey tasks (wire.SurveyTask): package survey
// provides one, and the command gives it to every supervisor, so the
// machines of a crawl can also survey. Probe probes the task's one
// address and returns what it found; it is called from several
// goroutines at once, one per task held, and keeps the survey's
// politeness itself (one connection at a time per address, the delay, the
// rate and the per-/24 cap of the task's Spec). It returns when ctx is
// done, with what it has.
type Prober interface {
	Probe(ctx context.Context, t *wire.SurveyTask) wire.SurveyResult
}

// acceptSurvey runs a survey task on its own goroutine, at most Capacity
// at once (the survey's dispatcher sends no more); a task beyond that is
// dropped and its lease brings it back. A task this supervisor already
// holds (sent again because its lease ran out, or because the dispatcher
// took this supervisor for gone) is not run again: the run in progress
// answers it. A supervisor without a Prober answers at once that it does
// not survey.
func (s *Supervisor) acceptSurvey(ctx context.Context, t *wire.SurveyTask) {
	if s.cfg.Prober == nil {
		s.sendSurvey(ctx, &wire.SurveyResult{TaskID: t.ID, Lease: t.Lease, IP: t.IP,
			Error: "this supervisor does not run surveys", At: time.Now().UTC()})
		return
	}
	if !s.surveyHeld.add(t.ID) {
		s.log.Debug("survey task sent again while held; the run in progress answers it", "task", t.ID, "ip", t.IP)
		return
	}
	select {
	case s.surveySlots <- struct{}{}:
	default:
		s.surveyHeld.remove(t.ID)
		if n := s.dropped.Add(1); n == 1 || n%100 == 0 {
			s.log.Warn("survey task dropped: at capacity (its lease will bring it back)", "task", t.ID, "ip", t.IP, "dropped", n)
		}
		return
	}
	s.surveys.Go(func() {
		// Held until its answer is sent: a copy arriving before the
		// dispatcher has the answer is not probed again.
		defer s.surveyHeld.remove(t.ID)
		r := s.probe(ctx, t)
		// The slot is free before the answer goes: the dispatcher sends
		// the next task as soon as the answer arrives, and a slot still
		// held then would drop that task until its lease expired.
		<-s.surveySlots
		if ctx.Err() != nil {
			return // shutting down: the lease brings the task back
		}
		s.surveyed.Add(1)
		s.sendSurvey(ctx, &r)
	})
}

// heldSurveys is the survey tasks a supervisor holds, by ID; its
// heartbeats list them so the survey's dispatcher renews their leases.
type heldSurveys struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

// add holds id; it reports false when id was held already.
func (h *heldSurveys) add(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.ids[id]; ok {
		return false
	}
	if h.ids == nil {
		h.ids = make(map[string]struct{})
	}
	h.ids[id] = struct{}{}
	return true
}

func (h *heldSurveys) remove(id string) {
	h.mu.Lock()
	delete(h.ids, id)
	h.mu.Unlock()
}

// list returns the IDs held, sorted; nil when none.
func (h *heldSurveys) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ids) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(h.ids))
}

// probe runs the Prober, turning a panic into a result that says so.
func (s *Supervisor) probe(ctx context.Context, t *wire.SurveyTask) (r wire.SurveyResult) {
	defer func() {
		if v := recover(); v != nil {
			s.countFailed("panic")
			s.log.Error("panic while probing recovered", "task", t.ID, "ip", t.IP, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			r = wire.SurveyResult{TaskID: t.ID, Lease: t.Lease, IP: t.IP, Error: fmt.Sprintf("panic: %v", v), At: time.Now().UTC()}
		}
	}()
	return s.cfg.Prober.Probe(ctx, t)
}

func (s *Supervisor) sendSurvey(ctx context.Context, r *wire.SurveyResult) {
	r.Supervisor = s.cfg.Name
	if err := s.send(ctx, wire.KindSurveyResult, r, resultTimeout); err != nil && ctx.Err() == nil {
		if n := s.unsent.Add(1); n == 1 || n%100 == 0 {
			s.log.Warn("survey result not sent; its lease will re-send the task", "task", r.TaskID, "ip", r.IP, "error", err, "unsent", n)
		}
	}
}
