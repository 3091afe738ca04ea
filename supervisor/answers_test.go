package supervisor

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"backfill/wire"
)

func TestKeptAnswers(t *testing.T) {
	t.Parallel()
	sent := wire.Task{ID: "t1", Lease: 1, URL: "http://a.test/p", ETag: `"v1"`, LastModified: "Mon, 02 Jan 2006 15:04:05 GMT"}
	good := wire.Result{TaskID: "t1", Lease: 1, Supervisor: "sup", URL: sent.URL, Status: 200,
		Fields: []wire.Field{{Mapping: "m", Name: "email", Values: []string{"ann@a.test"}}}}
	again := func(change func(*wire.Task)) wire.Task {
		t := sent
		t.Lease = 2
		if change != nil {
			change(&t)
		}
		return t
	}
	for _, tc := range []struct {
		name  string
		kept  *wire.Result // what was answered to sent
		ask   wire.Task
		after time.Duration // time passed between the answer and ask
		want  bool
	}{
		{name: "match", kept: &good, ask: again(nil), want: true},
		{name: "match near the end of its time", kept: &good, ask: again(nil), after: answersTTL, want: true},
		{name: "different task", kept: &good, ask: again(func(t *wire.Task) { t.ID = "t2" })},
		{name: "different url", kept: &good, ask: again(func(t *wire.Task) { t.URL = "http://a.test/q" })},
		{name: "different render", kept: &good, ask: again(func(t *wire.Task) { t.Render = true })},
		{name: "different etag", kept: &good, ask: again(func(t *wire.Task) { t.ETag = `"v2"` })},
		{name: "different last-modified", kept: &good, ask: again(func(t *wire.Task) { t.LastModified = "" })},
		{name: "expired", kept: &good, ask: again(nil), after: answersTTL + time.Second},
		{name: "failure not kept", kept: &wire.Result{TaskID: "t1", Lease: 1, URL: sent.URL, Class: "timeout"}, ask: again(nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newAnswers(8, answersBytes, answersTTL)
			now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			a.now = func() time.Time { return now }
			a.keep(&sent, tc.kept)
			now = now.Add(tc.after)
			got := a.answer(&tc.ask)
			if (got != nil) != tc.want {
				t.Fatalf("answer(%+v) = %+v, want an answer: %v", tc.ask, got, tc.want)
			}
			if got == nil {
				return
			}
			if got.Lease != tc.ask.Lease {
				t.Errorf("answered under lease %d, want the asking task's %d", got.Lease, tc.ask.Lease)
			}
			want := good
			want.Lease = tc.ask.Lease
			if fmt.Sprint(*got) != fmt.Sprint(want) {
				t.Errorf("answer = %+v, want %+v", *got, want)
			}
		})
	}
}

func TestKeptAnswersBounded(t *testing.T) {
	t.Parallel()
	result := func(id string, valueBytes int) *wire.Result {
		return &wire.Result{TaskID: id, URL: "http://a.test/" + id,
			Fields: []wire.Field{{Mapping: "m", Name: "f", Values: []string{strings.Repeat("x", valueBytes)}}}}
	}
	for _, tc := range []struct {
		name       string
		maxN       int
		maxBytes   int64
		n          int // answers kept, task 0 first
		valueBytes int
		wantKept   []int // tasks still answered
		wantGone   []int
	}{
		{name: "count", maxN: 3, maxBytes: answersBytes, n: 5, valueBytes: 10, wantKept: []int{2, 3, 4}, wantGone: []int{0, 1}},
		{name: "bytes", maxN: 100, maxBytes: 3000, n: 5, valueBytes: 900, wantKept: []int{3, 4}, wantGone: []int{0, 1, 2}},
		{name: "answer over the byte bound", maxN: 100, maxBytes: 1000, n: 1, valueBytes: 2000, wantGone: []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newAnswers(tc.maxN, tc.maxBytes, answersTTL)
			task := func(i int) *wire.Task {
				id := fmt.Sprintf("t%d", i)
				return &wire.Task{ID: id, URL: "http://a.test/" + id}
			}
			for i := range tc.n {
				a.keep(task(i), result(task(i).ID, tc.valueBytes))
				if n, b := a.size(); n > tc.maxN || b > tc.maxBytes {
					t.Fatalf("after %d answers: %d kept in %d bytes, over %d and %d", i+1, n, b, tc.maxN, tc.maxBytes)
				}
			}
			for _, i := range tc.wantKept {
				if a.answer(task(i)) == nil {
					t.Errorf("task %d's answer was dropped", i)
				}
			}
			for _, i := range tc.wantGone {
				if a.answer(task(i)) != nil {
					t.Errorf("task %d's answer is still kept", i)
				}
			}
			a.clear()
			if n, b := a.size(); n != 0 || b != 0 {
				t.Errorf("after clear: %d answers in %d bytes", n, b)
			}
		})
	}
}

