package dispatcher

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"backfill/wire"
)

// TestLedgerTimeline: the timeline takes a sample per interval, stays
// within maxSamples by dropping every other sample and doubling the
// interval, and always spans the whole crawl.
func TestLedgerTimeline(t *testing.T) {
	l := newLedger()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 10 * maxSamples {
		l.sample(Sample{At: t0.Add(time.Duration(i) * sampleFirst), Pages: int64(i)}, false)
	}
	tl := l.h.Timeline
	if len(tl) > maxSamples || len(tl) < maxSamples/2 {
		t.Fatalf("timeline of %d samples, want at most %d and at least half", len(tl), maxSamples)
	}
	if !tl[0].At.Equal(t0.Add(sampleFirst)) && !tl[0].At.Equal(t0) && tl[0].At.Sub(t0) > l.h.Step {
		t.Errorf("timeline starts at %v, %v after the crawl began (step %v)", tl[0].At, tl[0].At.Sub(t0), l.h.Step)
	}
	last := t0.Add(time.Duration(10*maxSamples-1) * sampleFirst)
	if got := tl[len(tl)-1].At; last.Sub(got) > l.h.Step {
		t.Errorf("timeline ends at %v, the crawl at %v (step %v)", got, last, l.h.Step)
	}
	if l.h.Step <= sampleFirst {
		t.Errorf("step %v did not grow", l.h.Step)
	}
	for i := 1; i < len(tl); i++ {
		if !tl[i].At.After(tl[i-1].At) || tl[i].Pages < tl[i-1].Pages {
			t.Fatalf("timeline out of order at %d: %+v then %+v", i, tl[i-1], tl[i])
		}
	}
	// A forced sample (the end of a Run) is taken whatever the interval,
	// in place of a last sample too close before it.
	n := len(l.h.Timeline)
	end := tl[n-1].At.Add(time.Millisecond)
	l.sample(Sample{At: end, Pages: 1 << 40}, true)
	if len(l.h.Timeline) != n || !l.h.Timeline[n-1].At.Equal(end) {
		t.Errorf("forced sample just after the last: %d samples (was %d), last at %v", len(l.h.Timeline), n, l.h.Timeline[len(l.h.Timeline)-1].At)
	}
	l.sample(Sample{At: end.Add(l.h.Step * 3 / 4), Pages: 1 << 41}, true)
	if len(l.h.Timeline) != n+1 {
		t.Errorf("forced sample three quarters of an interval on not added")
	}
}

