package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"backfill/resolver"
	"backfill/store"
)

func init() { cases = append(cases, nameCases...) }

// clockMS is now to the millisecond. The DNS cases keep times near the
// clock, so that a backend free to drop expired answers on its own may
// still be checked with them.
func clockMS() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// loadName loads name as of now, failing the case on an error.
func loadName(ctx context.Context, t *testing.T, s store.Store, name string, now time.Time) (resolver.Answer, bool) {
	t.Helper()
	a, ok, err := s.Names().Load(ctx, name, now)
	if err != nil {
		t.Fatalf("Load(%s): %v", name, err)
	}
	return a, ok
}

func saveName(ctx context.Context, t *testing.T, s store.Store, name string, a resolver.Answer, expires time.Time) {
	t.Helper()
	if err := s.Names().Save(ctx, name, a, expires); err != nil {
		t.Fatalf("Save(%s): %v", name, err)
	}
}

var nameCases = []testCase{
	{"names/unknown name", func(ctx context.Context, t *testing.T, s store.Store) {
		if a, ok := loadName(ctx, t, s, "nowhere.example", clockMS()); ok {
			t.Fatalf("an empty cache answered %+v", a)
		}
	}},
	{"names/answers come back as saved", func(ctx context.Context, t *testing.T, s store.Store) {
		now := clockMS()
		answers := map[string]resolver.Answer{
			"www.one.example": {CNAMEs: []string{"www.one.example", "edge.cdn.example"}, IPs: []string{"192.0.2.7", "192.0.2.9"}, TTL: 300, At: now},
			"v6.one.example":  {IPs: []string{"2001:db8::1"}, TTL: 60, At: now},
			"zone.example":    {IPs: []string{"192.0.2.1"}, NS: []string{"a.ns.example", "b.ns.example"}, TTL: 86400, At: now},
			// negative answers: a fact about the name, kept as one
			"gone.example":  {Class: resolver.ClassNXDomain, Rcode: "NXDOMAIN", TTL: 900, At: now},
			"empty.example": {Class: resolver.ClassNoData, TTL: 0, At: now},
			"ünï.example":   {Class: resolver.ClassNXDomain, Rcode: "NXDOMAIN", Error: "no such name", TTL: 1, At: now},
		}
		for name, a := range answers {
			saveName(ctx, t, s, name, a, now.Add(time.Hour))
		}
		for name, want := range answers {
			got, ok := loadName(ctx, t, s, name, now.Add(time.Minute))
			if !ok {
				t.Errorf("%s: not found", name)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s:\n got %+v\nwant %+v", name, got, want)
			}
			if got.Negative() != want.Negative() {
				t.Errorf("%s: Negative() = %v", name, got.Negative())
			}
		}
	}},
	{"names/expired answers are not returned", func(ctx context.Context, t *testing.T, s store.Store) {
		now := clockMS()
		expires := now.Add(10 * time.Minute)
		saveName(ctx, t, s, "short.example", resolver.Answer{IPs: []string{"192.0.2.3"}, TTL: 600, At: now}, expires)
		saveName(ctx, t, s, "nx.example", resolver.Answer{Class: resolver.ClassNXDomain, TTL: 600, At: now}, expires)
		for _, name := range []string{"short.example", "nx.example"} {
			if _, ok := loadName(ctx, t, s, name, expires.Add(-time.Millisecond)); !ok {
				t.Errorf("%s: not found a millisecond before it expires", name)
			}
			for _, at := range []time.Time{expires, expires.Add(time.Hour)} {
				if a, ok := loadName(ctx, t, s, name, at); ok {
					t.Errorf("%s at %v (expires %v): got %+v, want nothing", name, at, expires, a)
				}
			}
		}
	}},
	{"names/a save replaces the entry", func(ctx context.Context, t *testing.T, s store.Store) {
		now := clockMS()
		// The name did not exist; then it does, for less time.
		saveName(ctx, t, s, "new.example", resolver.Answer{Class: resolver.ClassNXDomain, TTL: 900, At: now}, now.Add(time.Hour))
		later := now.Add(time.Second)
		want := resolver.Answer{IPs: []string{"192.0.2.44"}, TTL: 300, At: later}
		saveName(ctx, t, s, "new.example", want, later.Add(5*time.Minute))
		got, ok := loadName(ctx, t, s, "new.example", later)
		if !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("after a second save: %+v, %v; want %+v", got, ok, want)
		}
		if a, ok := loadName(ctx, t, s, "new.example", later.Add(10*time.Minute)); ok {
			t.Fatalf("the replaced entry's expiry still holds: %+v", a)
		}
	}},
	{"names/empty name refused", func(ctx context.Context, t *testing.T, s store.Store) {
		if err := s.Names().Save(ctx, "", resolver.Answer{IPs: []string{"192.0.2.1"}, At: clockMS()}, clockMS().Add(time.Hour)); err == nil {
			t.Fatal("Save with an empty name succeeded")
		}
	}},
}
