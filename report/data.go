package report

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"time"

	"backfill/dispatcher"
	"backfill/etl"
	"backfill/store"
	"backfill/survey"
)

// Bounds of what the report lists.
const (
	topFailingHosts = 20
	topPaceHosts    = 30
	maxSamples      = 12 // records shown with their provenance
)

// Data is everything the report shows.
type Data struct {
	Generated time.Time
	StateDir  string
	Status    dispatcher.Status // the dispatcher's last status; zero without one
	HasStatus bool
	History   dispatcher.History

	Records, Complete, Partial, Untouched int

	Fields []FieldFill // the most filled first
	// Warning says when fill rates could not be judged by the run's own
	// targets (see Gather); "" when they were.
	Warning  string
	Mappings []MappingFill // by mapping name
	Samples  []store.Record
	// Incomplete lists why records were left incomplete, by reason in
	// dispatcher.ReasonOrder, from the outcomes the store keeps.
	Incomplete []ReasonRow

	Failures      []Count // by class, most first
	FailuresTotal int64
	FailingHosts  []dispatcher.HostCount
	Robots        []Count
	Paces         []HostPace // busiest first
	PaceHosts     int        // hosts with a pace reported, all of them
	Tightest      *HostPace  // the host whose requests came closest for its delay
	Overruns      int        // hosts whose shortest gap was under their delay

	Surveys []*survey.Summary // the latest run of each host survey in the state directory
}

// FieldFill is how well one field was filled: of the records whose input
// lacked it (Needed), how many backfill filled (Filled).
type FieldFill struct {
	Field          string
	Needed, Filled int
}

// ReasonRow is how many records were left incomplete for one reason: the
// first of them, and the first one's outcome as an example.
type ReasonRow struct {
	Reason  string
	Records int
	IDs     []string
	Example string
}

// Rate is Filled/Needed in percent.
func (f FieldFill) Rate() float64 { return pct(f.Filled, f.Needed) }

// MappingFill is what one mapping's values did: the values kept on
// records, by field, and the records that got any.
type MappingFill struct {
	Mapping string
	Values  int
	Records int
	Fields  []Count
}

// Count is a name and a number.
type Count struct {
	Name string
	N    int64
}

// HostPace is one host's requests, added up over the supervisors that
// made them.
type HostPace struct {
	Host       string
	Requests   int64
	PeakMinute int
	MinGap     float64 // seconds between the closest two request starts; 0 with fewer than two
	Delay      float64 // seconds the host was owed then
	MeanSecs   float64
}

// Held reports whether the host's shortest gap kept its delay.
func (h HostPace) Held() bool { return h.Requests < 2 || h.MinGap >= h.Delay }

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// ErrMappingsMismatch refuses a report whose mappings are not the
// run's: the fill rates would judge fields the run never targeted.
var ErrMappingsMismatch = errors.New("the mappings given are not the ones the crawl ran with")

// Mappings are the mappings a report was given: Set, and whether the
// user named them (Given) or they are the bundled default.
type Mappings struct {
	Set   *etl.Set
	Given bool
}

