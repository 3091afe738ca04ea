package linkscore

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestModelUninformed: before any observation every head says 1/2, so
// a link that may pay both ways is worth 3/4, and nothing is unlikely.
func TestModelUninformed(t *testing.T) {
	m := NewModel()
	for _, c := range []struct {
		cue        Cue
		d, o, want float64
	}{
		{Cue{Match: true}, 0.5, 0.5, 0.75},
		{Cue{}, 0, 0.5, 0.5},
		{Cue{Match: true, Last: true}, 0.5, 0, 0.5},
		{Cue{Last: true}, 0, 0, 0},
	} {
		e := m.Score(c.cue)
		if !near(e.Direct, c.d) || !near(e.Onward, c.o) || !near(e.Value, c.want) {
			t.Errorf("%s: %+v, want direct %.2f onward %.2f value %.2f", c.cue, e, c.d, c.o, c.want)
		}
		if m.Unlikely(e) {
			t.Errorf("%s: unlikely with no evidence", c.cue)
		}
	}
}

// TestModelLearns feeds a run in which links that name the record give
// it values most of the time and those that do not never do, except
// through a homepage's only link, which leads on to the record's page:
// the model ranks them so, and prunes only what never paid, once it has
// seen enough of it.
func TestModelLearns(t *testing.T) {
	m := NewModel()
	rnd := rand.New(rand.NewPCG(1, 2))
	named := Cue{Match: true, Naming: NameFull, Source: SourceNeutral, Fanout: FanoutSome}
	other := Cue{Match: true, Naming: NameNone, Source: SourceNeutral, Fanout: FanoutSome}
	homeLink := Cue{Match: true, Naming: NameNone, Source: SourceNeutral, Fanout: FanoutOne}
	seeAlso := Cue{Match: true, Naming: NameNone, Source: SourceGave, Fanout: FanoutFew, Last: true}
	for i := range 200 {
		m.Direct(named, rnd.Float64() < 0.8)
		m.Direct(other, false)
		m.Direct(other, false)
		m.Direct(homeLink, false)
		m.Onward(homeLink, i%4 != 0)
		m.Onward(other, false)
	}
	en, eo, eh, es := m.Score(named), m.Score(other), m.Score(homeLink), m.Score(seeAlso)
	if en.Direct < 0.7 || en.Direct > 0.9 {
		t.Errorf("named links: direct %.3f, want near 0.8", en.Direct)
	}
	if eo.Value > 0.02 {
		t.Errorf("links naming someone else on a page of many: value %.3f, want near 0", eo.Value)
	}
	if eh.Onward < 0.6 {
		t.Errorf("a homepage's only link: onward %.3f, want near 0.75", eh.Onward)
	}
	if en.Value < 0.6 || eh.Value < 0.6 || eo.Value > en.Value/10 || eo.Value > eh.Value/10 {
		t.Errorf("values: named %.3f, homepage link %.3f, other %.3f", en.Value, eh.Value, eo.Value)
	}
	if !m.Unlikely(eo) || m.Unlikely(en) || m.Unlikely(eh) {
		t.Errorf("unlikely: other %v (want true), named %v, homepage link %v (want false)", m.Unlikely(eo), m.Unlikely(en), m.Unlikely(eh))
	}
	// A cue never observed is estimated from the links that share its
	// first features, but not pruned on that.
	if es.Value > 0.1 || m.Unlikely(es) {
		t.Errorf("see-also link at the last depth: %+v (unlikely %v); want a low value, not pruned without evidence", es, m.Unlikely(es))
	}
	rates := m.Rates()
	if len(rates) == 0 {
		t.Fatal("no rates")
	}
	for _, r := range rates {
		if r.DirectS > r.DirectN || r.OnwardS > r.OnwardN {
			t.Errorf("rate %+v: more successes than links", r)
		}
		if r.Feature == "naming" && r.Value == "full" && (r.DirectN != 200 || r.OnwardN != 0) {
			t.Errorf("naming=full: %+v, want 200 direct observations and no onward", r)
		}
	}
}

// TestModelIgnores: a link without Match says nothing of direct values,
// and one at the last depth nothing of onward ones.
func TestModelIgnores(t *testing.T) {
	m := NewModel()
	for range 100 {
		m.Direct(Cue{}, false)
		m.Onward(Cue{Last: true}, true)
	}
	if r := m.Rates(); len(r) != 0 {
		t.Errorf("rates %+v, want none", r)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
