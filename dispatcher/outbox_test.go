package dispatcher

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/store"
	"backfill/store/mongotest"
)

// enqueueValues writes one record's values into the outbox, as flush
// does for many. Callers hold mu, inside the state transaction.
func (d *Dispatcher) enqueueValues(ctx context.Context, id string, vals []store.Value) error {
	rows := make([]outboxRow, len(vals))
	for i, v := range vals {
		rows[i] = outboxRow{id: id, v: v}
	}
	return d.enqueue(ctx, rows)
}

// faultyStore is a real store with a fault injector in front of SetFields:
// it fails the next fails calls, or every call while down is set, as a
// store whose connection drops does.
type faultyStore struct {
	store.Store
	fails  atomic.Int64
	down   atomic.Bool
	failed atomic.Int64
}

var errInjected = fmt.Errorf("%w: injected fault: connection reset", store.ErrUnavailable)

func (f *faultyStore) SetFields(ctx context.Context, id string, vals []store.Value) error {
	if f.down.Load() || f.fails.Add(-1) >= 0 {
		f.failed.Add(1)
		return errInjected
	}
	return f.Store.SetFields(ctx, id, vals)
}

// crawlPeople runs the crawl of TestCrawl on e and returns what the store
// holds afterwards.
func crawlPeople(t *testing.T, e *env) map[string]map[string]store.Value {
	t.Helper()
	e.load("people.csv", crawlRecords)
	sups := e.runWithTwo()
	crawl(t, e, sups, crawlWeb(), 30*time.Second)
	if e.err != nil {
		t.Fatalf("Run: %v", e.err)
	}
	return foundIn(t, e.st)
}

