package testweb

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/antchfx/htmlquery"
)

func startLarge(t testing.TB, o LargeOptions) *Web {
	t.Helper()
	w, err := StartLarge(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func TestLargeDefaults(t *testing.T) {
	w := startLarge(t, LargeOptions{})
	if n := len(w.Hosts()); n != DefaultLargeHosts {
		t.Errorf("%d hosts, want %d", n, DefaultLargeHosts)
	}
	if n := len(w.Resolve()); n != DefaultLargeHosts {
		t.Errorf("Resolve has %d hosts, want %d", n, DefaultLargeHosts)
	}
	if DefaultLargeHosts*DefaultLargePages < 20000 {
		t.Errorf("default large web has %d profile pages, want at least 20,000", DefaultLargeHosts*DefaultLargePages)
	}
	c := newClient(t, w)
	cases := []struct {
		url    string
		status int
		want   string
	}{
		{"http://people-0001.example/robots.txt", 200, "User-agent: *\nAllow: /\n"},
		{"http://people-0200.example/", 200, `href="/p/0100"`},
		{"http://people-0200.example/p/0100", 200, `class="fn"`},
		{"http://people-0001.example/p/0101", 404, "Not found"},
		{"http://people-0001.example/p/0000", 404, "Not found"},
		{"http://people-0001.example/p/1", 404, "Not found"},
		{"http://people-0001.example/other", 404, "Not found"},
	}
	for _, tc := range cases {
		g := get(t, c, "GET", tc.url, "", "")
		if g.status != tc.status || !strings.Contains(g.body, tc.want) {
			t.Errorf("%s: status %d, want %d with %q:\n%s", tc.url, g.status, tc.status, tc.want, g.body)
		}
		if strings.HasSuffix(tc.url, "robots.txt") && strings.Contains(g.body, "Crawl-delay") {
			t.Errorf("large robots.txt sets a Crawl-delay:\n%s", g.body)
		}
	}
	for _, host := range []string{"people-0201.example", "people-0000.example", "people.example"} {
		if g := get(t, c, "GET", "http://people-0001.example/", host, ""); g.status != 404 {
			t.Errorf("Host %s: status %d, want 404", host, g.status)
		}
	}
}

func TestLargeCrawlDelay(t *testing.T) {
	cases := []struct {
		delay time.Duration
		want  string // whole robots.txt
	}{
		{0, "User-agent: *\nAllow: /\n"},
		{2 * time.Second, "User-agent: *\nAllow: /\nCrawl-delay: 2\n"},
		{1500 * time.Millisecond, "User-agent: *\nAllow: /\nCrawl-delay: 1.5\n"},
	}
	for _, tc := range cases {
		w := startLarge(t, LargeOptions{Hosts: 2, Pages: 1, CrawlDelay: tc.delay})
		c := newClient(t, w)
		for _, h := range w.Hosts() {
			if g := get(t, c, "GET", "http://"+h+"/robots.txt", "", ""); g.status != 200 || g.body != tc.want {
				t.Errorf("CrawlDelay %s, %s/robots.txt: status %d, body %q; want 200, %q", tc.delay, h, g.status, g.body, tc.want)
			}
		}
	}
	if _, err := StartLarge(LargeOptions{CrawlDelay: -time.Second}); err == nil {
		t.Error("StartLarge accepted a negative CrawlDelay")
	}
}

// TestLargeRecordsReachEveryPageOnce crawls LargeRecords the way Sample's
// reference crawl does and checks the design LargeRecords documents: every
// page is reached within depth 1, each exactly once, the mapping extracts
// every profile, and attribution keeps every record incomplete.
func TestLargeRecordsReachEveryPageOnce(t *testing.T) {
	const hosts, pages = 4, 6
	w := startLarge(t, LargeOptions{Hosts: hosts, Pages: pages})
	c := newClient(t, w)
	ms := loadFixtureMappings(t)

	rows, err := csv.NewReader(bytes.NewReader(LargeRecords(w))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != hosts+1 || strings.Join(rows[0], ",") != "id,name,location,email,homepage" {
		t.Fatalf("records: %q", rows)
	}
	fetched := map[string]bool{}
	for _, row := range rows[1:] {
		name, home := row[1], row[4]
		if row[2] != "" || row[3] != "" {
			t.Errorf("record %s already has location or email", row[0])
		}
		level := []string{home}
		for depth := 0; depth <= 1; depth++ {
			var next []string
			for _, u := range level {
				if fetched[u] {
					continue // seen: the crawler does not fetch it again
				}
				fetched[u] = true
				resp, err := c.Get(u)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("%s: status %d", u, resp.StatusCode)
				}
				vals, matched := extract(t, ms, u, body)
				switch {
				case depth == 0 && matched:
					t.Errorf("index %s matches a mapping", u)
				case depth == 1 && (!matched || vals["name"] == "" || vals["location"] == "" || vals["email"] == ""):
					t.Errorf("profile %s: matched %v, values %v", u, matched, vals)
				case depth == 1 && fold(vals["name"]) == fold(name):
					t.Errorf("profile %s carries the record's name %q: the record would complete", u, name)
				}
				doc, _ := htmlquery.Parse(bytes.NewReader(body))
				base, _ := url.Parse(u)
				for _, a := range htmlquery.Find(doc, "//a/@href") {
					ref, _ := url.Parse(htmlquery.InnerText(a))
					next = append(next, base.ResolveReference(ref).String())
				}
			}
			level = next
		}
	}
	if want := hosts * (pages + 1); len(fetched) != want {
		t.Errorf("reference crawl reached %d pages, want %d", len(fetched), want)
	}
	count := map[string]int{}
	for _, r := range w.Log() {
		count[r.Host+r.Path]++
	}
	for u := range fetched {
		p, _ := url.Parse(u)
		if count[p.Host+p.Path] != 1 {
			t.Errorf("%s requested %d times", u, count[p.Host+p.Path])
		}
	}
	if small := startSmall(t, Options{}); LargeRecords(small) != nil || LargeRecords(nil) != nil {
		t.Error("LargeRecords of a web not started by StartLarge is not nil")
	}
}

// BenchmarkLargeWeb measures how fast the fixture itself serves profiles
// over loopback: the ceiling any crawler benchmark against it runs under.
func BenchmarkLargeWeb(b *testing.B) {
	w := startLarge(b, LargeOptions{})
	d := &net.Dialer{}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", w.Addr())
		},
		MaxIdleConnsPerHost: 64,
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			u := fmt.Sprintf("http://%s/p/%04d", largeHost(i%DefaultLargeHosts+1), i%DefaultLargePages+1)
			resp, err := c.Get(u)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
