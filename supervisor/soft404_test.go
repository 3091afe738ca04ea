package supervisor

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"backfill/fetch"
	"backfill/testweb"
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
	if st := r.sup.Stats(); st.Soft404Probes != 4 || probes != 4 || st.Failed[ClassSoft404] != 3 {
		t.Errorf("%d probes made, %d received, stats %+v; want one per host (4) and 3 soft 404s", st.Soft404Probes, probes, st)
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
	if st := r.sup.Stats(); st.Soft404Probes == 0 {
		t.Error("no soft-404 probe was made")
	}
}
