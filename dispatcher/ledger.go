package dispatcher

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"backfill/seconds"
	"backfill/wire"
)

// HistoryFile is the name, inside Config.StateDir, of the crawl's history:
// the timeline of its progress and the tallies the run report draws
// (`backfill report`, ReadHistory). It spans every Run on the state
// directory, so a resumed crawl's report covers the whole crawl.
const HistoryFile = "history.json"

// Bounds of the ledger: everything it keeps is bounded whatever the
// size of the crawl.
const (
	// maxSamples bounds the timeline. It starts with a sample every
	// sampleFirst; when full, every other sample is dropped and the
	// interval doubles, so it always spans the whole crawl: a minute's
	// crawl at a second's resolution, a week's at about fourteen minutes.
	maxSamples  = 720
	sampleFirst = time.Second
	// historyEvery is how often a running crawl rewrites the history file.
	historyEvery = 10 * time.Second
	// maxRecent is how many of the latest failures the status keeps.
	maxRecent = 50
	// maxFailingHosts bounds the failures-per-host tally; past it, the
	// half with the fewest failures is dropped.
	maxFailingHosts = 1000
	// maxPaces bounds the per-host request paces the supervisors report
	// (one entry per host and supervisor incarnation); past it, the half
	// with the fewest requests is dropped.
	maxPaces = 2000
	// maxIncarnations bounds the supervisor processes whose robots.txt
	// counts are kept apart; older ones are folded into one sum.
	maxIncarnations = 256
	// statusHosts is how many of the slowest hosts and of the hosts in
	// back-off the status shows.
	statusHosts = 10
)

// Sample is one point of the crawl's timeline. Pages and Failed count
// from the start of the crawl, across restarts.
type Sample struct {
	At       time.Time `json:"at"`
	Records  int       `json:"records"`
	Complete int       `json:"complete"`
	Partial  int       `json:"partial"`
	Pages    int64     `json:"pages"`
	Failed   int64     `json:"failed"`
	Queued   int       `json:"queued"`
	InFlight int       `json:"in_flight"`
	Members  int       `json:"members"`
}

// ErrorNote is one failed task, for the status's recent errors.
type ErrorNote struct {
	At         time.Time `json:"at"`
	URL        string    `json:"url"`
	Host       string    `json:"host"`
	Class      string    `json:"class"`
	Status     int       `json:"status,omitempty"`
	Error      string    `json:"error,omitempty"`
	Supervisor string    `json:"supervisor"`
}

// HostCount is a host and how often something happened to it.
type HostCount struct {
	Host  string `json:"host"`
	Count int64  `json:"count"`
}

// HostPace is a supervisor's account of its requests to one host (see
// wire.HostPace), with the supervisor incarnation that gave it.
type HostPace struct {
	wire.HostPace
	By string `json:"by"` // supervisor name and start time
}

// UnmarshalJSON reads the pace (wire.HostPace.UnmarshalJSON, which would
// otherwise stand for this type's and drop By) and By.
func (p *HostPace) UnmarshalJSON(b []byte) error {
	if err := p.HostPace.UnmarshalJSON(b); err != nil {
		return err
	}
	var by struct {
		By string `json:"by"`
	}
	if err := json.Unmarshal(b, &by); err != nil {
		return err
	}
	p.By = by.By
	return nil
}

// History is what HistoryFile holds.
type History struct {
	Updated time.Time `json:"updated"`
	// Step is the timeline's current interval between samples, written
	// as step_seconds (see MarshalJSON).
	Step     time.Duration `json:"-"`
	Timeline []Sample      `json:"timeline"`
	// Failures counts the crawl's failed tasks by class (the dispatcher's
	// totals, across restarts).
	Failures map[string]int64 `json:"failures,omitempty"`
	// FailingHosts are the hosts with the most failed tasks, most first.
	FailingHosts []HostCount `json:"failing_hosts,omitempty"`
	// Robots counts the robots.txt requests by outcome (the supervisor
	// package's Robots* values): Incarnations holds each supervisor
	// process's latest count, RobotsBase the sum of those folded away.
	Robots       map[string]int64            `json:"robots,omitempty"`
	RobotsBase   map[string]int64            `json:"robots_base,omitempty"`
	Incarnations map[string]map[string]int64 `json:"incarnations,omitempty"`
	// Paces are the supervisors' accounts of their requests per host,
	// busiest first.
	Paces []HostPace `json:"paces,omitempty"`
}

