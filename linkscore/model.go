package linkscore

import "math"

// The model's constants (see the package doc).
const (
	// PriorWeight is how many observations a prior is worth: a feature's
	// rate is smoothed towards its head's overall rate, and a cell's
	// towards the features' combined estimate, by this many.
	PriorWeight = 2
	// PruneBelow is the Value under which a link is Unlikely to pay, once
	// MinEvidence says the estimate rests on enough observations.
	PruneBelow = 0.02
	// MinEvidence is how many observations of links like it (see
	// Estimate.Evidence), under each head that matters, Unlikely asks for.
	MinEvidence = 20
)

// probability bounds: no estimate is ever quite 0 or 1, so log-odds stay
// finite.
const (
	minP = 1e-4
	maxP = 1 - minP
)

// Estimate is what a Model expects of a link.
type Estimate struct {
	Direct float64 // P(its page gives the record a value); 0 without Match
	Onward float64 // P(a page it leads to does); 0 at the Last depth
	Value  float64 // P(either): 1 − (1 − Direct)(1 − Onward)
	// Evidence is how many links like it were observed, under the head
	// that counts with fewer (0 when none counts): links whose cue has
	// the same value of every feature of the head's chain.
	Evidence int64
}

// tally counts links observed and those that succeeded.
type tally struct{ n, s int64 }

// The chains of features each head backs off along, most telling first:
// whether a page names the record says most of what it gives itself; for
// where its links lead, whether a mapping runs on it and what the page
// it was found on was to the record, then how many links that page had.
var (
	directChain = []int{featNaming, featSource, featFanout, featValues, featBarren}
	onwardChain = []int{featMatch, featSource, featFanout, featNaming, featValues, featBarren}
)

// head is one of the two things a link may do, learned: tallies for every
// prefix of its chain of features (level k holds the combinations of the
// first k features' values; level 0 is every link), and per feature value
// for Rates.
type head struct {
	chain  []int
	levels [][]tally
	feat   [numFeatures][maxValues]tally
}

func newHead(chain []int) head {
	h := head{chain: chain, levels: make([][]tally, len(chain)+1)}
	n := 1
	for k := range h.levels {
		h.levels[k] = make([]tally, n)
		if k < len(chain) {
			n *= featureValues[chain[k]]
		}
	}
	return h
}

// observe counts one link of cue c, and whether it succeeded (ok).
func (h *head) observe(c Cue, ok bool) {
	add := func(t *tally) {
		t.n++
		if ok {
			t.s++
		}
	}
	i := 0
	for k := range h.levels {
		add(&h.levels[k][i])
		if k < len(h.chain) {
			i = i*featureValues[h.chain[k]] + c.value(h.chain[k])
		}
	}
	for f := range numFeatures {
		add(&h.feat[f][c.value(f)])
	}
}

// estimate is the head's probability for cue c, and how many links of
// c's whole chain were observed. Each level's rate is smoothed towards
// the one before it by PriorWeight observations, from 1/2 for every link.
func (h *head) estimate(c Cue) (p float64, evidence int64) {
	p = 0.5
	i := 0
	for k := range h.levels {
		t := h.levels[k][i]
		p = clamp((float64(t.s) + PriorWeight*p) / (float64(t.n) + PriorWeight))
		evidence = t.n
		if k < len(h.chain) {
			i = i*featureValues[h.chain[k]] + c.value(h.chain[k])
		}
	}
	return p, evidence
}

// Model learns, from the links of a run, which cues lead to values.
type Model struct {
	direct, onward head
}

// NewModel returns a model that has observed nothing.
func NewModel() *Model { return &Model{direct: newHead(directChain), onward: newHead(onwardChain)} }

// Score is what the model expects of a link of cue c.
func (m *Model) Score(c Cue) Estimate {
	var e Estimate
	e.Evidence = math.MaxInt64
	if c.Match {
		var ev int64
		e.Direct, ev = m.direct.estimate(c)
		e.Evidence = min(e.Evidence, ev)
	}
	if !c.Last {
		var ev int64
		e.Onward, ev = m.onward.estimate(c)
		e.Evidence = min(e.Evidence, ev)
	}
	if e.Evidence == math.MaxInt64 {
		e.Evidence = 0
	}
	e.Value = 1 - (1-e.Direct)*(1-e.Onward)
	return e
}

// Unlikely reports whether a link the model estimated e (Score) is not
// worth its request: worth less than PruneBelow on evidence of at least
// MinEvidence links like it.
func (m *Model) Unlikely(e Estimate) bool {
	return e.Value < PruneBelow && e.Evidence >= MinEvidence
}

// Direct records that the page of a link of cue c was applied to its
// record and gave it a value (gave) or not. Links without Match are not
// counted: their pages give nothing by construction.
func (m *Model) Direct(c Cue, gave bool) {
	if c.Match {
		m.direct.observe(c, gave)
	}
}

// Onward records what came of following, for its record, the links of
// the page of a link of cue c: a value found through them (led), or none
// once every one of them was done with. Links at the Last depth are not
// counted: theirs are not followed.
func (m *Model) Onward(c Cue, led bool) {
	if !c.Last {
		m.onward.observe(c, led)
	}
}

// Rate is what the model has learned of one value of one feature under
// both heads: links observed (N) and those that succeeded (S).
type Rate struct {
	Feature string `json:"feature"`
	Value   string `json:"value"`
	DirectN int64  `json:"direct_n"`
	DirectS int64  `json:"direct_s"`
	OnwardN int64  `json:"onward_n"`
	OnwardS int64  `json:"onward_s"`
}

// Rates lists what the model has learned, feature by feature, the values
// observed under either head only.
func (m *Model) Rates() []Rate {
	var out []Rate
	for f := range numFeatures {
		for v := range featureValues[f] {
			d, o := m.direct.feat[f][v], m.onward.feat[f][v]
			if d.n == 0 && o.n == 0 {
				continue
			}
			out = append(out, Rate{Feature: featureNames[f], Value: valueName(f, v),
				DirectN: d.n, DirectS: d.s, OnwardN: o.n, OnwardS: o.s})
		}
	}
	return out
}

func clamp(p float64) float64 { return min(max(p, minP), maxP) }

func logit(p float64) float64 { return math.Log(p / (1 - p)) }
