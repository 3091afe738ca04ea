package robots

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// robotsCase is one file of testdata/cases: a robots.txt body, the
// User-Agent of the crawler, and what it may fetch. Paths are request
// targets as sent, raw octets and all ("disallowed" alone is the empty
// target). "token" instead of "agent" gives the product token as it is,
// not cut from a User-Agent, for cases about tokens no User-Agent yields
// ("token" alone is the empty one).
//
//	# what the case shows, and where the behaviour comes from
//	agent ExampleBot/2.1
//	allowed /path?query
//	disallowed /other
//	delay 2.5s
//	-- robots.txt --
//	the body, byte for byte, to the end of the file
type robotsCase struct {
	agent      string
	token      *string
	allowed    []string
	disallowed []string
	delay      *time.Duration
	body       []byte
}

const bodyMark = "-- robots.txt --\n"

func readCase(t *testing.T, path string) robotsCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head, body, ok := bytes.Cut(data, []byte(bodyMark))
	if !ok {
		t.Fatalf("%s: no %q line", path, strings.TrimSpace(bodyMark))
	}
	c := robotsCase{body: body}
	for i, line := range strings.Split(strings.TrimSuffix(string(head), "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		word, arg, _ := strings.Cut(line, " ")
		switch word {
		case "agent":
			c.agent = arg
		case "token":
			c.token = &arg
		case "allowed":
			c.allowed = append(c.allowed, arg)
		case "disallowed":
			c.disallowed = append(c.disallowed, arg)
		case "delay":
			d, err := time.ParseDuration(arg)
			if err != nil {
				t.Fatalf("%s:%d: %v", path, i+1, err)
			}
			c.delay = &d
		default:
			t.Fatalf("%s:%d: unknown line %q", path, i+1, line)
		}
	}
	if (c.agent == "") == (c.token == nil) || len(c.allowed)+len(c.disallowed) == 0 {
		t.Fatalf("%s: a case needs an agent or a token, and at least one path", path)
	}
	return c
}

// productToken is the token the case's crawler reads robots.txt for.
func (c robotsCase) productToken() string {
	if c.token != nil {
		return *c.token
	}
	return ProductToken(c.agent)
}

// TestCases runs the case table: each file's robots.txt, read for its
// agent's product token, must allow and disallow exactly the paths listed.
func TestCases(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "cases", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("found %d cases under testdata/cases, want the whole table", len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			c := readCase(t, f)
			tok := c.productToken()
			r := Parse(c.body, tok)
			for _, p := range c.allowed {
				if !r.Allowed(p) {
					t.Errorf("%q disallowed for %q, want allowed", short(p), tok)
				}
			}
			for _, p := range c.disallowed {
				if r.Allowed(p) {
					t.Errorf("%q allowed for %q, want disallowed", short(p), tok)
				}
			}
			if c.delay != nil && r.CrawlDelay() != *c.delay {
				t.Errorf("crawl-delay %v, want %v", r.CrawlDelay(), *c.delay)
			}
		})
	}
}

// short is p for a message: a path of thousands of octets is cut in the
// middle.
func short(p string) string {
	if len(p) <= 80 {
		return p
	}
	return fmt.Sprintf("%s…(%d octets)…%s", p[:40], len(p)-80, p[len(p)-40:])
}

func TestProductToken(t *testing.T) {
	cases := map[string]string{
		"backfill/1.0 (+https://backfill.example/about)": "backfill",
		"BackFill":                    "BackFill",
		"  backfill-dev/2 ":           "backfill-dev",
		"backfill (+mailto:x@y.test)": "backfill",
		"Example_Bot;x":               "Example_Bot",
		"backfill2":                   "backfill",
		"":                            DefaultToken,
		"/1.0":                        DefaultToken,
	}
	for ua, want := range cases {
		if got := ProductToken(ua); got != want {
			t.Errorf("ProductToken(%q) = %q, want %q", ua, got, want)
		}
	}
}

func TestCrawlDelayHuge(t *testing.T) {
	for _, v := range []string{"1e300", "1e400", "99999999999999999999"} {
		r := Parse([]byte("User-agent: *\nCrawl-delay: "+v+"\n"), "x")
		if r.CrawlDelay() < 100*365*24*time.Hour {
			t.Errorf("Crawl-delay %s read as %v, want something over any ceiling", v, r.CrawlDelay())
		}
	}
}

