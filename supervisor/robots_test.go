package supervisor

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseRobots(t *testing.T) {
	long := "User-agent: *\n#" + strings.Repeat("x", maxRobotsBody) + "\nDisallow: /late\n"
	cases := []struct {
		name      string
		status    int
		body      string // or file:NAME under testdata/robots
		allowed   []string
		forbidden []string
		delay     time.Duration
		parseErr  bool
	}{
		{name: "plain", status: 200, body: "User-agent: *\nDisallow: /private/\n",
			allowed: []string{"/", "/public", "/privatex"}, forbidden: []string{"/private/", "/private/a"}},
		{name: "our group wins over star", status: 200, body: "file:groups.txt",
			allowed: []string{"/people/ann", "/"}, forbidden: []string{"/private/a"}, delay: 2500 * time.Millisecond},
		{name: "product token is case-insensitive", status: 200, body: "User-agent: BackFill\nDisallow: /a\n",
			allowed: []string{"/b"}, forbidden: []string{"/a"}},
		{name: "other agents' rules do not apply", status: 200, body: "User-agent: otherbot\nDisallow: /\n",
			allowed: []string{"/", "/x"}},
		{name: "allow beats shorter disallow", status: 200, body: "User-agent: *\nDisallow: /docs/\nAllow: /docs/public/\n",
			allowed: []string{"/docs/public/x"}, forbidden: []string{"/docs/secret"}},
		{name: "query and wildcard", status: 200, body: "User-agent: *\nDisallow: /*?sort=\nDisallow: /*.pdf$\n",
			allowed: []string{"/list", "/a.pdf?x=1"}, forbidden: []string{"/list?sort=name", "/a.pdf"}},
		{name: "fractional crawl-delay", status: 200, body: "User-agent: *\nCrawl-delay: 0.25\n",
			allowed: []string{"/"}, delay: 250 * time.Millisecond},
		{name: "refused lines dropped, rest kept", status: 200,
			body:    "Disallow: /before-agent\nUser-agent: *\nDisallow: /y\nCrawl-delay: soon\n",
			allowed: []string{"/before-agent", "/z"}, forbidden: []string{"/y"}, parseErr: true},
		{name: "absurd crawl-delay is over any ceiling", status: 200, body: "User-agent: *\nCrawl-delay: 1e300\n",
			allowed: []string{"/"}, delay: -1},
		{name: "html instead of robots.txt", status: 200, body: "<html><body><p>Not found</p></body></html>",
			allowed: []string{"/", "/x"}},
		{name: "empty", status: 200, body: "", allowed: []string{"/"}},
		{name: "over 500 KiB: the rest is ignored", status: 200, body: long, allowed: []string{"/late"}},
		{name: "404 allows all", status: 404, body: "User-agent: *\nDisallow: /\n", allowed: []string{"/", "/x"}},
		{name: "401 allows all", status: 401, allowed: []string{"/"}},
		{name: "503 disallows all", status: 503, forbidden: []string{"/", "/x"}},
		{name: "unreachable disallows all", status: 0, forbidden: []string{"/"}},
		{name: "nonsense status disallows all", status: 999, forbidden: []string{"/"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if name, ok := strings.CutPrefix(body, "file:"); ok {
				b, err := os.ReadFile(filepath.Join("testdata", "robots", name))
				if err != nil {
					t.Fatal(err)
				}
				body = string(b)
			}
			r := parseRobots(tc.status, []byte(body), "backfill")
			for _, p := range tc.allowed {
				if !r.allowed(mustURL(t, p)) {
					t.Errorf("%s disallowed, want allowed", p)
				}
			}
			for _, p := range tc.forbidden {
				if r.allowed(mustURL(t, p)) {
					t.Errorf("%s allowed, want disallowed", p)
				}
			}
			switch {
			case tc.delay < 0:
				if r.delay < 365*24*time.Hour {
					t.Errorf("crawl-delay %v, want something huge", r.delay)
				}
			case r.delay != tc.delay:
				t.Errorf("crawl-delay %v, want %v", r.delay, tc.delay)
			}
			if (r.parseErr != nil) != tc.parseErr {
				t.Errorf("parse error %v, want one: %v", r.parseErr, tc.parseErr)
			}
		})
	}
}

func mustURL(t *testing.T, path string) *url.URL {
	t.Helper()
	u, err := url.Parse("http://a.test" + path)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestProductToken(t *testing.T) {
	cases := map[string]string{
		"backfill/1.0 (+https://backfill.example/about)": "backfill",
		"BackFill":                    "backfill",
		"  backfill-dev/2 ":           "backfill-dev",
		"backfill (+mailto:x@y.test)": "backfill",
		"":                            "backfill",
	}
	for ua, want := range cases {
		if got := productToken(ua); got != want {
			t.Errorf("productToken(%q) = %q, want %q", ua, got, want)
		}
	}
}

// FuzzParseRobots feeds arbitrary robots.txt bodies: parsing never panics,
// the verdict is one of allow-all, disallow-all or a group, and the delay
// is never negative.
func FuzzParseRobots(f *testing.F) {
	f.Add(200, []byte("User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n"))
	f.Add(200, []byte("Disallow: /x\nUser-agent: backfill\nAllow: /\nCrawl-delay: -3\n"))
	f.Add(200, []byte("User-agent: *\nDisallow: /*?q=$\nCrawl-delay: 1e400\n"))
	f.Add(200, []byte("<html>\x00\xff</html>"))
	f.Add(503, []byte(""))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		r := parseRobots(status, body, "backfill")
		n := 0
		for _, b := range []bool{r.allowAll, r.disallowAll, r.group != nil} {
			if b {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("verdict is not exactly one of allow-all, disallow-all, group: %+v", r)
		}
		if r.delay < 0 {
			t.Fatalf("negative crawl-delay %v", r.delay)
		}
		for _, p := range []string{"/", "/private/x", "/a?q=1"} {
			r.allowed(mustURL(t, p))
		}
	})
}