// TestTaskSentAgainNotFetchedAgain plays a dispatcher that restarted
// before committing a result: it sends the same task under a new lease,
// after the answer came or while the page is being fetched. The
// supervisor answers it from the answer it sent, and the site sees the
// page requested once.
func TestTaskSentAgainNotFetchedAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// during: the second lease comes while the page's request is
		// in progress, not after its answer.
		during bool
	}{
		{name: "after the answer"},
		{name: "while the page is fetched", during: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newSite(t, "a.test", "", map[string]string{"/people/ann": annPage})
			d := newDispatcher(t, "tcp://127.0.0.1:*")
			cfg := testConfig(t, d, a)
			r := start(t, cfg)
			register(t, d)
			const url = "http://a.test/people/ann"
			results := map[int64]*wire.Result{}
			if tc.during {
				asked, resume := make(chan struct{}), make(chan struct{})
				a.mu.Lock()
				var once sync.Once // a second request must not panic the site, only fail the test
				a.hold["/people/ann"] = func() { once.Do(func() { close(asked) }); <-resume }
				a.mu.Unlock()
				d.task("t-ann", 1, url)
				<-asked
				d.task("t-ann", 2, url)
				waitHeld(t, r.sup, 2)
				close(resume)
				for range 2 {
					select {
					case res := <-d.results:
						results[res.Lease] = res
					case <-time.After(10 * time.Second):
						t.Fatalf("got %d of 2 answers", len(results))
					}
				}
			} else {
				for _, lease := range []int64{1, 2} {
					d.task("t-ann", lease, url)
					results[lease] = d.collect(1, 10*time.Second)["t-ann"]
				}
			}
			for _, lease := range []int64{1, 2} {
				res := results[lease]
				if res == nil || res.Class != "" || len(res.Fields) == 0 {
					t.Errorf("lease %d answered %+v, want the page's fields", lease, res)
				}
			}
			pages := 0
			for _, h := range a.log() {
				if h.path == "/people/ann" {
					pages++
				}
			}
			if pages != 1 {
				t.Errorf("page requested %d times, want once: %s", pages, paths(a.log()))
			}
			if st := r.sup.Stats(); st.Fetched != 1 || st.Reanswered != 1 {
				t.Errorf("stats: fetched %d, reanswered %d; want 1 and 1", st.Fetched, st.Reanswered)
			}
		})
	}
}

// waitHeld waits until sup holds n tasks, queued or in progress.
func waitHeld(t *testing.T, sup *Supervisor, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for sup.Stats().InFlight < n {
		if time.Now().After(deadline) {
			t.Fatalf("the supervisor holds %d tasks, want %d", sup.Stats().InFlight, n)
		}
		<-tick.C
	}
}

// TestAnswersSentAgainOnWelcome plays a dispatcher that restarted: its
// Welcome makes the supervisor send again, under its first lease, the
// answer it sent the dispatcher before, with no request to the site.
func TestAnswersSentAgainOnWelcome(t *testing.T) {
	t.Parallel()
	a := newSite(t, "a.test", "", map[string]string{"/people/ann": annPage})
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	r := start(t, testConfig(t, d, a))
	h := register(t, d)

	d.task("t-ann", 1, "http://a.test/people/ann")
	first := d.collect(1, 10*time.Second)["t-ann"]
	before := len(a.log())
	if err := d.out.Send(wire.KindWelcome, wire.Welcome{Dispatcher: "test", Run: "run-1"}, 5*time.Second); err != nil {
		t.Fatalf("send welcome again to %s: %v", h.Endpoint, err)
	}
	again := d.collect(1, 10*time.Second)["t-ann"]
	if again.Lease != 1 || fmt.Sprint(again.Fields) != fmt.Sprint(first.Fields) {
		t.Errorf("sent again: %+v, want the first answer %+v", again, first)
	}
	if n := len(a.log()); n != before {
		t.Errorf("the site got %d requests more: %s", n-before, paths(a.log()))
	}
	if st := r.sup.Stats(); st.Resent != 1 {
		t.Errorf("stats: resent %d, want 1", st.Resent)
	}
}
