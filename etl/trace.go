package etl

// Trace is a step-by-step account of one page through the mappings, for
// `backfill mappings try`.
type Trace struct {
	URL        string
	Matched    []string    // mappings whose url_patterns match the URL
	Rules      []RuleTrace // every url_parser and field of the matched mappings, in order
	Extraction *Extraction // the final result, as Extract returns it
}

// RuleTrace is one url_parser or field and what each processor produced.
type RuleTrace struct {
	Mapping string
	Rule    string // `fields[0] "name"` or `url_parsers[1]`
	Field   string // the field name; empty for url_parsers
	Steps   []StepTrace
}

// StepTrace is one processor's output.
type StepTrace struct {
	Processor string // `processors[0] (xpath)`
	In        int    // number of values it received
	Out       []string
	Err       string
}

// Trace runs the mappings on a page like Extract and records every
// processor's output. With mapping set, only that mapping runs.
func (s *Set) Trace(pageURL string, body []byte, contentType, mapping string) *Trace {
	t := &Trace{URL: pageURL}
	for _, m := range s.Mappings() {
		if (mapping == "" || m.Name == mapping) && m.MatchURL(pageURL) {
			t.Matched = append(t.Matched, m.Name)
		}
	}
	var cur *RuleTrace
	var curRule *rule
	tr := func(m *Mapping, r *rule, st *step, in, out []Value, err error) {
		if cur == nil || curRule != r || cur.Mapping != m.Name {
			t.Rules = append(t.Rules, RuleTrace{Mapping: m.Name, Rule: r.label, Field: r.name})
			cur, curRule = &t.Rules[len(t.Rules)-1], r
		}
		stp := StepTrace{Processor: st.label, In: len(in)}
		for _, v := range out {
			stp.Out = append(stp.Out, v.Text)
		}
		if err != nil {
			stp.Err = err.Error()
		}
		cur.Steps = append(cur.Steps, stp)
	}
	t.Extraction = s.extract(pageURL, body, contentType, extractOpts{tr: tr, only: mapping})
	return t
}
