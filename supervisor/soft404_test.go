package supervisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"backfill/fetch"
	"backfill/testweb"
	"backfill/wire"
)

func TestSoft404Matches(t *testing.T) {
	notFound := func(path string) string {
		return "<html><head><title>Page not found</title><style>h1{color:red}</style></head><body>" +
			"<h1>Page not found</h1><p>Sorry, the page " + path + " does not exist on this site.</p>" +
			"<script>track('" + path + "')</script><p><a href=\"/\">Home</a></p></body></html>"
	}
	probeURL := "http://a.test/backfill-probe-0123456789abcdef"
	probe := soft404Fingerprint(probeURL, &fetch.Response{URL: probeURL, Status: 200,
		Body: []byte(notFound("/backfill-probe-0123456789abcdef"))}, nil)
	var lw []string
	for i := range 300 {
		lw = append(lw, fmt.Sprintf("word%d", i))
	}
	long := strings.Join(lw, " ")
	longProbe := soft404Fingerprint(probeURL, &fetch.Response{URL: probeURL, Status: 200,
		Body: []byte("<p>Nothing here. " + long + "</p>")}, nil)
	redirProbe := soft404Fingerprint(probeURL, &fetch.Response{URL: "http://a.test/", Status: 200, Redirects: 1,
		Body: []byte("<h1>Welcome home</h1>")}, nil)
	// A short answer whose words are those of the paths it lists: a page
	// at /people/contact loses two of its five words to its own path, so
	// only its bytes say it is the probe's answer.
	menu := "<title>Oops</title><a href=/>Home</a> <a href=/people/>People</a> <a href=/contact>Contact</a> <p>Oops</p>"
	menuProbe := soft404Fingerprint(probeURL, &fetch.Response{URL: probeURL, Status: 200, Body: []byte(menu)}, nil)
	landing := soft404Fingerprint(probeURL, &fetch.Response{URL: "http://a.test/notfound", Status: 200, Redirects: 1,
		Body: []byte(menu)}, nil)

	cases := []struct {
		name  string
		print *soft404Print
		task  string
		final string
		body  string
		want  bool
	}{
		{"same template, other path", probe, "http://a.test/people/x", "", notFound("/people/x"), true},
		{"same template, path with query", probe, "http://a.test/p?id=4711", "", notFound("/p?id=4711"), true},
		{"a real page", probe, "http://a.test/people/ann", "", annPage, false},
		{"a page that mentions not found", probe, "http://a.test/faq", "",
			"<h1>FAQ</h1><p>What if a page is not found? Write to us and we will fix the link quickly.</p>", false},
		{"near-identical long text", longProbe, "http://a.test/x", "", "<p>Nothing here at all. " + long + "</p>", true},
		{"long text, other half", longProbe, "http://a.test/x", "", "<p>Nothing here. " + long[:len(long)/2] + strings.ReplaceAll(long[len(long)/2:], "word", "other") + "</p>", false},
		{"the root page is the host's own", probe, "http://a.test/", "", notFound("/"), false},
		{"redirected to the same place", redirProbe, "http://a.test/no/such", "http://a.test/", "<h1>Welcome home</h1>", true},
		{"the home page itself", redirProbe, "http://a.test/", "http://a.test/", "<h1>Welcome home</h1>", false},
		{"the home page redirected to itself", redirProbe, "http://a.test", "http://a.test/", "<h1>Welcome home</h1>", false},
		{"redirected elsewhere", redirProbe, "http://a.test/old", "http://a.test/new", "<h1>The new page</h1>", false},
		{"no fingerprint", nil, "http://a.test/x", "", notFound("/x"), false},
		{"byte-identical, text apart", menuProbe, "http://a.test/people/contact", "", menu, true},
		{"one byte apart, text apart", menuProbe, "http://a.test/people/contact", "", menu + " ", false},
		{"byte-identical to a redirected probe's landing page, answered in place", redirProbe, "http://a.test/start", "", "<h1>Welcome home</h1>", true},
		{"byte-identical to the landing page, redirected elsewhere", landing, "http://a.test/people/contact", "http://a.test/people/", menu, true},
		{"the landing page itself", landing, "http://a.test/notfound", "", menu, false},
		{"byte-identical root page", menuProbe, "http://a.test/", "", menu, false},
	}
	for _, tc := range cases {
		final := tc.final
		if final == "" {
			final = tc.task
		}
		got := tc.print.matches(tc.task, &fetch.Response{URL: final, Status: 200, Body: []byte(tc.body)})
		if got != tc.want {
			t.Errorf("%s: matches = %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, r := range []*fetch.Response{{URL: probeURL, Status: 404, Body: []byte(notFound("/x"))}, nil} {
		if p := soft404Fingerprint(probeURL, r, nil); p != nil {
			t.Errorf("a probe answered %v left a fingerprint", r)
		}
	}
}

// TestSoft404Hostile crawls the hostile site's soft-404 hosts: their
// missing pages are soft 404s with no fields; the well-behaved host and
// the redirecting host's real home page are not.
func TestSoft404Hostile(t *testing.T) {
	t.Parallel()
	web, err := testweb.StartHostile(testweb.HostileOptions{FarmHosts: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { web.Close() })
	urls := map[string]string{}
	for _, c := range web.Cases() {
		urls[c.Name] = c.URL
	}
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d)
	cfg.Fetch.Resolve = web.Resolve()
	cfg.DefaultDelay = NoDelay
	r := start(t, cfg)
	register(t, d)
	cases := []struct{ id, url, class string }{
		{"soft", urls["soft-404"], ClassSoft404},
		{"soft-home", "http://soft-404." + testweb.HostDomain + "/", ""},
		{"redirect", urls["soft-404-redirect"], ClassSoft404},
		{"redirect-home", "http://soft-404-redirect." + testweb.HostDomain + "/", ""},
		{"same-body", urls["soft-404-same-body"], ClassSoft404},
		{"same-body-home", "http://soft-404-same-body." + testweb.HostDomain + "/", ""},
		{"control", urls[testweb.ControlCase], ""},
	}
	for _, tc := range cases {
		if tc.url == "" {
			t.Fatalf("%s: no such hostile case", tc.id)
		}
		d.task(tc.id, 1, tc.url)
	}
	got := d.collect(len(cases), 20*time.Second)
	for _, tc := range cases {
		res := got[tc.id]
		if res.Class != tc.class {
			t.Errorf("%s (%s): class %q (%s), want %q", tc.id, tc.url, res.Class, res.Error, tc.class)
		}
		if tc.class != "" && (len(res.Fields) > 0 || len(res.Links) > 0) {
			t.Errorf("%s: a soft 404 carries fields or links: %+v", tc.id, res)
		}
	}
	probes := 0
	for _, req := range web.Log() {
		if strings.HasPrefix(req.Path, soft404Prefix) {
			probes++
		}
	}
	// The control host has one page, which does not read like a
	// not-found: it is not probed.
	if st := r.sup.Stats(); st.Soft404Probes != 3 || probes != 3 || st.Failed[ClassSoft404] != 3 {
		t.Errorf("%d probes made, %d received, stats %+v; want one per soft-404 host (3) and 3 soft 404s", st.Soft404Probes, probes, st)
	}
}

// TestSoft404Remembered: a host's soft-404 verdict outlives the supervisor
// that probed it. Supervisors started one after another on one SQLite host
// cache probe the host once; the verdict carries the lifetime of the
// host's robots.txt entry, and one that expired is probed again.
func TestSoft404Remembered(t *testing.T) {
	t.Parallel()
	web, err := testweb.StartHostile(testweb.HostileOptions{FarmHosts: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { web.Close() })
	host := "soft-404-same-body." + testweb.HostDomain
	cache := openCache(t)
	probes := func() int {
		n := 0
		for _, req := range web.Log() {
			if req.Host == host && strings.HasPrefix(req.Path, soft404Prefix) {
				n++
			}
		}
		return n
	}
	// crawl runs a supervisor on the shared cache for one page of the
	// host and stops it; it returns the page's class and the probes the
	// supervisor made.
	crawl := func(path string) (string, int64) {
		t.Helper()
		d := newDispatcher(t, "tcp://127.0.0.1:*")
		cfg := testConfig(t, d)
		cfg.Cache = cache
		cfg.Fetch.Resolve = web.Resolve()
		cfg.DefaultDelay = NoDelay
		r := start(t, cfg)
		register(t, d)
		d.task("p", 1, "http://"+host+path)
		res := d.collect(1, 20*time.Second)["p"]
		st := r.sup.Stats()
		if err := r.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		return res.Class, st.Soft404Probes
	}

	if class, n := crawl("/people/contact"); class != ClassSoft404 || n != 1 {
		t.Fatalf("first supervisor: class %q after %d probes, want soft-404 after 1", class, n)
	}
	ctx := context.Background()
	rb, err := cache.Robots(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cache.Soft404(ctx, host)
	if err != nil {
		t.Fatalf("no verdict in the cache: %v", err)
	}
	if len(v.Print) == 0 || !v.Expires.Equal(rb.Expires) {
		t.Errorf("cached verdict %d bytes, expires %v; want a print expiring with robots.txt at %v", len(v.Print), v.Expires, rb.Expires)
	}
	for i, path := range []string{"/people/ann", "/contact"} {
		if class, n := crawl(path); class != ClassSoft404 || n != 0 {
			t.Errorf("supervisor %d: class %q after %d probes, want soft-404 from the cached verdict", i+2, class, n)
		}
	}
	if n := probes(); n != 1 {
		t.Errorf("host probed %d times by three supervisors, want once", n)
	}

	// An expired verdict is not used.
	v.Expires = time.Now().Add(-time.Second)
	if err := cache.PutSoft404(ctx, host, v); err != nil {
		t.Fatal(err)
	}
	if class, n := crawl("/people/bob"); class != ClassSoft404 || n != 1 {
		t.Errorf("after expiry: class %q after %d probes, want soft-404 after a new probe", class, n)
	}
	if n := probes(); n != 2 {
		t.Errorf("host probed %d times in all, want twice", n)
	}
}

// TestSoft404NoFalsePositive crawls every page the small fixture web's
// records name: none is taken for a soft 404.
func TestSoft404NoFalsePositive(t *testing.T) {
	t.Parallel()
	web, err := testweb.Start(testweb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { web.Close() })
	records, _ := testweb.Sample()
	pages := map[string]bool{}
	for _, u := range regexp.MustCompile(`https?://[^\s,"]+`).FindAllString(string(records), -1) {
		pages[u] = true
	}
	for _, h := range web.Hosts() {
		pages["http://"+h+"/"] = true
	}
	d := newDispatcher(t, "tcp://127.0.0.1:*")
	cfg := testConfig(t, d)
	cfg.Fetch.Resolve = web.Resolve()
	cfg.DefaultDelay = NoDelay
	r := start(t, cfg)
	register(t, d)
	i := 0
	ids := map[string]string{}
	for u := range pages {
		id := "p" + string(rune('a'+i))
		i++
		ids[id] = u
		d.task(id, 1, u)
	}
	for id, res := range d.collect(len(pages), 30*time.Second) {
		if res.Class == ClassSoft404 {
			t.Errorf("%s taken for a soft 404", ids[id])
		}
	}
	if st := r.sup.Stats(); st.Soft404Probes == 0 || st.Soft404Held != 0 {
		t.Errorf("%d soft-404 probes made, %d first pages held for one; want some probes and none held", st.Soft404Probes, st.Soft404Held)
	}
}

// TestLooksNotFound reads the pages of testdata/notfound: those named
// yes-* read like not-found pages, those named no-* do not.
func TestLooksNotFound(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "notfound", "*.html"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.HasPrefix(filepath.Base(f), "yes-")
		if got := looksNotFound(body); got != want {
			t.Errorf("%s: looksNotFound %v, want %v", f, got, want)
		}
	}
}

// TestSoft404AfterFirstPage: on a host with a delay the first page is the
// request after robots.txt and its result is not held for the soft-404
// probe, which comes next; a host with one page is not probed; and a
// soft-404 host's pages are still caught, its first page too when it reads
// like a not-found (held until the probe answers) and those after it by
// the verdict.
func TestSoft404AfterFirstPage(t *testing.T) {
	t.Parallel()
	const delay = 300 * time.Millisecond
	const missing = `<html><head><title>Page not found</title></head><body><h1>Page not found</h1>
<p>Sorry, nothing lives here.</p><p><a href="/">Home</a></p></body></html>`
	const home = `<html><head><title>Example</title></head><body><h1>Welcome</h1><a href="/people/ann">Ann</a></body></html>`
	cases := []struct {
		name    string
		missing string   // the site's answer to unknown paths; "" for 404
		tasks   []string // paths, in the order sent
		asked   []string // requests the site receives, in order ("probe" for the probe)
		class   []string // the tasks' classes
		held    int64    // first pages held for the probe
		// firstBeforeProbe: the first task's result arrives before the
		// probe is asked (else after it).
		firstBeforeProbe bool
	}{
		{"fine host", "", []string{"/people/1", "/people/2", "/people/3"},
			[]string{"/robots.txt", "/people/1", "probe", "/people/2", "/people/3"}, []string{"", "", ""}, 0, true},
		{"one page", "", []string{"/people/1"},
			[]string{"/robots.txt", "/people/1"}, []string{""}, 0, true},
		{"soft-404 host, missing page first", missing, []string{"/people/gone", "/people/also-gone", "/"},
			[]string{"/robots.txt", "/people/gone", "probe", "/people/also-gone", "/"}, []string{ClassSoft404, ClassSoft404, ""}, 1, false},
		{"soft-404 host, one missing page", missing, []string{"/people/gone"},
			[]string{"/robots.txt", "/people/gone", "probe"}, []string{ClassSoft404}, 1, false},
		{"soft-404 host, home first", missing, []string{"/", "/people/gone"},
			[]string{"/robots.txt", "/", "probe", "/people/gone"}, []string{"", ClassSoft404}, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pages := map[string]string{"/people/1": annPage, "/people/2": annPage, "/people/3": annPage}
			if tc.missing != "" {
				pages = map[string]string{"/": home}
			}
			s := newSite(t, "a.test", "", pages)
			s.missing = tc.missing
			d := newDispatcher(t, "tcp://127.0.0.1:*")
			cfg := testConfig(t, d, s)
			cfg.DefaultDelay = delay
			r := start(t, cfg)
			register(t, d)
			for i, p := range tc.tasks {
				d.task(fmt.Sprint(i), 1, "http://a.test"+p)
			}
			got := map[string]*wire.Result{}
			var firstAt time.Time
			deadline := time.After(20 * time.Second)
			for len(got) < len(tc.tasks) {
				select {
				case res := <-d.results:
					if res.TaskID == "0" {
						firstAt = time.Now()
					}
					got[res.TaskID] = res
				case <-deadline:
					t.Fatalf("%d of %d results", len(got), len(tc.tasks))
				}
			}
			var asked []string
			var probeAt time.Time
			for _, h := range s.log() {
				p := h.path
				if strings.HasPrefix(p, soft404Prefix) {
					p, probeAt = "probe", h.at
				}
				asked = append(asked, p)
			}
			if !slices.Equal(asked, tc.asked) {
				t.Errorf("requests %q, want %q", asked, tc.asked)
			}
			for i, want := range tc.class {
				if res := got[fmt.Sprint(i)]; res.Class != want {
					t.Errorf("%s: class %q (%s), want %q", tc.tasks[i], res.Class, res.Error, want)
				}
			}
			if !probeAt.IsZero() && firstAt.Before(probeAt) != tc.firstBeforeProbe {
				t.Errorf("first result at %v, probe asked at %v: want the result before the probe %v",
					firstAt.Format(time.StampMilli), probeAt.Format(time.StampMilli), tc.firstBeforeProbe)
			}
			if st := r.sup.Stats(); st.Soft404Held != tc.held {
				t.Errorf("%d first pages held for the probe, want %d", st.Soft404Held, tc.held)
			}
			for i, g := range gaps(s.log()) {
				if g < delay {
					t.Errorf("gap %d between request arrivals %v, want at least %v", i, g, delay)
				}
			}
		})
	}
}