// foundIn is every found value in st, times left out (they are when the
// value was merged, which differs between runs).
func foundIn(t *testing.T, st store.Records) map[string]map[string]store.Value {
	t.Helper()
	out := map[string]map[string]store.Value{}
	err := st.Records(context.Background(), func(r store.Record) error {
		out[r.ID] = map[string]store.Value{}
		for f, v := range r.Found {
			v.At = time.Time{}
			out[r.ID][f] = v
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	baselineOnce sync.Once
	baseline     map[string]map[string]store.Value
)

// cleanCrawl is what the crawl stores with a store that never fails.
func cleanCrawl(t *testing.T) map[string]map[string]store.Value {
	t.Helper()
	baselineOnce.Do(func() {
		e := newEnv(t, t.TempDir(), func(c *Config) { c.Fields = []string{"email", "title", "phone"} })
		baseline = crawlPeople(t, e)
		if e.sum.StoreRetried != 0 || e.sum.StorePending != 0 || e.sum.StoreWritten == 0 {
			t.Errorf("clean crawl: store written %d, retried %d, pending %d", e.sum.StoreWritten, e.sum.StoreRetried, e.sum.StorePending)
		}
	})
	if len(baseline) == 0 {
		t.Fatal("the clean crawl stored nothing")
	}
	return baseline
}

// TestOutboxRetriesFailedWrites fails the store's first writes: the crawl
// goes on, the writes are retried, and the store ends as after a crawl
// whose store never failed.
func TestOutboxRetriesFailedWrites(t *testing.T) {
	want := cleanCrawl(t)
	for _, fails := range []int64{1, 4} {
		t.Run(fmt.Sprintf("%d failures", fails), func(t *testing.T) {
			var fs *faultyStore
			e := newEnv(t, t.TempDir(), func(c *Config) {
				c.Fields = []string{"email", "title", "phone"}
				fs = &faultyStore{Store: c.Store}
				fs.fails.Store(fails)
				c.Store = fs
			})
			got := crawlPeople(t, e)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("store after failures:\n%v\nwant\n%v", got, want)
			}
			if fs.failed.Load() != fails {
				t.Errorf("%d writes failed, want %d", fs.failed.Load(), fails)
			}
			if e.sum.StoreRetried != fails || e.sum.StorePending != 0 || e.sum.StoreRefused != 0 {
				t.Errorf("summary: store retried %d, pending %d, refused %d; want %d, 0, 0",
					e.sum.StoreRetried, e.sum.StorePending, e.sum.StoreRefused, fails)
			}
		})
	}
}

// TestOutboxKeepsWhatTheStoreDidNotTake has the store down for the whole
// crawl: the crawl finishes, Run waits the drain timeout and reports the
// values pending, and a dispatcher started again on the same state pushes
// them once the store is back.
func TestOutboxKeepsWhatTheStoreDidNotTake(t *testing.T) {
	want := cleanCrawl(t)
	dir := t.TempDir()
	var fs *faultyStore
	e := newEnv(t, dir, func(c *Config) {
		c.Fields = []string{"email", "title", "phone"}
		c.StoreDrainTimeout = 300 * time.Millisecond
		fs = &faultyStore{Store: c.Store}
		fs.down.Store(true)
		c.Store = fs
	})
	got := crawlPeople(t, e)
	for id, f := range got {
		if len(f) > 0 {
			t.Errorf("record %s has values in a store that was down: %v", id, f)
		}
	}
	pending := e.sum.StorePending
	if pending == 0 || e.sum.StoreWritten != 0 || e.sum.StoreRetried == 0 {
		t.Fatalf("summary: store pending %d, written %d, retried %d; want some pending, none written, some retried",
			pending, e.sum.StoreWritten, e.sum.StoreRetried)
	}
	if err := e.d.Close(); err != nil {
		t.Fatal(err)
	}

	// The store is back; a new dispatcher on the same state pushes what
	// was left, though nothing is crawled.
	fs.down.Store(false)
	d, err := New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.d = d
	e.run(context.Background())
	select {
	case <-e.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the second Run did not finish")
	}
	if e.err != nil {
		t.Fatal(e.err)
	}
	if e.sum.StoreWritten != int64(pending) || e.sum.StorePending != 0 {
		t.Errorf("second run: store written %d, pending %d; want %d, 0", e.sum.StoreWritten, e.sum.StorePending, pending)
	}
	if got := foundIn(t, e.st); !reflect.DeepEqual(got, want) {
		t.Errorf("store after the second run:\n%v\nwant\n%v", got, want)
	}
}

// TestOutboxRefusedRecord: a record the store does not have is set aside
// (not retried in a loop, not holding up the others) and counted.
func TestOutboxRefusedRecord(t *testing.T) {
	e := newEnv(t, t.TempDir(), func(c *Config) { c.Fields = []string{"email", "title", "phone"} })
	e.d.mu.Lock()
	err := func() error {
		if err := e.d.st.begin(context.Background()); err != nil {
			return err
		}
		if err := e.d.enqueueValues(context.Background(), "ghost", []store.Value{{Field: "email", Value: "g@ghost.example"}}); err != nil {
			return err
		}
		return e.d.st.commit(context.Background())
	}()
	e.d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	got := crawlPeople(t, e)
	if got["r1"]["email"].Value != "ann@a.example" {
		t.Errorf("r1.email = %+v; the refused record held up the others", got["r1"]["email"])
	}
	if e.sum.StoreRefused != 1 || e.sum.StorePending != 0 || e.sum.StoreRetried != 0 {
		t.Errorf("summary: store refused %d, pending %d, retried %d; want 1, 0, 0", e.sum.StoreRefused, e.sum.StorePending, e.sum.StoreRetried)
	}
}

// TestOutboxMongoOutage crawls into the MongoDB store of an embedded
// MongoDB-protocol server that is stopped after the records are loaded
// and started again once the outbox has retried: nothing is lost.
func TestOutboxMongoOutage(t *testing.T) {
	proctest.Short(t, "starts an embedded MongoDB-protocol server")
	want := cleanCrawl(t)
	srv, err := mongotest.Start(t.TempDir(), mongotest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ms, err := store.OpenWith(context.Background(), srv.DatabaseURI(mongotest.DatabaseName(t)),
		store.Options{Timeout: 300 * time.Millisecond, RetryFor: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Fields = []string{"email", "title", "phone"}
		c.StoreDrainTimeout = time.Minute
		c.Store.Close() // the harness's SQLite store: this test uses MongoDB
		c.Store = ms
	})
	e.st = ms
	e.load("people.csv", crawlRecords)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(time.Minute)
		for e.d.ob.retried.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // polling a counter with a deadline
		}
		restarted <- srv.Restart()
	}()
	sups := e.runWithTwo()
	crawl(t, e, sups, crawlWeb(), time.Minute)
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	if e.err != nil {
		t.Fatalf("Run: %v", e.err)
	}
	if e.sum.StoreRetried == 0 || e.sum.StorePending != 0 {
		t.Errorf("summary: store retried %d, pending %d; want some retried, none pending", e.sum.StoreRetried, e.sum.StorePending)
	}
	if got := foundIn(t, ms); !reflect.DeepEqual(got, want) {
		t.Errorf("MongoDB store after the outage:\n%v\nwant\n%v", got, want)
	}
}

// cancelStore takes a SetFields and then cancels the outbox's context, as
// the end of a Run does while a push is under way.
type cancelStore struct {
	store.Store
	cancel context.CancelFunc
}

func (c *cancelStore) SetFields(ctx context.Context, id string, vals []store.Value) error {
	err := c.Store.SetFields(ctx, id, vals)
	c.cancel()
	return err
}

// TestOutboxStopsQuietly checks that the end of a Run, cancelling the
// outbox while it pushes, logs no error and still acknowledges what the
// store took: a clean shutdown logs no error.
func TestOutboxStopsQuietly(t *testing.T) {
	var logs bytes.Buffer
	cs := &cancelStore{}
	e := newEnv(t, t.TempDir(), func(c *Config) {
		cs.Store = c.Store
		c.Store = cs
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	e.load("people.csv", csvOf("id,name,email", "1,Ada,"))
	ctx, cancel := context.WithCancel(context.Background())
	cs.cancel = cancel
	e.d.mu.Lock()
	err := e.d.inTx(context.Background(), func(ctx context.Context) error {
		return e.d.enqueueValues(ctx, "1", []store.Value{{Field: "email", Value: "ada@x.example", Mapping: "people", At: time.Now()}})
	})
	e.d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	e.d.kickOutbox()
	e.d.runOutbox(ctx)
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("the outbox logged an error when stopped:\n%s", logs.String())
	}
	pending, refused, err := e.d.outboxCounts(context.Background())
	if err != nil || pending != 0 || refused != 0 {
		t.Errorf("outbox after the store took the value: %d pending, %d refused, %v", pending, refused, err)
	}
}