// ledger is what the dispatcher keeps for operators beyond its own
// counters: the timeline, the latest failures, failures per host, the
// supervisors' robots.txt outcomes and request paces, and members joined
// and lost. Guarded by Dispatcher.mu.
type ledger struct {
	joined int64
	lost   map[string]int64 // by reason
	filled map[string]int64 // record fields that got their first value, by field name (bounded by the mappings)

	recent []ErrorNote // ring of the latest maxRecent
	next   int

	failing map[string]int64 // failed tasks per host, bounded by maxFailingHosts

	h        History
	lastSave time.Time
	saveWarn bool
}

func newLedger() *ledger {
	return &ledger{lost: map[string]int64{}, filled: map[string]int64{}, failing: map[string]int64{},
		h: History{Step: sampleFirst, Failures: map[string]int64{}, Robots: map[string]int64{},
			RobotsBase: map[string]int64{}, Incarnations: map[string]map[string]int64{}}}
}

// loadLedger reads the history of earlier runs from dir, if any. A
// history that cannot be read is reported and started afresh: it is for
// operators, and the crawl does not depend on it.
func loadLedger(dir string) (*ledger, error) {
	l := newLedger()
	h, err := ReadHistory(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return l, err
	}
	if h.Step >= sampleFirst {
		l.h.Step = h.Step
	}
	l.h.Timeline = h.Timeline
	for _, hc := range h.FailingHosts {
		l.failing[hc.Host] = hc.Count
	}
	maps.Copy(l.h.RobotsBase, h.RobotsBase)
	for k, v := range h.Incarnations {
		l.h.Incarnations[k] = v
	}
	l.h.Paces = h.Paces
	l.sumRobots()
	return l, nil
}

// failed notes a failed task: in the recent errors and the host tally.
func (l *ledger) failed(n ErrorNote) {
	if len(l.recent) < maxRecent {
		l.recent = append(l.recent, n)
	} else {
		l.recent[l.next] = n
	}
	l.next = (l.next + 1) % maxRecent
	if _, ok := l.failing[n.Host]; !ok && len(l.failing) >= maxFailingHosts {
		top := l.failingHosts()
		clear(l.failing)
		for _, hc := range top[:maxFailingHosts/2] {
			l.failing[hc.Host] = hc.Count
		}
	}
	l.failing[n.Host]++
}

// failingHosts lists the failure tally, most failures first.
func (l *ledger) failingHosts() []HostCount {
	out := make([]HostCount, 0, len(l.failing))
	for h, n := range l.failing {
		out = append(out, HostCount{Host: h, Count: n})
	}
	slices.SortFunc(out, func(a, b HostCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Host, b.Host))
	})
	return out
}

// recentErrors returns the latest failures, newest first.
func (l *ledger) recentErrors() []ErrorNote {
	out := make([]ErrorNote, 0, len(l.recent))
	for i := range len(l.recent) {
		j := (l.next - 1 - i + 2*maxRecent) % maxRecent
		if j < len(l.recent) {
			out = append(out, l.recent[j])
		}
	}
	return out
}

// heartbeat takes a supervisor's robots.txt counts and request paces.
func (l *ledger) heartbeat(h *wire.Heartbeat) {
	inc := h.Supervisor + "@" + h.Started.UTC().Format(time.RFC3339Nano)
	if len(h.Robots) > 0 {
		if _, ok := l.h.Incarnations[inc]; !ok && len(l.h.Incarnations) >= maxIncarnations {
			// Fold an arbitrary old one away: its counts stay in the sum.
			for k, v := range l.h.Incarnations {
				for o, n := range v {
					l.h.RobotsBase[o] += n
				}
				delete(l.h.Incarnations, k)
				break
			}
		}
		l.h.Incarnations[inc] = maps.Clone(h.Robots)
		l.sumRobots()
	}
	if len(h.Hosts) == 0 {
		return
	}
	at := make(map[string]int, len(l.h.Paces))
	for i, p := range l.h.Paces {
		at[p.Host+"\x00"+p.By] = i
	}
	for _, hp := range h.Hosts {
		if i, ok := at[hp.Host+"\x00"+inc]; ok {
			l.h.Paces[i].HostPace = hp
			continue
		}
		l.h.Paces = append(l.h.Paces, HostPace{HostPace: hp, By: inc})
	}
	if len(l.h.Paces) > maxPaces {
		l.sortPaces()
		l.h.Paces = l.h.Paces[:maxPaces/2]
	}
}

func (l *ledger) sortPaces() {
	slices.SortFunc(l.h.Paces, func(a, b HostPace) int {
		return cmp.Or(cmp.Compare(b.Requests, a.Requests), cmp.Compare(a.Host, b.Host), cmp.Compare(a.By, b.By))
	})
}

