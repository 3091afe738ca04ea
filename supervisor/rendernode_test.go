package supervisor

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"backfill/wire"
)

// jsProfile is a profile page of the people mapping whose name and email
// are written into the DOM by a script after load: the static HTML has
// neither.
const jsProfile = `<!doctype html>
<html><head><title>Profile</title></head>
<body>
<div id="app">Loading…</div>
<script>
setTimeout(function () {
  var d = JSON.parse(document.getElementById('data').textContent);
  var app = document.getElementById('app');
  app.textContent = '';
  var h = document.createElement('h1'); h.className = 'name'; h.textContent = d.name; app.appendChild(h);
  var e = document.createElement('span'); e.className = 'email'; e.textContent = d.email; app.appendChild(e);
}, 30);
</script>
<script type="application/json" id="data">{"name": "Ada Rendered", "email": "ada@js.test"}</script>
</body></html>`

// TestRenderNode runs a supervisor with a browser: it advertises Render,
// loads Render tasks in the browser (robots.txt still first), fetches other
// tasks as they are, reports the browser's memory in heartbeats, and
// leaves no browser process behind.
func TestRenderNode(t *testing.T) {
	needBrowser(t)
	s := newSite(t, "jsnode.test", "User-agent: *\nDisallow: /private/\n", map[string]string{
		"/people/ada":     jsProfile,
		"/private/people": jsProfile,
	})
	d := newDispatcher(t, freeEndpoint(t))
	cfg := testConfig(t, d, s)
	cfg.Render = &RenderConfig{Tabs: 1, PageTimeout: 15 * time.Second, ResolveOnly: true}
	r := start(t, cfg)
	if r.sup.render == nil {
		t.Fatal("Config.Render set, but no renderer started")
	}
	r.sup.render.mu.Lock()
	dir := r.sup.render.cur.dir
	r.sup.render.mu.Unlock()

	h := register(t, d)
	if !h.Render {
		t.Error("Hello of a render node does not advertise Render")
	}
	send := func(id string, render bool, path string) {
		t.Helper()
		u := "http://jsnode.test" + path
		host, _ := taskHost(u)
		if err := d.out.Send(wire.KindTask, wire.Task{ID: id, Lease: 1, URL: u, Host: host, Render: render}, 5*time.Second); err != nil {
			t.Fatalf("send task %s: %v", id, err)
		}
	}
	send("rendered", true, "/people/ada")
	send("static", false, "/people/ada")
	send("blocked", true, "/private/people")
	got := d.collect(3, 45*time.Second)

	fields := func(res *wire.Result) map[string]string {
		m := map[string]string{}
		for _, f := range res.Fields {
			m[f.Name] = strings.Join(f.Values, "|")
		}
		return m
	}
	if res := got["rendered"]; res.Class != "" {
		t.Errorf("render task: class %q (%s), want none", res.Class, res.Error)
	} else if f := fields(res); f["name"] != "Ada Rendered" || f["email"] != "ada@js.test" {
		t.Errorf("render task fields %v, want the values the script wrote", f)
	}
	if res := got["static"]; res.Class != "" || len(res.Fields) != 0 || strings.Join(res.Mappings, ",") != "people" {
		t.Errorf("plain task: class %q, mappings %v, fields %v; want the people mapping matched with no field found",
			res.Class, res.Mappings, fields(res))
	}
	if res := got["blocked"]; res.Class != ClassRobots {
		t.Errorf("render task under /private/: class %q, want %q", res.Class, ClassRobots)
	}
	if s.requested("/private/people") {
		t.Error("the browser loaded a page robots.txt disallows")
	}

	deadline := time.After(10 * time.Second)
	for beat := false; !beat; {
		select {
		case hb := <-d.beats:
			if !hb.Render {
				t.Error("Heartbeat of a render node does not advertise Render")
			}
			beat = hb.RenderRSS > 0
		case <-deadline:
			t.Fatal("no heartbeat reported the browser's memory within 10s")
		}
	}
	if st := r.sup.Stats(); st.Render == nil || st.Render.Rendered != 1 || st.Render.PID == 0 {
		t.Errorf("Stats().Render = %+v, want one page rendered by a running browser", st.Render)
	}

	// The browser keeps its singleton socket in a directory of its own
	// under TMPDIR, linked from the profile.
	socket, err := os.Readlink(filepath.Join(dir, "SingletonSocket"))
	if err != nil {
		t.Fatalf("browser profile has no singleton socket link: %v", err)
	}
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(socket)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("browser's singleton directory %s left after Run returned (stat: %v)", filepath.Dir(socket), err)
	}
	if pids := profileProcs(dir); len(pids) > 0 {
		t.Errorf("browser processes left after Run returned: %v", pids)
	}
	for _, p := range readProcs() {
		if p.ppid == os.Getpid() {
			comm, _ := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/comm")
			t.Errorf("child process %d (%s, state %c) left after Run returned", p.pid, strings.TrimSpace(string(comm)), p.state)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("browser profile %s left after Run returned (stat: %v)", dir, err)
	}
}

// TestRenderConfigDefaults checks that a render node's browser takes the
// fetch settings it was not given.
func TestRenderConfigDefaults(t *testing.T) {
	fc := testConfig(t, newDispatcher(t, freeEndpoint(t))).Fetch
	fc.MaxBody = 12345
	rc := renderConfig(RenderConfig{}, fc, nil)
	if rc.UserAgent != fc.UserAgent || !rc.AllowLoopback || rc.MaxBody != 12345 {
		t.Errorf("renderConfig defaults = %+v, want the fetch config's user agent, loopback and body cap", rc)
	}
	own := RenderConfig{UserAgent: "other/1.0 (+https://other.example/)", Resolve: map[string]string{"a.test:80": "127.0.0.1:1"}, MaxBody: 7}
	rc = renderConfig(own, fc, nil)
	if rc.UserAgent != own.UserAgent || rc.MaxBody != 7 || rc.Resolve["a.test:80"] != "127.0.0.1:1" {
		t.Errorf("renderConfig overrode set fields: %+v", rc)
	}
}
