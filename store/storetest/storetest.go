// Package storetest is the conformance suite every store backend passes.
//
// A backend's test calls Run with a function that opens a new, empty store:
//
//	func TestSQLite(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { … })
//	}
//
// Run opens one store per case and closes it when the case ends. The cases
// pin down the behaviour callers rely on and that differs most easily between
// backends: upserts that are idempotent, SetFields replacing a field with its
// conflicts, Records in Seq order, ErrNotFound from empty caches (robots.txt,
// last crawl, soft-404 verdicts), concurrent
// writers, redelivered results, large and non-ASCII values, and the batched
// last-crawl write for backends that have it, and the DNS cache (answers
// positive and negative back as saved, none once expired). Backends lists the backends
// the suite ran against, for a TestMain to report. Times in the cases are whole
// milliseconds, the finest precision every backend keeps.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/store"
)

// caseTimeout bounds each case, so a backend that deadlocks fails the case
// instead of hanging the suite.
const caseTimeout = 60 * time.Second

type testCase struct {
	name string
	run  func(ctx context.Context, t *testing.T, s store.Store)
}

// Run runs every case against a fresh store from open.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	RunBackend(t, "", open)
}

// RunBackend is Run for a backend that Backends reports as label (for
// example "mongodb(embedded)"); an empty label is the store's Backend().
func RunBackend(t *testing.T, label string, open func(t *testing.T) store.Store) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			name := label
			if name == "" {
				name = s.Backend()
			}
			noteRan(name)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close %s store: %v", s.Backend(), err)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
			defer cancel()
			tc.run(ctx, t, s)
		})
	}
}

var (
	ranMu sync.Mutex
	ran   []string
)

func noteRan(name string) {
	ranMu.Lock()
	defer ranMu.Unlock()
	for _, n := range ran {
		if n == name {
			return
		}
	}
	ran = append(ran, name)
}

// CheckLastCrawls checks the store's last-crawl time of each host in
// want; a zero time means the host must have none. step names the case
// in messages.
func CheckLastCrawls(ctx context.Context, t *testing.T, s store.Store, step string, want map[string]time.Time) {
	t.Helper()
	for host, w := range want {
		got, err := s.LastCrawl(ctx, host)
		if w.IsZero() {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: LastCrawl(%s) = %v, %v; want not found", step, host, got, err)
			}
			continue
		}
		if err != nil || !got.Equal(w) {
			t.Errorf("%s: LastCrawl(%s) = %v, %v; want %v", step, host, got, err, w)
		}
	}
}

// Backends lists the backends the suite ran against in this process, in
// the order they first ran, so a TestMain can say plainly which ran:
//
//	fmt.Printf("storetest: backends run: %s\n", strings.Join(storetest.Backends(), ", "))
func Backends() []string {
	ranMu.Lock()
	defer ranMu.Unlock()
	return append([]string(nil), ran...)
}

// lastCrawlBatcher is the optional batched write of last-crawl times.
type lastCrawlBatcher interface {
	PutLastCrawls(ctx context.Context, times map[string]time.Time) error
}