// Gather reads the report's data: the records from st, the status and
// history files and the record targets from stateDir. Fill rates are
// judged by the run's own targets (what each record lacked and the crawl
// set out to fill, dispatcher.ReadTargets). Mappings given that are not
// the run's (their digest is not the one the status file records) are
// refused with ErrMappingsMismatch. Only a state without targets (no
// state.db) falls back to the fields of maps.Set, with Data.Warning
// saying so. A state directory without a status or history file (no
// dispatcher ran there) still gives the records' part.
func Gather(ctx context.Context, stateDir string, st store.Records, maps Mappings) (*Data, error) {
	d := &Data{Generated: time.Now().UTC(), StateDir: stateDir}
	s, err := dispatcher.ReadStatus(stateDir)
	switch {
	case err == nil:
		d.Status, d.HasStatus = s, true
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	if maps.Given && d.Status.Mappings != "" && maps.Set.Digest() != d.Status.Mappings {
		return nil, fmt.Errorf("report: %w (digest %.12s…, the run's %.12s…): leave out --mappings and --use-learned to judge fill rates by the run's own targets",
			ErrMappingsMismatch, maps.Set.Digest(), d.Status.Mappings)
	}
	h, err := dispatcher.ReadHistory(stateDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	d.History = h
	targeted, err := d.targets(ctx, stateDir, maps)
	if err != nil {
		return nil, err
	}
	if err := d.records(ctx, st, targeted); err != nil {
		return nil, err
	}
	d.failures()
	d.paces()
	if d.Surveys, err = survey.Latest(ctx, stateDir); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return d, nil
}

// targets returns what each record was targeted for: the run's own
// targets, or, in a state that holds none, the fields of maps.Set the
// record lacks (with a warning).
func (d *Data) targets(ctx context.Context, stateDir string, maps Mappings) (func(store.Record) []string, error) {
	t, err := dispatcher.ReadTargets(ctx, stateDir)
	if err == nil {
		return func(r store.Record) []string {
			fields, _ := t.Of(r.ID)
			return fields
		}, nil
	}
	if !errors.Is(err, dispatcher.ErrNoTargets) {
		return nil, fmt.Errorf("report: %w", err)
	}
	which := "the bundled mappings"
	if maps.Given {
		which = "the mappings given"
	}
	d.Warning = fmt.Sprintf("%v; fill rates are judged by every field of %s that a record lacks, which the run may not have targeted", err, which)
	fields := maps.Set.FieldNames()
	return func(r store.Record) []string {
		var lacking []string
		for _, f := range fields {
			if r.Fields[f] == "" {
				lacking = append(lacking, f)
			}
		}
		return lacking
	}, nil
}

// records goes through the store once: fill rates per field and mapping,
// and the provenance samples. A field counts as lacking on a record the
// crawl targeted it on, or that got a value for it all the same.
func (d *Data) records(ctx context.Context, st store.Records, targeted func(store.Record) []string) error {
	needed, filled := map[string]int{}, map[string]int{}
	byMapping := map[string]*MappingFill{}
	mapFields := map[string]map[string]int64{}
	n := 0
	why := map[string]*ReasonRow{}
	err := st.Records(ctx, func(r store.Record) error {
		n++
		if o := r.Outcome; o != nil {
			row := why[o.Reason]
			if row == nil {
				row = &ReasonRow{Reason: o.Reason, Example: r.ID + ": " + o.Detail}
				why[o.Reason] = row
			}
			row.Records++
			if len(row.IDs) < dispatcher.ReasonIDs {
				row.IDs = append(row.IDs, r.ID)
			}
		}
		lacking := map[string]bool{}
		for _, f := range targeted(r) {
			lacking[f] = true
		}
		for f := range r.Found {
			if r.Fields[f] == "" {
				lacking[f] = true
			}
		}
		for f := range lacking {
			needed[f]++
			if _, ok := r.Found[f]; ok {
				filled[f]++
			}
		}
		touched := map[string]bool{}
		for f, v := range r.Found {
			mf := byMapping[v.Mapping]
			if mf == nil {
				mf = &MappingFill{Mapping: v.Mapping}
				byMapping[v.Mapping] = mf
				mapFields[v.Mapping] = map[string]int64{}
			}
			mf.Values++
			mapFields[v.Mapping][f]++
			if !touched[v.Mapping] {
				touched[v.Mapping] = true
				mf.Records++
			}
		}
		if len(r.Found) > 0 && len(d.Samples) < maxSamples {
			d.Samples = append(d.Samples, r)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("report: records: %w", err)
	}
	for f, need := range needed {
		d.Fields = append(d.Fields, FieldFill{Field: f, Needed: need, Filled: filled[f]})
	}
	// The fields filled most first: the bundled mappings can produce many
	// fields a crawl finds little of.
	slices.SortFunc(d.Fields, func(a, b FieldFill) int {
		return cmp.Or(cmp.Compare(b.Filled, a.Filled), cmp.Compare(a.Field, b.Field))
	})
	for name, mf := range byMapping {
		mf.Fields = counts(mapFields[name])
		d.Mappings = append(d.Mappings, *mf)
	}
	slices.SortFunc(d.Mappings, func(a, b MappingFill) int { return cmp.Compare(a.Mapping, b.Mapping) })

	for _, reason := range dispatcher.ReasonOrder() {
		if row := why[reason]; row != nil {
			d.Incomplete = append(d.Incomplete, *row)
			delete(why, reason)
		}
	}
	for _, reason := range slices.Sorted(maps.Keys(why)) { // of another build
		d.Incomplete = append(d.Incomplete, *why[reason])
	}

	d.Records = n
	switch {
	case d.HasStatus:
		d.Complete, d.Partial = d.Status.Complete, d.Status.Partial
	case len(d.History.Timeline) > 0:
		last := d.History.Timeline[len(d.History.Timeline)-1]
		d.Complete, d.Partial = last.Complete, last.Partial
	}
	d.Untouched = max(0, d.Records-d.Complete-d.Partial)
	return nil
}

// counts lists m most first, then by name.
func counts(m map[string]int64) []Count {
	out := make([]Count, 0, len(m))
	for k, v := range m {
		out = append(out, Count{k, v})
	}
	slices.SortFunc(out, func(a, b Count) int { return cmp.Or(cmp.Compare(b.N, a.N), cmp.Compare(a.Name, b.Name)) })
	return out
}

func (d *Data) failures() {
	d.Failures = counts(d.History.Failures)
	for _, c := range d.Failures {
		d.FailuresTotal += c.N
	}
	d.FailingHosts = d.History.FailingHosts[:min(len(d.History.FailingHosts), topFailingHosts)]
	d.Robots = counts(d.History.Robots)
}

// paces adds up the supervisors' accounts host by host: requests add up,
// the busiest minute and the shortest gap are the worst any supervisor
// saw. (A gap across a change of supervisor is not measured by either;
// the dispatcher's handover keeps it, see wire.Task.HostLast.)
func (d *Data) paces() {
	by := map[string]*HostPace{}
	secs := map[string]float64{}
	for _, p := range d.History.Paces {
		hp := by[p.Host]
		if hp == nil {
			hp = &HostPace{Host: p.Host, MinGap: -1}
			by[p.Host] = hp
		}
		hp.Requests += p.Requests
		secs[p.Host] += p.Seconds
		hp.PeakMinute = max(hp.PeakMinute, p.PeakMinute)
		if p.Requests > 1 && (hp.MinGap < 0 || tighter(p.MinGap, p.GapDelay, hp.MinGap, hp.Delay)) {
			hp.MinGap, hp.Delay = p.MinGap, p.GapDelay
		}
	}
	all := slices.Collect(maps.Values(by))
	for _, hp := range all {
		if hp.MinGap < 0 {
			hp.MinGap = 0
		}
		hp.MeanSecs = secs[hp.Host] / float64(max(hp.Requests, 1))
		if !hp.Held() {
			d.Overruns++
		}
		if hp.Requests > 1 && (d.Tightest == nil || tighter(hp.MinGap, hp.Delay, d.Tightest.MinGap, d.Tightest.Delay)) {
			d.Tightest = hp
		}
	}
	slices.SortFunc(all, func(a, b *HostPace) int {
		return cmp.Or(cmp.Compare(b.Requests, a.Requests), cmp.Compare(a.Host, b.Host))
	})
	d.PaceHosts = len(all)
	for _, hp := range all {
		// The busiest, and every host whose delay was not kept.
		if len(d.Paces) < topPaceHosts || !hp.Held() {
			d.Paces = append(d.Paces, *hp)
		}
	}
}

// tighter: a gap g owed d is closer to a breach than g0 owed d0.
func tighter(g, d, g0, d0 float64) bool {
	if d > 0 && d0 > 0 {
		return g/d < g0/d0
	}
	return g < g0
}
