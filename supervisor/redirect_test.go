package supervisor

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"backfill/wire"
)

// TestRedirects: every hop is a request under its host's rules. A hop on
// the task's host is made by the host's next turn, after the delay and
// only when robots.txt allows it; a hop to another host is not made here
// but answered for the dispatcher to queue there.
func TestRedirects(t *testing.T) {
	t.Parallel()
	const delay = 300 * time.Millisecond
	cases := []struct {
		name      string
		path      string
		class     string
		finalURL  string // path on a.test, or an absolute URL
		chain     string // paths requested before the final one
		redirect  string // Result.Redirect
		asked     string // requests to a.test after robots.txt, probes left out
		counted   string // the redirect reason counted
		otherHits bool   // b.test must see nothing in any case
	}{
		{name: "same host hop waits its delay", path: "/r/ok", finalURL: "/people/ann", chain: "/r/ok",
			asked: "/r/ok /people/ann", counted: wire.RedirectFollowed},
		{name: "hop to a disallowed page is not requested", path: "/r/private", class: ClassRobots, finalURL: "/private/x", chain: "/r/private",
			asked: "/r/private", counted: wire.RedirectRobots},
		{name: "hop to another host is answered, not requested", path: "/r/away", redirect: "http://b.test/people/bob", finalURL: "/r/away",
			asked: "/r/away", counted: wire.RedirectOtherHost},
		{name: "loop", path: "/r/loop1", class: "redirect", finalURL: "/r/loop2", chain: "/r/loop1",
			asked: "/r/loop1 /r/loop2", counted: wire.RedirectLoop},
		{name: "meta refresh is a hop too", path: "/r/refresh", finalURL: "/people/ann", chain: "/r/refresh",
			asked: "/r/refresh /people/ann", counted: wire.RedirectFollowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newFuncSite(t, "a.test", false, func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/robots.txt":
					fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
				case "/r/ok":
					http.Redirect(w, r, "/people/ann", http.StatusMovedPermanently)
				case "/r/private":
					http.Redirect(w, r, "/private/x", http.StatusFound)
				case "/r/away":
					http.Redirect(w, r, "http://b.test/people/bob", http.StatusFound)
				case "/r/loop1":
					http.Redirect(w, r, "/r/loop2", http.StatusFound)
				case "/r/loop2":
					http.Redirect(w, r, "/r/loop1", http.StatusFound)
				case "/r/refresh":
					w.Header().Set("Content-Type", "text/html")
					fmt.Fprint(w, `<meta http-equiv="refresh" content="0; url=/people/ann">`)
				default:
					servePeople(w, r)
				}
			})
			other := newFuncSite(t, "b.test", false, servePeople)
			d := newDispatcher(t, "tcp://127.0.0.1:*")
			cfg := testConfig(t, d, s, other)
			cfg.DefaultDelay = delay
			cfg.NoSoft404 = true
			r := start(t, cfg)
			register(t, d)
			d.task("t", 1, "http://a.test"+tc.path)
			res := d.collect(1, 10*time.Second)["t"]
			if res.Class != tc.class {
				t.Errorf("class %q (%s), want %q", res.Class, res.Error, tc.class)
			}
			if res.Redirect != tc.redirect {
				t.Errorf("redirect %q, want %q", res.Redirect, tc.redirect)
			}
			if want := "http://a.test" + tc.finalURL; res.FinalURL != want {
				t.Errorf("final URL %q, want %q", res.FinalURL, want)
			}
			var chain []string
			for _, u := range res.Chain {
				chain = append(chain, strings.TrimPrefix(u, "http://a.test"))
			}
			if got := strings.Join(chain, " "); got != tc.chain {
				t.Errorf("chain %q, want %q", got, tc.chain)
			}
			hits := s.log()
			if len(hits) == 0 || hits[0].path != "/robots.txt" {
				t.Fatalf("requests %q: robots.txt must come first", paths(hits))
			}
			if got := paths(hits[1:]); got != tc.asked {
				t.Errorf("requests after robots.txt %q, want %q", got, tc.asked)
			}
			for i, g := range gaps(hits) {
				if g < delay {
					t.Errorf("requests %d and %d came %v apart, under the %v delay", i, i+1, g, delay)
				}
			}
			if len(other.log()) != 0 {
				t.Errorf("the other host was asked %q", paths(other.log()))
			}
			if refused := tc.counted == wire.RedirectRobots || tc.counted == wire.RedirectLoop; refused != (res.HopRefused == tc.counted) {
				t.Errorf("hop refused %q, counted %q", res.HopRefused, tc.counted)
			}
			if n := r.sup.redirects.snapshot()[tc.counted]; n == 0 {
				t.Errorf("redirects %v: none counted as %q", r.sup.redirects.snapshot(), tc.counted)
			}
			if m := r.sup.inFlight.max(); m != 1 {
				t.Errorf("at most %d requests in flight to one host, want 1", m)
			}
		})
	}
}