func (l *ledger) sumRobots() {
	clear(l.h.Robots)
	maps.Copy(l.h.Robots, l.h.RobotsBase)
	for _, v := range l.h.Incarnations {
		for o, n := range v {
			l.h.Robots[o] += n
		}
	}
}

// sample adds s to the timeline if the interval since the last sample
// has passed, thinning the timeline when it is full. A forced sample (the
// end of a Run) is always kept: it replaces the last one when that is
// less than half an interval old, so no interval is so short that a
// rate drawn from it means nothing.
func (l *ledger) sample(s Sample, force bool) {
	tl := l.h.Timeline
	if n := len(tl); n > 0 && s.At.Sub(tl[n-1].At) < l.h.Step {
		if !force {
			return
		}
		if n > 1 && s.At.Sub(tl[n-1].At) < l.h.Step/2 {
			tl[n-1] = s
			return
		}
	}
	if len(tl) >= maxSamples {
		kept := tl[:0]
		for i := range tl {
			if i%2 == 1 || i == len(tl)-1 {
				kept = append(kept, tl[i])
			}
		}
		tl = kept
		l.h.Step *= 2
	}
	l.h.Timeline = append(tl, s)
}

// snapshot is a copy of the history, sorted, with the crawl's failures
// by class, for writing.
func (l *ledger) snapshot(now time.Time, failures map[string]int64) History {
	l.sortPaces()
	h := History{
		Updated:      now,
		Step:         l.h.Step,
		Timeline:     slices.Clone(l.h.Timeline),
		FailingHosts: l.failingHosts(),
		Robots:       maps.Clone(l.h.Robots),
		RobotsBase:   maps.Clone(l.h.RobotsBase),
		Incarnations: make(map[string]map[string]int64, len(l.h.Incarnations)),
		Paces:        slices.Clone(l.h.Paces),
	}
	h.Failures = maps.Clone(failures)
	for k, v := range l.h.Incarnations {
		h.Incarnations[k] = maps.Clone(v)
	}
	return h
}

// MarshalJSON writes the history with Step as step_seconds, a number of
// seconds, as every duration a machine reads (package seconds).
func (h History) MarshalJSON() ([]byte, error) {
	type fields History
	return json.Marshal(struct {
		fields
		StepSeconds float64 `json:"step_seconds"`
	}{fields(h), seconds.Of(h.Step)})
}

// UnmarshalJSON reads what MarshalJSON writes, and the nanoseconds under
// "step_ns" of a history written by an earlier build.
func (h *History) UnmarshalJSON(b []byte) error {
	type fields History
	v := struct {
		*fields
		StepSeconds *float64 `json:"step_seconds"`
		StepNanos   *int64   `json:"step_ns"`
	}{fields: (*fields)(h)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch {
	case v.StepSeconds != nil:
		h.Step = time.Duration(math.Round(*v.StepSeconds * float64(time.Second)))
	case v.StepNanos != nil:
		h.Step = time.Duration(*v.StepNanos)
	}
	return nil
}

// ReadHistory reads the history of the crawl whose state is in dir.
func ReadHistory(dir string) (History, error) {
	var h History
	return h, readJSONFile(dir, HistoryFile, "history", &h)
}

// readJSONFile reads dir/name into v; errors say what (the status, the
// history) could not be read.
func readJSONFile(dir, name, what string, v any) error {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("read %s %s: %w", what, path, err)
	}
	return nil
}

// writeJSONFile replaces dir/name with v as indented JSON in one rename,
// so a reader never sees half of it.
func writeJSONFile(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(append(b, '\n'))
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// sampleOf is the timeline's point for status s (whose counters are the
// crawl's, across restarts).
func sampleOf(s Status) Sample {
	var failed int64
	for _, n := range s.Errors {
		failed += n
	}
	return Sample{At: s.Updated, Records: s.Records, Complete: s.Complete, Partial: s.Partial,
		Pages: s.Pages, Failed: failed, Queued: s.Queued, InFlight: s.InFlight, Members: len(s.Members)}
}

// putHistory writes the history file; a failure is logged once and
// otherwise ignored, as the crawl does not depend on it. Only Run calls
// it, outside mu.
func (d *Dispatcher) putHistory(h History) {
	if err := writeJSONFile(d.cfg.StateDir, HistoryFile, h); err != nil && !d.led.saveWarn {
		d.led.saveWarn = true
		d.log.Warn("history file not written", "error", err)
	}
}
