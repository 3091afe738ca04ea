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

// jsShell is a profile page of the people mapping written by a script:
// its HTML has neither name nor email. The script (jsApp, shared by every
// profile) loads the name from the page's own host, the email from
// api.test, and asks for data robots.txt disallows; the page also asks for
// a stylesheet, an image and a font, and the browser for its favicon.
func jsShell(slug string) string {
	return `<!doctype html>
<html><head><title>Profile</title><link rel="stylesheet" href="/style.css">
<style>@font-face { font-family: P; src: url(/font.woff2); } body { font-family: P; }</style></head>
<body data-slug="` + slug + `">
<div id="app">Loading…</div>
<img src="/img/` + slug + `.png">
<script src="/app.js"></script>
</body></html>`
}

const jsApp = `var slug = document.body.dataset.slug, app = document.getElementById('app');
app.textContent = '';
fetch('/api/' + slug + '.json').then(function (r) { return r.json(); }).then(function (d) {
  var h = document.createElement('h1'); h.className = 'name'; h.textContent = d.name; app.appendChild(h);
});
fetch('http://api.test/people/' + slug + '.json').then(function (r) { return r.json(); }).then(function (d) {
  var e = document.createElement('span'); e.className = 'email'; e.textContent = d.email; app.appendChild(e);
});
fetch('/private/` + `salaries.json').catch(function () {});`

