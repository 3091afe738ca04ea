package dispatcher

import (
	"context"
	"testing"
	"time"

	"backfill/wire"
)

// jsPage is what a test supervisor answers for a page of the profile
// mapping: static is the fetched HTML's fields, rendered the DOM's after
// its scripts ran. The profile mapping matches every such page.
type jsPage struct {
	static, rendered []wire.Field
}

// playJS answers every task the supervisors get, as the profile mapping
// would find the page statically or rendered, until Run returns. It
// returns the tasks received, in order.
func playJS(t *testing.T, e *env, sups []*testSup, web map[string]jsPage, timeout time.Duration) []wire.Task {
	t.Helper()
	var got []wire.Task
	deadline := time.Now().Add(timeout)
	for !e.finished() {
		if time.Now().After(deadline) {
			t.Fatalf("dispatcher still running after %v", timeout)
		}
		for _, s := range sups {
			s.poll(10 * time.Millisecond)
			for _, task := range s.held {
				got = append(got, task)
				if task.Render && !s.hello.Render {
					t.Errorf("render task %s sent to %s, which does not render", task.URL, s.hello.Supervisor)
				}
				p := web[task.URL]
				res := wire.Result{TaskID: task.ID, Lease: task.Lease, Supervisor: s.hello.Supervisor, URL: task.URL,
					Status: 200, FetchedAt: time.Now(), Mappings: []string{"profile"}, Fields: p.static}
				if task.Render {
					res.Fields = p.rendered
				}
				if err := s.send.Send(wire.KindResult, res, time.Second); err != nil {
					t.Fatal(err)
				}
			}
			s.held = nil
		}
	}
	if e.err != nil {
		t.Fatalf("Run: %v", e.err)
	}
	return got
}

// TestRenderRetry checks the retry of pages whose static HTML left the
// matching mapping empty-handed: sent again once as a render task when a
// render-capable supervisor is a member, counted as render-wanted when
// none is, and never retried when the static page gave a field.
func TestRenderRetry(t *testing.T) {
	const (
		jsOnly  = "https://js.example/people/ada"  // data written by JavaScript
		jsEmpty = "https://js.example/people/bo"   // nothing even when rendered
		static  = "https://st.example/people/cy"   // name in the HTML, no email
		done    = "https://done.example/people/di" // fields in the HTML
	)
	web := map[string]jsPage{
		jsOnly:  {rendered: []wire.Field{fld("name", "Ada"), fld("email", "ada@js.example")}},
		jsEmpty: {},
		static:  {static: []wire.Field{fld("name", "Cy")}, rendered: []wire.Field{fld("name", "Cy"), fld("email", "cy@st.example")}},
		done:    {static: []wire.Field{fld("name", "Di"), fld("email", "di@done.example")}},
	}
	records := csvOf("id,name,email,links", "r1,Ada,,"+jsOnly, "r2,Bo,,"+jsEmpty, "r3,Cy,,"+static, "r4,Di,,"+done)

	for _, tc := range []struct {
		name         string
		render       bool
		wantRender   []string // URLs sent as render tasks
		wantEmail    map[string]string
		retried, wan int64
	}{
		{"render node present", true, []string{jsOnly, jsEmpty},
			map[string]string{"r1": "ada@js.example", "r4": "di@done.example"}, 2, 0},
		{"no render node", false, nil,
			map[string]string{"r4": "di@done.example"}, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, t.TempDir(), func(c *Config) {
				c.Fields = []string{"email"}
				c.Expect = 2
			})
			e.load("r.csv", records)
			digest := e.set.Digest()
			sups := []*testSup{
				newSup(t, "plain", e.d.Endpoint(), 8, false, digest),
				newSup(t, "other", e.d.Endpoint(), 8, tc.render, digest),
			}
			e.run(context.Background())
			for _, s := range sups {
				if !s.join(5 * time.Second) {
					t.Fatalf("no welcome for %s", s.hello.Supervisor)
				}
			}
			tasks := playJS(t, e, sups, web, 20*time.Second)

			static, rendered := map[string]int{}, map[string]int{}
			for _, task := range tasks {
				if task.Render {
					rendered[task.URL]++
				} else {
					static[task.URL]++
				}
			}
			for u := range web {
				if static[u] != 1 {
					t.Errorf("%s fetched statically %d times, want once", u, static[u])
				}
			}
			for _, u := range tc.wantRender {
				if rendered[u] != 1 {
					t.Errorf("%s sent to render %d times, want once", u, rendered[u])
				}
			}
			if len(rendered) != len(tc.wantRender) {
				t.Errorf("render tasks %v, want one each for %v", rendered, tc.wantRender)
			}
			recs := e.records()
			for _, id := range []string{"r1", "r2", "r3", "r4"} {
				if got := recs[id].Found["email"].Value; got != tc.wantEmail[id] {
					t.Errorf("record %s email %q, want %q", id, got, tc.wantEmail[id])
				}
			}
			if e.sum.RenderRetried != tc.retried || e.sum.RenderWanted != tc.wan {
				t.Errorf("summary render retried %d, wanted %d; want %d and %d", e.sum.RenderRetried, e.sum.RenderWanted, tc.retried, tc.wan)
			}
		})
	}
}