func TestIgnored(t *testing.T) {
	body := "Disallow: /before-agent\n" + // 1: outside any group
		"User-agent: *\n" +
		"Disallow /no colon\n" + // 2: three words, no colon
		": /no-key\n" + // 3
		"Disallow: no-slash\n" + // 4
		"Crawl-delay: soon\n" + // 5
		"Sitemap: https://a.test/s.xml\n" + // fine: another record
		"Disallow:\n" + // fine: empty
		"# a comment\n\n" +
		"Disallow: /y\n" +
		"Disallow\t /two-words\n" // fine: a key and a value without the colon
	r := Parse([]byte(body), "x")
	if r.Ignored() != 5 {
		t.Errorf("ignored %d lines, want 5", r.Ignored())
	}
	if r.Allowed("/y") || r.Allowed("/two-words") || !r.Allowed("/before-agent") || !r.Allowed("/no") {
		t.Errorf("the usable rules were not used, or the unusable ones were")
	}
}

func TestAllowedURL(t *testing.T) {
	r := Parse([]byte("User-agent: *\nDisallow: /a b\nDisallow: /*?$\nDisallow: /$\nDisallow: /%E3%83%84\n"), "x")
	cases := map[string]bool{
		"http://a.test":             false, // the path of an empty path is "/"
		"http://a.test/a%20b":       false,
		"http://a.test/x?":          false, // an empty query is still sent
		"http://a.test/x":           true,
		"http://a.test/ツ":           false,
		"http://a.test/%e3%83%84/y": false,
		"http://a.test/robots.txt":  true,
	}
	for raw, want := range cases {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.AllowedURL(u); got != want {
			t.Errorf("AllowedURL(%s) = %v, want %v", raw, got, want)
		}
	}
}

