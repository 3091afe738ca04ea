package dispatcher

import (
	"context"
	"testing"
	"time"

	"backfill/wire"
)

// jsPage is what a test supervisor answers for a page: static is the
// fetched HTML's fields, rendered the DOM's after its scripts ran; jsOnly
// is the HTML's JavaScript-shell sign (etl.JSOnly); mappings are those
// that matched it, the profile mapping when nil.
type jsPage struct {
	static, rendered []wire.Field
	jsOnly           bool
	mappings         []string
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
				if task.Render && !s.Hello.Render {
					t.Errorf("render task %s sent to %s, which does not render", task.URL, s.Hello.Supervisor)
				}
				p := web[task.URL]
				mappings := p.mappings
				if mappings == nil {
					mappings = []string{"profile"}
				}
				res := wire.Result{TaskID: task.ID, Lease: task.Lease, Supervisor: s.Hello.Supervisor, URL: task.URL,
					Status: 200, FetchedAt: time.Now(), Mappings: mappings, Fields: p.static, JSOnly: p.jsOnly}
				if task.Render {
					res.Fields, res.JSOnly = p.rendered, false
				}
				if err := s.Out.Send(wire.KindResult, res, time.Second); err != nil {
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

// TestRenderRetry checks the retry of pages whose HTML is a JavaScript
// shell that left the matching mapping empty-handed: sent again once as a
// render task when a render-capable supervisor is a member, counted as
// render-wanted when none is, and never retried when the page's HTML is
// not a shell.
func TestRenderRetry(t *testing.T) {
	const (
		jsOnly  = "https://js.example/people/ada"  // data written by JavaScript
		jsEmpty = "https://js.example/people/bo"   // nothing even when rendered
		static  = "https://st.example/people/cy"   // name in the HTML, no email
		done    = "https://done.example/people/di" // fields in the HTML
	)
	web := map[string]jsPage{
		jsOnly:  {rendered: []wire.Field{fld("name", "Ada"), fld("email", "ada@js.example")}, jsOnly: true},
		jsEmpty: {jsOnly: true},
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
					t.Fatalf("no welcome for %s", s.Hello.Supervisor)
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

// mf is a field value found by the named mapping.
func mf(mapping, name, value string) wire.Field {
	return wire.Field{Mapping: mapping, Name: name, Values: []string{value}, Match: name == "name"}
}

// TestRenderOnlyWhenNeeded: five mappings share the /folks/ URL pattern
// (testdata/mappings/folks.json), so on every such page four of them find
// nothing. A page is rendered only when its HTML is a JavaScript shell and
// a record that wants it still lacks a field a matching auto mapping could
// find; a page whose HTML filled the record, or that is not a shell, or
// whose mapping says render never, is not.
func TestRenderOnlyWhenNeeded(t *testing.T) {
	folks := []string{"folks-list", "folks-table", "folks-prose", "folks-js", "folks-ld"}
	const (
		list    = "https://a.example/folks/ada" // list layout: the HTML fills the record
		table   = "https://b.example/folks/bo"  // table layout: the HTML has the name, no email anywhere
		shell   = "https://c.example/folks/cy"  // JavaScript layout: a shell until rendered
		ldShell = "https://d.example/folks/di"  // looks like a shell, but its JSON-LD filled the record
		kiosk   = "https://e.example/kiosk/eve" // a shell, but its mapping says never
		prose   = "https://f.example/folks/fay" // prose layout: the HTML fills the record
		partial = "https://g.example/folks/gus" // a shell whose title gave the name, not the email
	)
	web := map[string]jsPage{
		list:    {static: []wire.Field{mf("folks-list", "name", "Ada"), mf("folks-list", "email", "ada@a.example")}, mappings: folks},
		table:   {static: []wire.Field{mf("folks-table", "name", "Bo")}, mappings: folks},
		shell:   {rendered: []wire.Field{mf("folks-js", "name", "Cy"), mf("folks-js", "email", "cy@c.example")}, jsOnly: true, mappings: folks},
		ldShell: {static: []wire.Field{mf("folks-ld", "email", "di@d.example")}, jsOnly: true, mappings: folks},
		kiosk:   {rendered: []wire.Field{mf("kiosk", "email", "eve@e.example")}, jsOnly: true, mappings: []string{"kiosk"}},
		prose:   {static: []wire.Field{mf("folks-prose", "email", "fay@f.example")}, mappings: folks},
		partial: {static: []wire.Field{mf("folks-js", "name", "Gus")}, rendered: []wire.Field{mf("folks-js", "name", "Gus"), mf("folks-js", "email", "gus@g.example")},
			jsOnly: true, mappings: folks},
	}
	records := csvOf("id,name,email,links", "r1,Ada,,"+list, "r2,Bo,,"+table, "r3,Cy,,"+shell, "r4,Di,,"+ldShell,
		"r5,Eve,,"+kiosk, "r6,Fay,,"+prose, "r7,Gus,,"+partial)
	e := newEnv(t, t.TempDir(), func(c *Config) { c.Fields = []string{"email"} })
	e.load("r.csv", records)
	sup := newSup(t, "render", e.d.Endpoint(), 8, true, e.set.Digest())
	e.run(context.Background())
	if !sup.join(5 * time.Second) {
		t.Fatal("no welcome")
	}
	tasks := playJS(t, e, []*testSup{sup}, web, 20*time.Second)

	rendered := map[string]int{}
	for _, task := range tasks {
		if task.Render {
			rendered[task.URL]++
		}
	}
	want := map[string]int{shell: 1, partial: 1}
	for u := range web {
		if rendered[u] != want[u] {
			t.Errorf("%s rendered %d times, want %d", u, rendered[u], want[u])
		}
	}
	wantEmail := map[string]string{"r1": "ada@a.example", "r3": "cy@c.example", "r4": "di@d.example", "r6": "fay@f.example", "r7": "gus@g.example"}
	recs := e.records()
	for _, id := range []string{"r1", "r2", "r3", "r4", "r5", "r6", "r7"} {
		if got := recs[id].Found["email"].Value; got != wantEmail[id] {
			t.Errorf("record %s email %q, want %q", id, got, wantEmail[id])
		}
	}
	if e.sum.RenderRetried != 2 || e.sum.RenderWanted != 0 {
		t.Errorf("summary render retried %d, wanted %d; want 2 and 0", e.sum.RenderRetried, e.sum.RenderWanted)
	}
}

// TestRenderLateRecord: a shell fetched for a record that lacked nothing
// a rendering could give is not rendered; a record that reaches it later
// (here in a second run on the same state), and gets its cached static
// result, has it rendered then, once.
func TestRenderLateRecord(t *testing.T) {
	const shell = "https://js.example/people/bo"
	web := map[string]jsPage{
		shell: {rendered: []wire.Field{fld("name", "Bo"), fld("email", "bo@js.example")}, jsOnly: true},
	}
	dir := t.TempDir()
	runOnce := func(name, records string) ([]wire.Task, *env) {
		t.Helper()
		e := newEnv(t, dir, func(c *Config) { c.Fields = []string{"email", "phone"} })
		e.load(name, records)
		sup := newSup(t, "render-"+name, e.d.Endpoint(), 8, true, e.set.Digest())
		e.run(context.Background())
		if !sup.join(5 * time.Second) {
			t.Fatal("no welcome")
		}
		tasks := playJS(t, e, []*testSup{sup}, web, 20*time.Second)
		e.close()
		return tasks, e
	}
	// r1 knows Bo's email and lacks only a phone, which no mapping of the
	// page gives.
	tasks, e := runOnce("r1.csv", csvOf("id,name,email,phone,links", "r1,Bo,bo@js.example,,"+shell))
	if len(tasks) != 1 || tasks[0].URL != shell || tasks[0].Render {
		t.Fatalf("run 1 tasks %+v, want one static fetch of the shell", tasks)
	}
	if e.sum.RenderRetried != 0 {
		t.Errorf("run 1 rendered %d pages, want none", e.sum.RenderRetried)
	}
	// r2 lacks Bo's email: the cached shell is rendered for it.
	tasks, e = runOnce("r2.csv", csvOf("id,name,email,phone,links", "r2,Bo,,,"+shell))
	if len(tasks) != 1 || tasks[0].URL != shell || !tasks[0].Render {
		t.Fatalf("run 2 tasks %+v, want one render of the shell", tasks)
	}
	if e.sum.RenderRetried != 1 {
		t.Errorf("run 2 rendered %d pages, want 1", e.sum.RenderRetried)
	}
}