// TestRenderNode runs a supervisor with a browser against two hosts and
// checks from the hosts' request logs that every request a rendered page
// causes goes through the host's politeness: robots.txt first, the delay
// between any two requests to a host, nothing requested twice (the page's
// HTML fetched once, its static fetch's reused; the shared script once),
// no resource kind the mappings do not allow (favicon, image, font,
// stylesheet) requested at all, nothing robots.txt disallows requested.
// The rendered pages yield the values their scripts load from both hosts;
// the static fetch of a shell says it looks like one. The node advertises
// Render, reports the browser's memory, and leaves no browser process
// behind.
func TestRenderNode(t *testing.T) {
	needBrowser(t)
	web := newSite(t, "jsnode.test", "User-agent: *\nDisallow: /private/\n", map[string]string{
		"/people/ada":            jsShell("ada"),
		"/people/bo":             jsShell("bo"),
		"/private/people":        jsShell("cy"),
		"/app.js":                jsApp,
		"/api/ada.json":          `{"name": "Ada Rendered"}`,
		"/api/bo.json":           `{"name": "Bo Rendered"}`,
		"/private/salaries.json": `{"secret": 1}`,
		"/style.css":             `body { color: black }`,
		"/img/ada.png":           "png",
		"/img/bo.png":            "png",
		"/font.woff2":            "font",
		"/favicon.ico":           "icon",
	})
	api := newSite(t, "api.test", "", map[string]string{
		"/people/ada.json": `{"email": "ada@js.test"}`,
		"/people/bo.json":  `{"email": "bo@js.test"}`,
	})
	d := newDispatcher(t, freeEndpoint(t))
	cfg := testConfig(t, d, web, api)
	const delay = 250 * time.Millisecond
	cfg.DefaultDelay = delay
	cfg.Render = &RenderConfig{Tabs: 2, PageTimeout: 15 * time.Second}
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
	// ada is fetched, then rendered from the HTML that fetch got; bo is
	// rendered straight away (as a mapping with render always has it).
	send("static", false, "/people/ada")
	send("rendered", true, "/people/ada")
	send("bo", true, "/people/bo")
	send("blocked", true, "/private/people")
	got := d.collect(4, 60*time.Second)

	fields := func(res *wire.Result) map[string]string {
		m := map[string]string{}
		for _, f := range res.Fields {
			m[f.Name] = strings.Join(f.Values, "|")
		}
		return m
	}
	if res := got["static"]; res.Class != "" || len(res.Fields) != 0 || strings.Join(res.Mappings, ",") != "people" || !res.JSOnly {
		t.Errorf("plain task: class %q, mappings %v, fields %v, js-only %v; want the people mapping matched with no field found on a shell",
			res.Class, res.Mappings, fields(res), res.JSOnly)
	}
	for id, want := range map[string][2]string{"rendered": {"Ada Rendered", "ada@js.test"}, "bo": {"Bo Rendered", "bo@js.test"}} {
		res := got[id]
		if res.Class != "" {
			t.Errorf("render task %s: class %q (%s), want none", id, res.Class, res.Error)
		} else if f := fields(res); f["name"] != want[0] || f["email"] != want[1] {
			t.Errorf("render task %s fields %v, want the values the script loaded from both hosts", id, f)
		}
		if res.JSOnly {
			t.Errorf("render task %s says js-only: only a static fetch does", id)
		}
	}
	if res := got["blocked"]; res.Class != ClassRobots {
		t.Errorf("render task under /private/: class %q, want %q", res.Class, ClassRobots)
	}

	for _, s := range []*site{web, api} {
		hits := s.log()
		seen := map[string]int{}
		for _, h := range hits {
			seen[h.path]++
			if h.ua != testUA {
				t.Errorf("%s%s requested with User-Agent %q, want %q", s.name, h.path, h.ua, testUA)
			}
			if strings.HasPrefix(h.path, "/private/") {
				t.Errorf("%s%s requested: robots.txt disallows it", s.name, h.path)
			}
			for _, blocked := range []string{"/favicon.ico", "/img/", "/font.woff2", "/style.css"} {
				if strings.HasPrefix(h.path, blocked) {
					t.Errorf("%s%s requested: no mapping allows that kind of resource", s.name, h.path)
				}
			}
		}
		for p, n := range seen {
			if n > 1 {
				t.Errorf("%s%s requested %d times, want once", s.name, p, n)
			}
		}
		for i, g := range gaps(hits) {
			if g < delay {
				t.Errorf("%s: %v between requests %d and %d, delay %v (requests: %s)", s.name, g, i, i+1, delay, paths(hits))
			}
		}
		if len(hits) == 0 || hits[0].path != "/robots.txt" {
			t.Errorf("%s: first request %q, want robots.txt (requests: %s)", s.name, paths(hits), paths(hits))
		}
	}
	for _, p := range []string{"/people/ada", "/people/bo", "/app.js", "/api/ada.json", "/api/bo.json"} {
		if !web.requested(p) {
			t.Errorf("jsnode.test%s never requested (requests: %s)", p, paths(web.log()))
		}
	}
	for _, p := range []string{"/people/ada.json", "/people/bo.json"} {
		if !api.requested(p) {
			t.Errorf("api.test%s never requested (requests: %s)", p, paths(api.log()))
		}
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
	st := r.sup.Stats()
	if st.Render == nil || st.Render.Rendered != 2 || st.Render.PID == 0 || st.Render.Blocked == 0 {
		t.Errorf("Stats().Render = %+v, want two pages rendered by a running browser, requests blocked", st.Render)
	}
	t.Logf("render stats: %+v", *st.Render)

	// The browser keeps its singleton socket in a directory of its own
	// under TMPDIR, linked from the profile; a headless shell has none.
	socket, err := os.Readlink(filepath.Join(dir, "SingletonSocket"))
	if browser, _ := findBrowser(); err != nil && !strings.Contains(filepath.Base(browser), "headless-shell") {
		t.Fatalf("browser profile has no singleton socket link: %v", err)
	}
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if socket != "" {
		if _, err := os.Stat(filepath.Dir(socket)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("browser's singleton directory %s left after Run returned (stat: %v)", filepath.Dir(socket), err)
		}
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
	if rc.UserAgent != fc.UserAgent || rc.MaxBody != 12345 {
		t.Errorf("renderConfig defaults = %+v, want the fetch config's user agent and body cap", rc)
	}
	own := RenderConfig{UserAgent: "other/1.0 (+https://other.example/)", MaxBody: 7}
	rc = renderConfig(own, fc, nil)
	if rc.UserAgent != own.UserAgent || rc.MaxBody != 7 {
		t.Errorf("renderConfig overrode set fields: %+v", rc)
	}
}