// TestLedgerBounds: failing hosts, recent errors, paces and supervisor
// incarnations stay bounded, keeping the heaviest.
func TestLedgerBounds(t *testing.T) {
	l := newLedger()
	for i := range 3 * maxFailingHosts {
		host := fmt.Sprintf("h%d.example", i)
		n := 1
		if i%100 == 0 {
			n = 50 // the hosts that fail most
		}
		for range n {
			l.failed(ErrorNote{Host: host, URL: "http://" + host + "/", Class: "timeout"})
		}
	}
	if len(l.failing) > maxFailingHosts {
		t.Errorf("failing hosts %d, bound %d", len(l.failing), maxFailingHosts)
	}
	top := l.failingHosts()
	if top[0].Count != 50 {
		t.Errorf("top failing host %+v, want one with 50 failures", top[0])
	}
	if r := l.recentErrors(); len(r) != maxRecent || r[0].Host != fmt.Sprintf("h%d.example", 3*maxFailingHosts-1) {
		t.Errorf("recent errors: %d, newest %+v", len(r), r[0])
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 2*maxIncarnations + 5 {
		hb := &wire.Heartbeat{Hello: wire.Hello{Supervisor: fmt.Sprintf("s%d", i), Started: at},
			Robots: map[string]int64{"rules": 2}}
		for j := range 20 {
			hb.Hosts = append(hb.Hosts, wire.HostPace{Host: fmt.Sprintf("p%d-%d.example", i, j), Requests: int64(j + 1)})
		}
		l.heartbeat(hb)
		l.heartbeat(hb) // a repeat replaces, never adds
	}
	if len(l.h.Incarnations) > maxIncarnations || len(l.h.Paces) > maxPaces {
		t.Errorf("incarnations %d (bound %d), paces %d (bound %d)", len(l.h.Incarnations), maxIncarnations, len(l.h.Paces), maxPaces)
	}
	if want := int64(2 * (2*maxIncarnations + 5)); l.h.Robots["rules"] != want {
		t.Errorf("robots rules %d, want %d: folded incarnations must stay in the sum", l.h.Robots["rules"], want)
	}
}

// TestLedgerResume: a new ledger on the history of an earlier process of
// the crawl goes on from its timeline and tallies.
func TestLedgerResume(t *testing.T) {
	dir := t.TempDir()
	l := newLedger()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.sample(Sample{At: at, Pages: 40, Complete: 3}, true)
	l.failed(ErrorNote{Host: "a.example", Class: "dns"})
	l.heartbeat(&wire.Heartbeat{Hello: wire.Hello{Supervisor: "s1", Started: at}, Robots: map[string]int64{"missing": 4}})
	if err := writeJSONFile(dir, HistoryFile, l.snapshot(at, map[string]int64{"dns": 1})); err != nil {
		t.Fatal(err)
	}
	r, err := loadLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.h.Timeline) != 1 || r.h.Timeline[0].Pages != 40 || r.failing["a.example"] != 1 || r.h.Robots["missing"] != 4 {
		t.Errorf("resumed ledger: timeline %v, failing %v, robots %v", r.h.Timeline, r.failing, r.h.Robots)
	}
	// The same supervisor process reporting again is not counted twice.
	r.heartbeat(&wire.Heartbeat{Hello: wire.Hello{Supervisor: "s1", Started: at}, Robots: map[string]int64{"missing": 5}})
	if r.h.Robots["missing"] != 5 {
		t.Errorf("robots after the same process reported again: %v, want missing=5", r.h.Robots)
	}
}

// TestHistoryStepSeconds: history.json holds the timeline's step as
// step_seconds, and a file of an earlier build (step_ns) still reads.
func TestHistoryStepSeconds(t *testing.T) {
	h := History{Step: 1500 * time.Millisecond, Timeline: []Sample{{Records: 1}}}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"step_seconds":1.5`) || strings.Contains(string(b), "step_ns") {
		t.Errorf("history written as %s, want step_seconds 1.5", b)
	}
	for _, in := range []string{string(b), `{"step_ns":1500000000,"timeline":[{"records":1}]}`} {
		var got History
		if err := json.Unmarshal([]byte(in), &got); err != nil || got.Step != h.Step || len(got.Timeline) != 1 || got.Timeline[0].Records != 1 {
			t.Errorf("%s read as %+v, %v", in, got, err)
		}
	}
}

// TestHistoryPaceKeepsBy: a pace in history.json reads back whole, the
// supervisor that reported it included, in this build's names and in
// those of an earlier one.
func TestHistoryPaceKeepsBy(t *testing.T) {
	for _, in := range []string{
		`{"paces":[{"host":"a.test","requests":2,"min_gap_seconds":2,"gap_delay_seconds":1,"by":"s1@1"}]}`,
		`{"paces":[{"host":"a.test","requests":2,"min_gap_s":2,"gap_delay_s":1,"by":"s1@1"}]}`,
	} {
		var h History
		if err := json.Unmarshal([]byte(in), &h); err != nil {
			t.Fatal(err)
		}
		if len(h.Paces) != 1 || h.Paces[0].By != "s1@1" || h.Paces[0].MinGap != 2 || h.Paces[0].GapDelay != 1 || h.Paces[0].Host != "a.test" {
			t.Errorf("%s read as %+v", in, h.Paces)
		}
	}
}
