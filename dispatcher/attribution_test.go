package dispatcher

import (
	"testing"
	"time"

	"backfill/store"
	"backfill/wire"
)

func TestAttributable(t *testing.T) {
	name := func(vs ...string) wire.Field { return wire.Field{Mapping: "m", Name: "name", Values: vs, Match: true} }
	email := wire.Field{Mapping: "m", Name: "email", Values: []string{"a@x.org"}}
	tests := []struct {
		about  string
		own    map[string]string      // the record's input fields
		filled map[string]store.Value // values filled from pages
		depth  int                    // the page's depth
		fields []wire.Field
		want   bool
	}{
		{"no match key on the page", map[string]string{"name": "Ada Lovelace"}, nil, 0, []wire.Field{email}, true},
		{"agrees after normalization", map[string]string{"name": "Ada Lovelace"}, nil, 1, []wire.Field{name("  ADA  lovelace "), email}, true},
		{"accents do not matter", map[string]string{"name": "Zoe Muller"}, nil, 1, []wire.Field{name("Zoë Müller")}, true},
		{"names someone else", map[string]string{"name": "Ada Lovelace"}, nil, 1, []wire.Field{name("Grace Hopper"), email}, false},
		{"one of several values agrees", map[string]string{"name": "Ada Lovelace"}, nil, 1, []wire.Field{name("Grace Hopper", "Ada Lovelace")}, true},
		{"match key the record does not know", map[string]string{}, nil, 1, []wire.Field{name("Grace Hopper")}, true},
		{"empty match key on the page", map[string]string{"name": "Ada Lovelace"}, nil, 1, []wire.Field{name()}, true},
		{"filled from a nearer page counts", map[string]string{}, map[string]store.Value{"name": {Value: "Ada Lovelace", Depth: 0}}, 1, []wire.Field{name("Grace Hopper")}, false},
		{"filled from a farther page does not", map[string]string{}, map[string]store.Value{"name": {Value: "Ada Lovelace", Depth: 2}}, 1, []wire.Field{name("Grace Hopper")}, true},
		{"a field not marked match is not a key", map[string]string{"email": "b@y.org"}, nil, 1, []wire.Field{email}, true},
	}
	for _, tc := range tests {
		t.Run(tc.about, func(t *testing.T) {
			r := &recState{id: "r", fields: tc.own, filled: tc.filled}
			if r.filled == nil {
				r.filled = map[string]store.Value{}
			}
			res := &cachedResult{Source: "http://a.test/p", Fields: tc.fields}
			if got, why := attributable(r, res, tc.depth); got != tc.want || got != (why.field == "") {
				t.Fatalf("attributable = %v (%+v), want %v and a refusal naming the key exactly when refused", got, why, tc.want)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	page := func(src string, vs ...string) *cachedResult {
		return &cachedResult{Source: src, Fields: []wire.Field{{Mapping: "m", Name: "city", Values: vs}}}
	}
	type step struct {
		res   *cachedResult
		depth int
	}
	tests := []struct {
		about     string
		steps     []step
		want      string   // the city filled, "" for none
		conflicts []string // the losing values kept
	}{
		{"one page", []step{{page("http://a/1", "Lisbon"), 1}}, "Lisbon", nil},
		{"nearer page wins whatever the order", []step{{page("http://a/2", "Porto"), 2}, {page("http://a/1", "Lisbon"), 1}}, "Lisbon", []string{"Porto"}},
		{"nearer page first", []step{{page("http://a/1", "Lisbon"), 1}, {page("http://a/2", "Porto"), 2}}, "Lisbon", []string{"Porto"}},
		{"tie goes to the smaller URL", []step{{page("http://b/", "Porto"), 1}, {page("http://a/", "Lisbon"), 1}}, "Lisbon", []string{"Porto"}},
		{"the same page again changes nothing", []step{{page("http://a/1", "Lisbon"), 1}, {page("http://a/1", "Lisbon"), 1}}, "Lisbon", nil},
		{"values are trimmed and joined", []step{{page("http://a/1", " Lisbon ", "Porto", "Lisbon"), 1}}, "Lisbon; Porto", nil},
		{"blank values fill nothing", []step{{page("http://a/1", "  "), 1}}, "", nil},
		{"an equal losing value is no conflict", []step{{page("http://a/2", "Lisbon"), 2}, {page("http://a/1", "Lisbon"), 1}}, "Lisbon", nil},
	}
	for _, tc := range tests {
		t.Run(tc.about, func(t *testing.T) {
			r := &recState{id: "r", targets: []string{"city"}, filled: map[string]store.Value{}, changed: map[string]bool{}, dirtied: new([]*recState)}
			for _, s := range tc.steps {
				merge(r, s.res, s.depth, nil, now)
			}
			got, ok := r.filled["city"]
			if tc.want == "" {
				if ok {
					t.Fatalf("filled %q, want nothing", got.Value)
				}
				return
			}
			if got.Value != tc.want {
				t.Fatalf("city = %q, want %q", got.Value, tc.want)
			}
			var cs []string
			for _, c := range got.Conflicts {
				cs = append(cs, c.Value)
			}
			if len(cs) != len(tc.conflicts) {
				t.Fatalf("conflicts %q, want %q", cs, tc.conflicts)
			}
			for i := range cs {
				if cs[i] != tc.conflicts[i] {
					t.Fatalf("conflicts %q, want %q", cs, tc.conflicts)
				}
			}
			if !r.dirty || !r.changed["city"] {
				t.Fatalf("merge left the record clean: dirty=%v changed=%v", r.dirty, r.changed)
			}
		})
	}
}

func TestMergeOnlyTargets(t *testing.T) {
	r := &recState{id: "r", targets: []string{"city"}, filled: map[string]store.Value{}, changed: map[string]bool{}, dirtied: new([]*recState)}
	merge(r, &cachedResult{Source: "http://a/", Fields: []wire.Field{{Name: "email", Values: []string{"a@x.org"}}}}, 0, nil, time.Now())
	if len(r.filled) != 0 || r.dirty {
		t.Fatalf("a field that is not a target was written: %v", r.filled)
	}
}