// base is a fixed, millisecond-aligned instant the cases build times from.
var base = time.Date(2025, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

var cases = []testCase{
	{"records/empty store", func(ctx context.Context, t *testing.T, s store.Store) {
		if got := all(ctx, t, s); len(got) != 0 {
			t.Fatalf("Records on an empty store gave %d records", len(got))
		}
	}},
	{"records/put and get", func(ctx context.Context, t *testing.T, s store.Store) {
		recs := sampleRecords()
		mustPut(ctx, t, s, recs)
		want := withFound(recs)
		assertRecords(t, all(ctx, t, s), want)
	}},
	{"records/seq order", func(ctx context.Context, t *testing.T, s store.Store) {
		// Put in two batches, out of order, with a Seq tie broken by ID.
		mustPut(ctx, t, s, []store.Record{rec("c", 30), rec("a", 10)})
		mustPut(ctx, t, s, []store.Record{rec("b", 20), rec("z", 5), rec("y", 20)})
		var ids []string
		for _, r := range all(ctx, t, s) {
			ids = append(ids, r.ID)
		}
		if want := []string{"z", "a", "b", "y", "c"}; !reflect.DeepEqual(ids, want) {
			t.Fatalf("Records order = %v, want %v (by Seq, then ID)", ids, want)
		}
	}},
	{"records/upsert is idempotent", func(ctx context.Context, t *testing.T, s store.Store) {
		recs := sampleRecords()
		for range 3 {
			mustPut(ctx, t, s, recs)
		}
		assertRecords(t, all(ctx, t, s), withFound(recs))
	}},
	{"records/upsert replaces input and keeps found", func(ctx context.Context, t *testing.T, s store.Store) {
		recs := sampleRecords()
		mustPut(ctx, t, s, recs)
		v := value("email", "ada@one.example", 0, base)
		mustSet(ctx, t, s, recs[0].ID, v)

		changed := recs[0]
		changed.Fields = map[string]string{"name": "Ada L.", "email": "", "extra": "x"}
		changed.Order = []string{"name", "email", "extra"}
		changed.Links = []string{"https://two.example/"}
		changed.Found = map[string]store.Value{"bogus": value("bogus", "ignored", 0, base)}
		mustPut(ctx, t, s, []store.Record{changed})

		want := withFound(recs)
		want[0] = changed
		want[0].Found = map[string]store.Value{"email": v}
		assertRecords(t, all(ctx, t, s), want)
	}},
	{"fields/refresh keeps history", func(ctx context.Context, t *testing.T, s store.Store) {
		recs := sampleRecords()
		mustPut(ctx, t, s, recs)
		old := value("email", "ada@old.example", 1, base)
		mustSet(ctx, t, s, recs[0].ID, old)
		cur := value("email", "ada@new.example", 0, base.Add(90*24*time.Hour))
		cur.History = []store.Prior{{Value: old.Value, Source: old.Source, Mapping: old.Mapping, Depth: old.Depth, At: old.At, Replaced: cur.At}}
		mustSet(ctx, t, s, recs[0].ID, cur)
		mustSet(ctx, t, s, recs[0].ID, cur) // a redelivery changes nothing
		want := withFound(recs)
		want[0].Found = map[string]store.Value{"email": cur}
		assertRecords(t, all(ctx, t, s), want)
	}},
	{"records/bad batch writes nothing", func(ctx context.Context, t *testing.T, s store.Store) {
		batch := []store.Record{rec("ok-1", 1), rec("", 2), rec("ok-3", 3)}
		if err := s.PutRecords(ctx, batch); err == nil {
			t.Fatal("PutRecords with an empty ID succeeded")
		}
		if got := all(ctx, t, s); len(got) != 0 {
			t.Fatalf("a rejected batch left %d records", len(got))
		}
	}},
	{"records/raw input, malformed lines and typed values", func(ctx context.Context, t *testing.T, s store.Store) {
		// The input exactly as read (bytes a JSON string could not hold
		// included), the format, and a malformed line's reason come back.
		recs := []store.Record{
			{ID: "1", Seq: 1, Format: store.FormatJSONL, Raw: []byte(`{"id": 1, "n": 1e3, "l": ["a"], "o": {"x": null}}`),
				Fields: map[string]string{"id": "1", "n": "1e3", "l": `["a"]`, "o": `{"x":null}`}, Order: []string{"id", "n", "l", "o"}},
			{ID: "2", Seq: 2, Format: store.FormatCSV, Raw: []byte("2,\"a,\r\nb\",  x  "),
				Fields: map[string]string{"id": "2", "name": "a,\r\nb", "c": "x"}, Order: []string{"id", "name", "c"}},
			{ID: "3", Seq: 3, Format: store.FormatCSV, Raw: []byte("3,\xff\xfe"), Error: "in.csv:4: not valid UTF-8", Order: []string{"id", "name", "c"}},
			{ID: "4", Seq: 4, Format: store.FormatJSONL, Error: "in.jsonl:5: line longer than 4194304 bytes"},
		}
		mustPut(ctx, t, s, recs)
		v := value("age", "42", 0, base)
		v.Type = "number"
		mustSet(ctx, t, s, "1", v)
		want := withFound(recs)
		want[0].Found = map[string]store.Value{"age": v}
		assertRecords(t, all(ctx, t, s), want)
	}},
	{"records/outcomes", func(ctx context.Context, t *testing.T, s store.Store) {
		recs := sampleRecords()
		mustPut(ctx, t, s, recs)
		outs := []store.Outcome{
			{Record: "1", Reason: "match-key-refused", Detail: "name differs", Pages: 2, Page: "https://one.example/", Key: "name"},
			{Record: "2", Reason: "failed", Failed: map[string]int{"dns": 2, "robots": 1}},
			{Record: "nobody", Reason: "no-links"}, // unknown: ignored
		}
		if err := s.SetOutcomes(ctx, outs); err != nil {
			t.Fatalf("SetOutcomes: %v", err)
		}
		want := withFound(recs)
		want[0].Outcome, want[1].Outcome = &outs[0], &outs[1]
		assertRecords(t, all(ctx, t, s), want)
		// Replaced, and cleared by an empty reason; a redelivery is harmless.
		outs = []store.Outcome{{Record: "1"}, {Record: "2", Reason: "no-values", Pages: 1}}
		for range 2 {
			if err := s.SetOutcomes(ctx, outs); err != nil {
				t.Fatalf("SetOutcomes: %v", err)
			}
		}
		want[0].Outcome, want[1].Outcome = nil, &outs[1]
		assertRecords(t, all(ctx, t, s), want)
		if err := s.SetOutcomes(ctx, []store.Outcome{{Reason: "no-links"}}); err == nil {
			t.Error("SetOutcomes with an empty record id succeeded")
		}
	}},
	{"records/large batch", func(ctx context.Context, t *testing.T, s store.Store) {
		const n = 2_000
		recs := make([]store.Record, n)
		for i := range recs {
			recs[i] = rec(fmt.Sprintf("r%06d", i), int64(n-i)) // Seq reverses ID order
		}
		mustPut(ctx, t, s, recs)
		count, prev := 0, int64(0)
		err := s.Records(ctx, func(r store.Record) error {
			if r.Seq <= prev {
				return fmt.Errorf("record %s: seq %d after %d", r.ID, r.Seq, prev)
			}
			prev = r.Seq
			count++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if count != n {
			t.Fatalf("Records gave %d records, want %d", count, n)
		}
	}},
	{"records/fn error stops the walk", func(ctx context.Context, t *testing.T, s store.Store) {
		mustPut(ctx, t, s, sampleRecords())
		stop := errors.New("stop here")
		calls := 0
		err := s.Records(ctx, func(store.Record) error { calls++; return stop })
		if !errors.Is(err, stop) {
			t.Fatalf("Records returned %v, want the callback's error", err)
		}
		if calls != 1 {
			t.Fatalf("callback ran %d times after returning an error, want 1", calls)
		}
	}},
	{"records/cancelled context", func(ctx context.Context, t *testing.T, s store.Store) {
		mustPut(ctx, t, s, sampleRecords())
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Records(cctx, func(store.Record) error { return nil }); err == nil {
			t.Fatal("Records with a cancelled context succeeded")
		}
		if err := s.PutRecords(cctx, []store.Record{rec("late", 9)}); err == nil {
			t.Fatal("PutRecords with a cancelled context succeeded")
		}
	}},
	{"records/writes during the walk", func(ctx context.Context, t *testing.T, s store.Store) {
		recs := sampleRecords()
		mustPut(ctx, t, s, recs)
		// A caller may write while it reads (the dispatcher does); that must
		// not deadlock, whatever the walk then sees.
		err := s.Records(ctx, func(r store.Record) error {
			if err := s.SetFields(ctx, r.ID, []store.Value{value("seen", "yes", 0, base)}); err != nil {
				return err
			}
			return s.PutLastCrawl(ctx, "walk.example", base)
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range all(ctx, t, s) {
			if r.Found["seen"].Value != "yes" {
				t.Errorf("record %s: write made during the walk is missing", r.ID)
			}
		}
	}},
	{"fields/set and read back", func(ctx context.Context, t *testing.T, s store.Store) {
		recs := sampleRecords()
		mustPut(ctx, t, s, recs)
		email := value("email", "ada@one.example", 1, base.In(time.FixedZone("X", 5*3600)))
		email.Conflicts = []store.Conflict{
			{Value: "someone@else.example", Source: "https://decoy.example/p", Depth: 2},
			{Value: "third@else.example", Source: "https://decoy.example/q", Depth: 3},
		}
		phone := value("phone", "+1 555 0100", 0, base.Add(time.Millisecond))
		// Reached through redirects, fetched by a named member.
		phone.Via = []string{"https://short.example/a", "https://one.example/old"}
		phone.Member, phone.MemberKey = "sup-2", "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
		mustSet(ctx, t, s, recs[0].ID, email, phone)

		want := withFound(recs)
		want[0].Found = map[string]store.Value{"email": email, "phone": phone}
		assertRecords(t, all(ctx, t, s), want)
	}},
	{"fields/replace keeps the new conflicts", func(ctx context.Context, t *testing.T, s store.Store) {
		recs := sampleRecords()
		mustPut(ctx, t, s, recs)
		first := value("email", "old@one.example", 2, base)
		first.Conflicts = []store.Conflict{{Value: "x@y.example", Source: "https://y.example/", Depth: 3}}
		other := value("phone", "+1 555 0100", 0, base)
		mustSet(ctx, t, s, recs[1].ID, first, other)

		second := value("email", "new@one.example", 0, base.Add(time.Hour))
		second.Mapping = "other-mapping"
		second.Conflicts = []store.Conflict{{Value: "old@one.example", Source: first.Source, Depth: 2}}
		mustSet(ctx, t, s, recs[1].ID, second)

		want := withFound(recs)
		want[1].Found = map[string]store.Value{"email": second, "phone": other}
		assertRecords(t, all(ctx, t, s), want)
	}},
	{"fields/redelivery changes nothing", func(ctx context.Context, t *testing.T, s store.Store) {
		recs := sampleRecords()
		mustPut(ctx, t, s, recs)
		v := value("email", "ada@one.example", 1, base)
		v.Conflicts = []store.Conflict{{Value: "b@b.example", Source: "https://b.example/", Depth: 1}}
		mustSet(ctx, t, s, recs[0].ID, v)
		once := all(ctx, t, s)
		for range 3 {
			mustSet(ctx, t, s, recs[0].ID, v)
		}
		assertRecords(t, all(ctx, t, s), once)
	}},
	{"records/one by id", func(ctx context.Context, t *testing.T, s store.Store) {
		recs := sampleRecords()
		mustPut(ctx, t, s, recs)
		v := value("email", "ada@one.example", 1, base)
		v.Conflicts = []store.Conflict{{Value: "b@b.example", Source: "https://b.example/", Depth: 1}}
		mustSet(ctx, t, s, recs[0].ID, v)
		for _, want := range all(ctx, t, s) {
			got, err := s.Record(ctx, want.ID)
			if err != nil {
				t.Fatalf("Record(%q): %v", want.ID, err)
			}
			assertRecords(t, []store.Record{got}, []store.Record{want})
		}
		if _, err := s.Record(ctx, "no-such-record"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Record of an unknown id: %v, want ErrNotFound", err)
		}
	}},
	{"fields/unknown record", func(ctx context.Context, t *testing.T, s store.Store) {
		mustPut(ctx, t, s, sampleRecords())
		err := s.SetFields(ctx, "no-such-record", []store.Value{value("email", "x@x.example", 0, base)})
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("SetFields on an unknown record: %v, want ErrNotFound", err)
		}
		for _, r := range all(ctx, t, s) {
			if r.ID == "no-such-record" {
				t.Fatal("SetFields created a record")
			}
		}
	}},
	{"fields/empty field name", func(ctx context.Context, t *testing.T, s store.Store) {
		recs := sampleRecords()
		mustPut(ctx, t, s, recs)
		err := s.SetFields(ctx, recs[0].ID, []store.Value{value("a", "1", 0, base), value("", "2", 0, base)})
		if err == nil {
			t.Fatal("SetFields with an empty field name succeeded")
		}
		assertRecords(t, all(ctx, t, s), withFound(recs))
	}},
	{"concurrent writers", func(ctx context.Context, t *testing.T, s store.Store) {
		const (
			writers = 8
			rounds  = 10
		)
		recs := sampleRecords()
		mustPut(ctx, t, s, recs)
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Go(func() {
				for i := range rounds {
					id := recs[(w+i)%len(recs)].ID
					f := fmt.Sprintf("w%02d_%02d", w, i)
					if err := s.SetFields(ctx, id, []store.Value{value(f, f, i, base)}); err != nil {
						errs <- err
						return
					}
					// Every writer also fights over one host's last crawl
					// and one robots entry.
					at := base.Add(time.Duration(w*rounds+i) * time.Millisecond)
					if err := s.PutLastCrawl(ctx, "busy.example", at); err != nil {
						errs <- err
						return
					}
					if err := s.PutRobots(ctx, "busy.example", store.Robots{Status: 200, Body: []byte(f), FetchedAt: at, Expires: at}); err != nil {
						errs <- err
						return
					}
					if _, err := s.LastCrawl(ctx, "busy.example"); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		total := 0
		for _, r := range all(ctx, t, s) {
			for f, v := range r.Found {
				if v.Value != f {
					t.Errorf("record %s field %s = %q", r.ID, f, v.Value)
				}
			}
			total += len(r.Found)
		}
		if total != writers*rounds {
			t.Errorf("found %d fields after concurrent writes, want %d", total, writers*rounds)
		}
		last, err := s.LastCrawl(ctx, "busy.example")
		if err != nil {
			t.Fatal(err)
		}
		if want := base.Add(time.Duration(writers*rounds-1) * time.Millisecond); !last.Equal(want) {
			t.Errorf("last crawl after concurrent writes = %v, want the latest %v", last, want)
		}
		rb, err := s.Robots(ctx, "busy.example")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(rb.Body), "w") || !rb.FetchedAt.Equal(rb.Expires) {
			t.Errorf("robots after concurrent writes is a mix of writes: %+v", rb)
		}
	}},
	{"robots/not found", func(ctx context.Context, t *testing.T, s store.Store) {
		_, err := s.Robots(ctx, "absent.example")
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Robots on an absent host: %v, want ErrNotFound", err)
		}
		// Another host's entry is not this one's.
		mustPutRobots(ctx, t, s, "present.example", store.Robots{Status: 200, Body: []byte("User-agent: *\n")})
		if _, err := s.Robots(ctx, "absent.example"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Robots on an absent host beside a present one: %v, want ErrNotFound", err)
		}
	}},
	{"robots/round trip and replace", func(ctx context.Context, t *testing.T, s store.Store) {
		tests := []struct {
			host string
			r    store.Robots
		}{
			{"a.example", store.Robots{Status: 200, Body: []byte("User-agent: *\nDisallow: /private\nCrawl-delay: 2\n"), FetchedAt: base, Expires: base.Add(time.Hour)}},
			{"b.example:8080", store.Robots{Status: 404, Body: nil, FetchedAt: base, Expires: base.Add(24 * time.Hour)}},
			{"c.example", store.Robots{Status: 0, FetchedAt: base}}, // unreachable
			{"a.example", store.Robots{Status: 503, Body: []byte("busy"), FetchedAt: base.Add(time.Minute), Expires: base.Add(2 * time.Minute)}},
		}
		want := map[string]store.Robots{}
		for _, tc := range tests {
			mustPutRobots(ctx, t, s, tc.host, tc.r)
			want[tc.host] = tc.r
		}
		for host, w := range want {
			got, err := s.Robots(ctx, host)
			if err != nil {
				t.Fatalf("Robots(%s): %v", host, err)
			}
			assertRobots(t, host, got, w)
		}
	}},
	{"robots/large body", func(ctx context.Context, t *testing.T, s store.Store) {
		body := make([]byte, 1<<20)
		for i := range body {
			body[i] = byte(i*7 + i/256) // every byte value, NUL included
		}
		r := store.Robots{Status: 200, Body: body, FetchedAt: base, Expires: base.Add(time.Hour)}
		mustPutRobots(ctx, t, s, "big.example", r)
		got, err := s.Robots(ctx, "big.example")
		if err != nil {
			t.Fatal(err)
		}
		assertRobots(t, "big.example", got, r)
	}},
	{"soft404/not found", func(ctx context.Context, t *testing.T, s store.Store) {
		if _, err := s.Soft404(ctx, "absent.example"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Soft404 on an absent host: %v, want ErrNotFound", err)
		}
		mustPutSoft404(ctx, t, s, "present.example", store.Soft404{Print: []byte("p"), ProbedAt: base})
		if _, err := s.Soft404(ctx, "absent.example"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Soft404 on an absent host beside a present one: %v, want ErrNotFound", err)
		}
		// The robots.txt cache is another entry: a host with robots.txt
		// has no verdict until one is put.
		mustPutRobots(ctx, t, s, "robots-only.example", store.Robots{Status: 200, Body: []byte("User-agent: *\n"), FetchedAt: base})
		if _, err := s.Soft404(ctx, "robots-only.example"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Soft404 of a host with only robots.txt: %v, want ErrNotFound", err)
		}
	}},
	{"soft404/round trip and replace", func(ctx context.Context, t *testing.T, s store.Store) {
		binary := make([]byte, 4096)
		for i := range binary {
			binary[i] = byte(i * 31) // every byte value, NUL included
		}
		tests := []struct {
			host string
			v    store.Soft404
		}{
			{"fine.example", store.Soft404{ProbedAt: base, Expires: base.Add(24 * time.Hour)}}, // no print: a proper 404
			{"soft.example:8080", store.Soft404{Print: binary, ProbedAt: base, Expires: base.Add(time.Hour)}},
			{"bücher.example", store.Soft404{Print: []byte(`{"words":3}`), ProbedAt: base, Expires: base.Add(time.Minute)}},
			{"fine.example", store.Soft404{Print: []byte("now soft"), ProbedAt: base.Add(time.Hour), Expires: base.Add(25 * time.Hour)}},
		}
		want := map[string]store.Soft404{}
		for _, tc := range tests {
			mustPutSoft404(ctx, t, s, tc.host, tc.v)
			want[tc.host] = tc.v
		}
		for host, w := range want {
			got, err := s.Soft404(ctx, host)
			if err != nil {
				t.Fatalf("Soft404(%s): %v", host, err)
			}
			if !bytes.Equal(got.Print, w.Print) || !got.ProbedAt.Equal(w.ProbedAt) || !got.Expires.Equal(w.Expires) {
				t.Errorf("Soft404(%s) = {%q %v %v}, want {%q %v %v}", host, got.Print, got.ProbedAt, got.Expires, w.Print, w.ProbedAt, w.Expires)
			}
		}
		if err := s.PutSoft404(ctx, "", store.Soft404{ProbedAt: base}); err == nil {
			t.Error("PutSoft404 with an empty host succeeded")
		}
	}},
	{"last crawl/not found", func(ctx context.Context, t *testing.T, s store.Store) {
		if _, err := s.LastCrawl(ctx, "absent.example"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("LastCrawl on an absent host: %v, want ErrNotFound", err)
		}
	}},
	{"last crawl/round trip keeps the later time", func(ctx context.Context, t *testing.T, s store.Store) {
		tests := []struct {
			put, want time.Time
		}{
			{base, base},
			{base.Add(time.Second).In(time.FixedZone("Y", -7*3600)), base.Add(time.Second)},
			{base.Add(-time.Hour), base.Add(time.Second)},  // late, stale write
			{base.Add(time.Second), base.Add(time.Second)}, // redelivery
			{base.Add(2 * time.Second), base.Add(2 * time.Second)},
		}
		for i, tc := range tests {
			if err := s.PutLastCrawl(ctx, "h.example", tc.put); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			got, err := s.LastCrawl(ctx, "h.example")
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if !got.Equal(tc.want) {
				t.Fatalf("step %d: after PutLastCrawl(%v) LastCrawl = %v, want %v", i, tc.put, got, tc.want)
			}
		}
		if _, err := s.LastCrawl(ctx, "H.example.other"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("LastCrawl of another host: %v, want ErrNotFound", err)
		}
	}},
	{"last crawl/batch keeps the later times", func(ctx context.Context, t *testing.T, s store.Store) {
		b, ok := s.(lastCrawlBatcher)
		if !ok {
			proctest.NotApplicable(t, "the "+s.Backend()+" store has no PutLastCrawls")
		}
		if err := s.PutLastCrawl(ctx, "old.example", base.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			name    string
			batch   map[string]time.Time
			wantErr bool
			want    map[string]time.Time // after the step; a zero time means absent
		}{
			{"empty batch", map[string]time.Time{}, false, map[string]time.Time{"old.example": base.Add(time.Hour), "a.example": {}}},
			{"new and older", map[string]time.Time{"a.example": base, "old.example": base},
				false, map[string]time.Time{"a.example": base, "old.example": base.Add(time.Hour)}},
			{"later wins, redelivery harmless", map[string]time.Time{"a.example": base.Add(time.Minute), "old.example": base.Add(2 * time.Hour)},
				false, map[string]time.Time{"a.example": base.Add(time.Minute), "old.example": base.Add(2 * time.Hour)}},
			{"redelivered", map[string]time.Time{"a.example": base.Add(time.Minute)},
				false, map[string]time.Time{"a.example": base.Add(time.Minute)}},
			{"empty host refused", map[string]time.Time{"": base, "b.example": base}, true, map[string]time.Time{"b.example": {}}},
		}
		for _, st := range steps {
			err := b.PutLastCrawls(ctx, st.batch)
			if (err != nil) != st.wantErr {
				t.Fatalf("%s: PutLastCrawls error %v, want error: %v", st.name, err, st.wantErr)
			}
			CheckLastCrawls(ctx, t, s, st.name, st.want)
		}
	}},
	{"fields/redelivered results from concurrent writers", func(ctx context.Context, t *testing.T, s store.Store) {
		// Several writers deliver the same results at once, as a
		// dispatcher's outbox does after a reconnect while a second
		// attempt of the same write is in flight: the outcome is the
		// results, once each.
		recs := sampleRecords()
		mustPut(ctx, t, s, recs)
		vals := []store.Value{
			value("email", "ada@one.example", 0, base),
			value("phone", "+1 555 0100", 1, base.Add(time.Second)),
		}
		vals[0].Conflicts = []store.Conflict{{Value: "x@y.example", Source: "https://y.example/", Depth: 2}}
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for range 6 {
			wg.Go(func() {
				for _, r := range recs {
					if err := s.SetFields(ctx, r.ID, vals); err != nil {
						errs <- err
						return
					}
				}
				// PutRecords again too: the record's input is the same,
				// and its found values must survive.
				if err := s.PutRecords(ctx, recs); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		want := withFound(recs)
		for i := range want {
			want[i].Found = map[string]store.Value{"email": vals[0], "phone": vals[1]}
		}
		assertRecords(t, all(ctx, t, s), want)
	}},
	{"unicode", func(ctx context.Context, t *testing.T, s store.Store) {
		r := store.Record{
			ID:  "José-🦀-ج",
			Seq: 1,
			Fields: map[string]string{
				"名前":            "李小龍",
				"adresse.ville": "Zürich",
				"$price":        "€ 12,50",
				"quote\"d":      "line1\nline2\t\"q\" \\ <b>&amp;</b>",
				"combining":     "e\u0301 Å \u200d 👩‍👩‍👧",
				"rtl":           "مرحبا بالعالم",
			},
			Order: []string{"名前", "adresse.ville", "$price", "quote\"d", "combining", "rtl"},
			Links: []string{"https://xn--bcher-kva.example/ä?q=ü#ß"},
		}
		mustPut(ctx, t, s, []store.Record{r})
		v := value("adresse.ville", "São Paulo 🌆", 0, base)
		v.Source = "https://ex.example/路径?q=é"
		v.Mapping = "mappé"
		v.Conflicts = []store.Conflict{{Value: "Zürich ✓", Source: "https://z.example/ü", Depth: 1}}
		mustSet(ctx, t, s, r.ID, v)
		mustPutRobots(ctx, t, s, "bücher.example", store.Robots{Status: 200, Body: []byte("# Ünïcödé comment\nUser-agent: *\n"), FetchedAt: base})
		if err := s.PutLastCrawl(ctx, "bücher.example", base); err != nil {
			t.Fatal(err)
		}

		want := r
		want.Found = map[string]store.Value{v.Field: v}
		assertRecords(t, all(ctx, t, s), []store.Record{want})
		got, err := s.Robots(ctx, "bücher.example")
		if err != nil {
			t.Fatal(err)
		}
		assertRobots(t, "bücher.example", got, store.Robots{Status: 200, Body: []byte("# Ünïcödé comment\nUser-agent: *\n"), FetchedAt: base})
		if at, err := s.LastCrawl(ctx, "bücher.example"); err != nil || !at.Equal(base) {
			t.Fatalf("LastCrawl(bücher.example) = %v, %v", at, err)
		}
	}},
}

// sampleRecords is a small input as the records reader produces it: a CSV
// record with an empty field, one with no links, one from JSON Lines with
// its own keys.
func sampleRecords() []store.Record {
	return []store.Record{
		{
			ID:     "1",
			Seq:    1,
			Fields: map[string]string{"id": "1", "name": "Ada", "email": "", "site": "https://one.example/"},
			Order:  []string{"id", "name", "email", "site"},
			Links:  []string{"https://one.example/"},
		},
		{
			ID:     "2",
			Seq:    2,
			Fields: map[string]string{"id": "2", "name": "Grace", "email": "", "site": ""},
			Order:  []string{"id", "name", "email", "site"},
		},
		{
			ID:     "line-3",
			Seq:    3,
			Fields: map[string]string{"name": "Edsger", "links": ""},
			Order:  []string{"name", "links"},
			Links:  []string{"https://three.example/a", "http://three.example/b"},
		},
	}
}

func rec(id string, seq int64) store.Record {
	return store.Record{ID: id, Seq: seq, Fields: map[string]string{"id": id}, Order: []string{"id"}}
}

func value(field, v string, depth int, at time.Time) store.Value {
	return store.Value{
		Field:   field,
		Value:   v,
		Source:  "https://src.example/" + field,
		Mapping: "people",
		Depth:   depth,
		At:      at,
	}
}

// withFound copies recs with Found cleared, as PutRecords must store them.
func withFound(recs []store.Record) []store.Record {
	out := make([]store.Record, len(recs))
	for i, r := range recs {
		r.Found = nil
		out[i] = r
	}
	return out
}

func mustPut(ctx context.Context, t *testing.T, s store.Store, recs []store.Record) {
	t.Helper()
	if err := s.PutRecords(ctx, recs); err != nil {
		t.Fatalf("PutRecords: %v", err)
	}
}

func mustSet(ctx context.Context, t *testing.T, s store.Store, id string, vals ...store.Value) {
	t.Helper()
	if err := s.SetFields(ctx, id, vals); err != nil {
		t.Fatalf("SetFields(%s): %v", id, err)
	}
}

func mustPutSoft404(ctx context.Context, t *testing.T, s store.Store, host string, v store.Soft404) {
	t.Helper()
	if err := s.PutSoft404(ctx, host, v); err != nil {
		t.Fatalf("PutSoft404(%s): %v", host, err)
	}
}

func mustPutRobots(ctx context.Context, t *testing.T, s store.Store, host string, r store.Robots) {
	t.Helper()
	if err := s.PutRobots(ctx, host, r); err != nil {
		t.Fatalf("PutRobots(%s): %v", host, err)
	}
}

func all(ctx context.Context, t *testing.T, s store.Store) []store.Record {
	t.Helper()
	var out []store.Record
	if err := s.Records(ctx, func(r store.Record) error { out = append(out, r); return nil }); err != nil {
		t.Fatalf("Records: %v", err)
	}
	return out
}

// normal puts a record in a canonical form: nil and empty collections are
// the same, times are UTC (Equal, not ==, is what backends promise).
func normal(r store.Record) store.Record {
	if len(r.Fields) == 0 {
		r.Fields = nil
	}
	if len(r.Order) == 0 {
		r.Order = nil
	}
	if len(r.Links) == 0 {
		r.Links = nil
	}
	if len(r.Raw) == 0 {
		r.Raw = nil
	}
	if len(r.Found) == 0 {
		r.Found = nil
	} else {
		found := make(map[string]store.Value, len(r.Found))
		for k, v := range r.Found {
			v.At = v.At.UTC()
			if len(v.Conflicts) == 0 {
				v.Conflicts = nil
			}
			if len(v.History) == 0 {
				v.History = nil
			} else {
				h := make([]store.Prior, len(v.History))
				for i, p := range v.History {
					p.At, p.Replaced = p.At.UTC(), p.Replaced.UTC()
					h[i] = p
				}
				v.History = h
			}
			found[k] = v
		}
		r.Found = found
	}
	return r
}

func assertRecords(t *testing.T, got, want []store.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d:\ngot  %s\nwant %s", len(got), len(want), ids(got), ids(want))
	}
	for i := range got {
		g, w := normal(got[i]), normal(want[i])
		if !reflect.DeepEqual(g, w) {
			t.Errorf("record %d:\ngot  %+v\nwant %+v", i, g, w)
		}
		for f, v := range got[i].Found {
			if v.Field != f {
				t.Errorf("record %s: Found[%q].Field = %q", got[i].ID, f, v.Field)
			}
		}
	}
}

func assertRobots(t *testing.T, host string, got, want store.Robots) {
	t.Helper()
	if got.Status != want.Status || !bytes.Equal(got.Body, want.Body) ||
		!got.FetchedAt.Equal(want.FetchedAt) || !got.Expires.Equal(want.Expires) {
		gb, wb := got.Body, want.Body
		if len(gb) > 64 {
			gb = gb[:64]
		}
		if len(wb) > 64 {
			wb = wb[:64]
		}
		t.Errorf("Robots(%s) = {%d %q… (%d bytes) %v %v}, want {%d %q… (%d bytes) %v %v}", host,
			got.Status, gb, len(got.Body), got.FetchedAt, got.Expires,
			want.Status, wb, len(want.Body), want.FetchedAt, want.Expires)
	}
}

func ids(recs []store.Record) string {
	s := make([]string, len(recs))
	for i, r := range recs {
		s[i] = r.ID
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}
