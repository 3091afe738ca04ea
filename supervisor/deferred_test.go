package supervisor

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"backfill/wire"
)

// TestDeferredUntilHostReady: a task whose host must wait longer than
// deferAfter after its robots.txt is handed back unfetched, with the
// host's pace; sent again just before the host is ready (as the
// dispatcher does, half a second ahead) it is fetched. A task whose wait
// is short is held and fetched.
func TestDeferredUntilHostReady(t *testing.T) {
	t.Parallel()
	const lead = 500 * time.Millisecond // the dispatcher's
	cases := []struct {
		name    string
		delay   time.Duration
		classes []string // of the answers to each send, in order
	}{
		{"long delay", deferAfter + time.Second, []string{wire.ClassDeferred, ""}},
		{"short delay", deferAfter / 4, []string{""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSite(t, "a.test", "", map[string]string{"/people/1": annPage})
			d := newDispatcher(t, "tcp://127.0.0.1:*")
			cfg := testConfig(t, d, s)
			cfg.DefaultDelay = tc.delay
			r := start(t, cfg)
			register(t, d)
			var next <-chan time.Time // when to send again
			for i, want := range tc.classes {
				if next != nil {
					<-next
				}
				d.task(fmt.Sprint(i), 1, "http://a.test/people/1")
				var res *wire.Result
				select {
				case res = <-d.results:
				case <-time.After(20 * time.Second):
					t.Fatalf("send %d: no result", i)
				}
				got := time.Now()
				if res.Class != want {
					t.Fatalf("send %d: class %q (%s), want %q", i, res.Class, res.Error, want)
				}
				if res.Class != wire.ClassDeferred {
					continue
				}
				// The host is ready one delay after its robots.txt: the
				// answer says so.
				if res.Delay != tc.delay || res.Ready <= deferAfter || res.Ready > tc.delay {
					t.Errorf("send %d: delay %v, ready in %v; want %v, ready past %v", i, res.Delay, res.Ready, tc.delay, deferAfter)
				}
				next = time.After(time.Until(got.Add(res.Ready - lead)))
			}
			var asked []string
			for _, h := range s.log() {
				asked = append(asked, h.path)
			}
			if want := []string{"/robots.txt", "/people/1"}; !slices.Equal(asked, want) {
				t.Errorf("requests %q, want %q", asked, want)
			}
			for i, g := range gaps(s.log()) {
				if g < tc.delay {
					t.Errorf("gap %d between request arrivals %v, want at least %v", i, g, tc.delay)
				}
			}
			wantDeferred := int64(slices.Index(tc.classes, ""))
			if st := r.sup.Stats(); st.Deferred != wantDeferred {
				t.Errorf("%d tasks handed back, want %d", st.Deferred, wantDeferred)
			}
		})
	}
}
