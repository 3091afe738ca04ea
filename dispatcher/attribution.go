package dispatcher

import (
	"slices"
	"sort"
	"strings"
	"time"

	"backfill/etl"
	"backfill/store"
)

// maxConflicts bounds the losing values kept per field.
const maxConflicts = 16

// recState is a record's crawl state, cached for the length of a batch.
type recState struct {
	seq      int64             // its key in the state
	id       string            // its id in the store
	fields   map[string]string // its own values of the match-key fields
	queued   int               // tasks queued for it by this process (its budget)
	targets  []string
	filled   map[string]store.Value
	complete bool
	dirty    bool
	beyond   bool              // a link left at the depth limit is noted (noteBeyond)
	changed  map[string]bool   // fields whose value the store has not seen yet
	keys     map[string]string // etl.MatchKey of known values, see matchKey
	// prior holds, for each field a refresh is re-checking, the value it
	// had before (see refresh.go): the value found now is measured
	// against it for the field's History.
	prior map[string]store.Value
}

// matchKey is etl.MatchKey of one of the record's own values, memoized: a
// record is checked against every page it reaches, and the normalization
// (Unicode decomposition) is not cheap.
func (r *recState) matchKey(v string) string {
	if k, ok := r.keys[v]; ok {
		return k
	}
	if r.keys == nil {
		r.keys = make(map[string]string)
	}
	k := etl.MatchKey(v)
	if len(r.keys) < 16 { // a record has a few match keys; bound it anyway
		r.keys[v] = k
	}
	return k
}

func (r *recState) isTarget(name string) bool {
	for _, t := range r.targets {
		if t == name {
			return true
		}
	}
	return false
}

func (r *recState) isComplete() bool {
	for _, t := range r.targets {
		if _, ok := r.filled[t]; !ok {
			return false
		}
	}
	return true
}

// known is what the record knows of a match key for a page at depth: its
// own input value, else a value filled from a page no farther away.
func (r *recState) known(name string, depth int) string {
	if v := r.fields[name]; v != "" {
		return v
	}
	if v, ok := r.filled[name]; ok && v.Depth <= depth {
		return v.Value
	}
	return ""
}

// attributable decides whether a page's values may go to a record. For
// every match key the page yields a value for, the record's own value (if
// it knows one) must agree after etl.MatchKey normalization. A page that
// yields no value for a match key cannot contradict the record and is
// accepted: many pages that carry the wanted field (a contact page, an
// "about" page) never repeat the person's name, and refusing them would
// lose true values; a decoy, on the other hand, names someone else. A
// refused page's refusal says which key disagreed.
func attributable(r *recState, res *cachedResult, depth int) (bool, refusal) {
	for _, f := range res.Fields {
		if !f.Match || len(f.Values) == 0 {
			continue
		}
		known := r.known(f.Name, depth)
		if known == "" {
			continue
		}
		want := r.matchKey(known)
		agree := false
		for _, v := range f.Values {
			if etl.MatchKey(v) == want {
				agree = true
				break
			}
		}
		if !agree {
			return false, refusal{field: f.Name, pageValue: joinValues(f.Values), recordValue: known}
		}
	}
	return true, refusal{}
}

// refusal is why a page's values were refused for a record: its values
// for a match key, none of which agrees with what the record knows.
type refusal struct {
	field, pageValue, recordValue string
}

// merge writes the page's values for the record's target fields. Per
// field, the value from the page nearest the record's own links wins, ties
// going to the lexicographically smaller source URL, so the outcome does
// not depend on the order results arrive in. Losing values that differ
// from the winner are kept as conflicts.
func merge(r *recState, res *cachedResult, depth int, via []string, now time.Time) {
	// The chain that led the record to the page: redirects across hosts,
	// then those on the page's host.
	var chain []string
	if len(via)+len(res.Via) > 0 {
		chain = append(slices.Clip(via), res.Via...)
	}
	done := make(map[string]bool)
	for _, f := range res.Fields {
		if done[f.Name] || !r.isTarget(f.Name) {
			continue
		}
		val := joinValues(f.Values)
		if val == "" {
			continue
		}
		done[f.Name] = true
		cand := store.Value{Field: f.Name, Value: val, Source: res.Source, Via: chain, Mapping: f.Mapping, Depth: depth, At: now,
			Member: res.Member, MemberKey: res.Key}
		old, ok := r.filled[f.Name]
		kept := false // the old value stays, with one more conflict
		switch {
		case !ok:
		case old.Source == cand.Source && old.Value == cand.Value:
			continue // the same page again: idempotent
		case wins(cand, old):
			cand.Conflicts = addConflict(old.Conflicts, cand.Value, store.Conflict{Value: old.Value, Source: old.Source, Depth: old.Depth})
		default:
			cs := addConflict(old.Conflicts, old.Value, store.Conflict{Value: cand.Value, Source: cand.Source, Depth: cand.Depth})
			if len(cs) == len(old.Conflicts) {
				continue
			}
			old.Conflicts = cs
			cand, kept = old, true
		}
		if p, refreshing := r.prior[f.Name]; refreshing && !kept {
			cand.History = historyOf(p, cand, now)
		} else if ok && !kept {
			cand.History = old.History // the field keeps its history whichever page holds it
		}
		r.filled[f.Name] = cand
		r.changed[f.Name] = true
		r.dirty = true
	}
}

func wins(a, b store.Value) bool {
	if a.Depth != b.Depth {
		return a.Depth < b.Depth
	}
	return a.Source < b.Source
}

// addConflict returns cs without entries equal to the winning value, plus
// c unless it equals the winner or is already there, in a stable order.
func addConflict(cs []store.Conflict, winner string, c store.Conflict) []store.Conflict {
	out := make([]store.Conflict, 0, len(cs)+1)
	have := false
	for _, x := range cs {
		if x.Value == winner {
			continue
		}
		if x == c {
			have = true
		}
		out = append(out, x)
	}
	if !have && c.Value != winner {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Depth != out[j].Depth {
			return out[i].Depth < out[j].Depth
		}
		if out[i].Source != out[j].Source {
			return out[i].Source < out[j].Source
		}
		return out[i].Value < out[j].Value
	})
	if len(out) > maxConflicts {
		out = out[:maxConflicts]
	}
	return out
}

// joinValues makes one field value of a page's values: the single value,
// or every distinct non-empty value joined by "; " for a field that keeps
// all values.
func joinValues(vs []string) string {
	var out []string
	seen := make(map[string]bool)
	for _, v := range vs {
		v = strings.TrimSpace(v)
		if v == "" || seen[v] {
			continue
		}
		seen[v] = true
		out = append(out, v)
	}
	return strings.Join(out, "; ")
}