// TestRequestTarget: a URL is matched by its path and query, without the
// fragment; no path is "/". (A URL without a scheme and host never gets
// here: targets come from parsed absolute URLs or paths.)
func TestRequestTarget(t *testing.T) {
	for raw, want := range map[string]string{
		"":                          "/",
		"http://www.example.com":    "/",
		"http://www.example.com/":   "/",
		"http://www.example.com/a":  "/a",
		"http://www.example.com/a/": "/a/",
		"http://www.example.com/a/b?c=http://d.e/":    "/a/b?c=http://d.e/",
		"http://www.example.com/a/b?c=d&e=f#fragment": "/a/b?c=d&e=f",
		"http://example.com?a":                        "/?a",
		"http://example.com/a;b#c":                    "/a;b",
		"/a":                                          "/a",
		"//a/b/c":                                     "/b/c",
		"http://example.com/a?":                       "/a?",
		"http://example.com/%E3%83%84?q=%2F":          "/%E3%83%84?q=%2F",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := requestTarget(u); got != want {
			t.Errorf("requestTarget(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestMaxSize(t *testing.T) {
	long := "User-agent: *\n#" + strings.Repeat("x", MaxSize) + "\nDisallow: /late\n"
	if !Parse([]byte(long), "x").Allowed("/late") {
		t.Error("a rule after MaxSize bytes was used")
	}
	early := "User-agent: *\nDisallow: /early\n#" + strings.Repeat("x", MaxSize) + "\n"
	if Parse([]byte(early), "x").Allowed("/early") {
		t.Error("a rule before MaxSize bytes was not used")
	}
	// A line over maxLine is cut there: its start still counts.
	cut := "User-agent: *\nDisallow: /x/" + strings.Repeat("a", maxLine) + "/qux\n"
	r := Parse([]byte(cut), "x")
	if r.Allowed("/x/" + strings.Repeat("a", maxLine) + "/fux") {
		t.Error("the cut rule did not match")
	}
	if !r.Allowed("/fux") {
		t.Error("the cut rule matched too much")
	}
	// The cut keeps exactly maxLine octets, 8 × 2083 − 1: a rule whose
	// line is one octet longer loses its last octet, and a rule of exactly
	// maxLine octets keeps all of them.
	if maxLine != 16663 {
		t.Errorf("maxLine = %d, want 16663", maxLine)
	}
	key := "Disallow: "
	whole := "/" + strings.Repeat("b", maxLine-len(key)-1)
	exact := Parse([]byte("User-agent: *\n"+key+whole+"\n"), "x")
	over := Parse([]byte("User-agent: *\n"+key+whole+"c\n"), "x")
	if exact.Allowed(whole) || over.Allowed(whole+"d") {
		t.Error("a line of maxLine octets was cut short")
	}
	if !exact.Allowed(whole[:len(whole)-1]) {
		t.Error("a line of maxLine octets matched a shorter path")
	}
}

// FuzzParse feeds arbitrary bodies and targets. Parsing never panics, the
// delay is never negative, /robots.txt is always allowed, and the verdict
// does not depend on the line endings used.
func FuzzParse(f *testing.F) {
	f.Add([]byte("User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n"), "/private/x")
	f.Add([]byte("Disallow: /x\nUser-agent: FooBot\nAllow: /\nCrawl-delay: -3\n"), "/x")
	f.Add([]byte("User-agent: *\nDisallow: /*?q=$\nCrawl-delay: 1e400\n"), "/a?q=")
	f.Add([]byte("\xef\xbb\xbfuser agent: foobot # x\r\ndissallow : /%e3%83%84$\rallow: /index.html\n"), "/%E3%83%84")
	f.Add([]byte("<html>\x00\xff</html>"), "/")
	f.Add([]byte("User-agent FooBot\nDisallow\t/private/\nAllow /private/a b\n"), "/private/a%2Fb")
	// And every body of the case table.
	files, _ := filepath.Glob(filepath.Join("testdata", "cases", "*.txt"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		head, body, _ := bytes.Cut(data, []byte(bodyMark))
		_, path, _ := strings.Cut(string(head), "allowed ")
		path, _, _ = strings.Cut(path, "\n")
		f.Add(body, path)
	}
	f.Fuzz(func(t *testing.T, body []byte, target string) {
		r := Parse(body, "FooBot")
		if r.CrawlDelay() < 0 {
			t.Fatalf("negative crawl-delay %v", r.CrawlDelay())
		}
		if !r.Allowed("/robots.txt") {
			t.Fatal("/robots.txt disallowed")
		}
		got := r.Allowed(target)
		crlf := bytes.ReplaceAll(body, []byte("\n"), []byte("\r\n"))
		if Parse(crlf, "FooBot").Allowed(target) != got && len(crlf) <= MaxSize {
			t.Fatalf("verdict for %q changed with CRLF line endings", target)
		}
	})
}

// FuzzMatch checks the pattern matcher against a plain dynamic-programming
// matcher of the same patterns.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"/fish*.php", "/fishheads/catfish.php?p"},
		{"/*.php$", "/filename.php5"},
		{"/a$$", "/a$"},
		{"*", ""},
		{"/**x*$", "/axbx"},
		{"/%2A*%24", "/*x$"},
		{"/a*a*a*b", "/aaaaaaaaaaaaaab"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, raw, target string) {
		p, ok := compile(raw)
		if !ok {
			return
		}
		path := canonical(target)
		if got, want := p.match(path), refMatch(raw, path); got != want {
			t.Fatalf("pattern %q on %q: match %v, reference %v", raw, path, got, want)
		}
	})
}

// refMatch matches a rule's value against a canonical path the slow way:
// reach[j] says whether the pattern so far can end at path[:j].
func refMatch(raw, path string) bool {
	anchored := strings.HasSuffix(raw, "$")
	if anchored {
		raw = raw[:len(raw)-1]
	}
	const wildcard = -1
	var c canon
	var pat []int
	for i, run := range strings.Split(raw, "*") {
		if i > 0 {
			pat = append(pat, wildcard)
		}
		c.write(run, true)
		for _, o := range []byte(c.take()) {
			pat = append(pat, int(o))
		}
	}
	reach := make([]bool, len(path)+1)
	reach[0] = true
	for _, o := range pat {
		next := make([]bool, len(path)+1)
		if o == wildcard {
			on := false
			for j := range reach {
				on = on || reach[j]
				next[j] = on
			}
		} else {
			for j := 0; j < len(path); j++ { // octets, not runes
				next[j+1] = reach[j] && int(path[j]) == o
			}
		}
		reach = next
	}
	if anchored {
		return reach[len(path)]
	}
	for _, ok := range reach {
		if ok {
			return true
		}
	}
	return false
}

func ExampleParse() {
	body := []byte("User-agent: *\nDisallow: /private/\nAllow: /private/press/\nCrawl-delay: 2\n")
	r := Parse(body, ProductToken("backfill/1.0 (+https://backfill.example/about)"))
	fmt.Println(r.Allowed("/private/cv.pdf"), r.Allowed("/private/press/2024"), r.CrawlDelay())
	// Output: false true 2s
}

// BenchmarkAllowed matches one path against a file of 1,000 rules, the
// cost of a page's robots check.
func BenchmarkAllowed(b *testing.B) {
	var body strings.Builder
	body.WriteString("User-agent: *\n")
	for i := range 1000 {
		fmt.Fprintf(&body, "Disallow: /section%d/*/private*.html$\nAllow: /section%d/public/\n", i, i)
	}
	r := Parse([]byte(body.String()), "backfill")
	b.ResetTimer()
	for b.Loop() {
		if !r.Allowed("/section999/public/people/ann?tab=contact") {
			b.Fatal("disallowed")
		}
	}
}

// BenchmarkParse reads a file of 1,000 rules, done once per host and
// robots.txt lifetime.
func BenchmarkParse(b *testing.B) {
	var body strings.Builder
	body.WriteString("User-agent: *\n")
	for i := range 1000 {
		fmt.Fprintf(&body, "Disallow: /section%d/*/private*.html$\nAllow: /section%d/public/\n", i, i)
	}
	data := []byte(body.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		Parse(data, "backfill")
	}
}
