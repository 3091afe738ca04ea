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
// User-Agent of the crawler, and what it may fetch.
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
	if c.agent == "" || len(c.allowed)+len(c.disallowed) == 0 {
		t.Fatalf("%s: a case needs an agent and at least one path", path)
	}
	return c
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
			r := Parse(c.body, ProductToken(c.agent))
			for _, p := range c.allowed {
				if !r.Allowed(p) {
					t.Errorf("%s disallowed for %s, want allowed", p, c.agent)
				}
			}
			for _, p := range c.disallowed {
				if r.Allowed(p) {
					t.Errorf("%s allowed for %s, want disallowed", p, c.agent)
				}
			}
			if c.delay != nil && r.CrawlDelay() != *c.delay {
				t.Errorf("crawl-delay %v, want %v", r.CrawlDelay(), *c.delay)
			}
		})
	}
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
		"Disallow /no-colon\n" + // 2
		": /no-key\n" + // 3
		"Disallow: no-slash\n" + // 4
		"Crawl-delay: soon\n" + // 5
		"Sitemap: https://a.test/s.xml\n" + // fine: another record
		"Disallow:\n" + // fine: empty
		"# a comment\n\n" +
		"Disallow: /y\n"
	r := Parse([]byte(body), "x")
	if r.Ignored() != 5 {
		t.Errorf("ignored %d lines, want 5", r.Ignored())
	}
	if r.Allowed("/y") || !r.Allowed("/before-agent") {
		t.Errorf("the usable rule was not used")
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
		path := decode(target)
		if got, want := p.match(path), refMatch(raw, path); got != want {
			t.Fatalf("pattern %q on %q: match %v, reference %v", raw, path, got, want)
		}
	})
}

// refMatch matches a rule's value against a decoded path the slow way:
// reach[j] says whether the pattern so far can end at path[:j].
func refMatch(raw, path string) bool {
	anchored := strings.HasSuffix(raw, "$")
	if anchored {
		raw = raw[:len(raw)-1]
	}
	reach := make([]bool, len(path)+1)
	reach[0] = true
	for i := 0; i < len(raw); i++ {
		next := make([]bool, len(path)+1)
		if raw[i] == '*' {
			on := false
			for j := range reach {
				on = on || reach[j]
				next[j] = on
			}
		} else {
			c := raw[i]
			if c == '%' && i+2 < len(raw) && isHex(raw[i+1]) && isHex(raw[i+2]) {
				c = unhex(raw[i+1])<<4 | unhex(raw[i+2])
				i += 2
			}
			for j := 0; j < len(path); j++ { // octets, not runes
				next[j+1] = reach[j] && path[j] == c
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
