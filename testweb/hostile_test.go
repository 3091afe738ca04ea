package testweb

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
)

// testGap is the trickle gap of the site under test: short, so that the
// trickle checks below (which measure a lower bound only) stay fast.
const testGap = 10 * time.Millisecond

const hostileTestUA = "testweb-hostile-test/1.0"

func startHostileT(t *testing.T, opts HostileOptions) *Hostile {
	t.Helper()
	h, err := StartHostile(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}

// hostileDialer dials the way a fetcher with loopback allowed does: a
// host:port in Resolve goes where Resolve says, and the loopback names
// the redirect cases point at go to 127.0.0.1. Anything else, and any
// Resolve target off loopback (dns-private), is refused, so these tests
// never leave loopback.
func hostileDialer(h *Hostile) func(ctx context.Context, network, addr string) (net.Conn, error) {
	resolve := h.Resolve()
	d := &net.Dialer{Timeout: 5 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, ok := resolve[addr]
		if !ok {
			host, port, err := net.SplitHostPort(addr)
			if err != nil || (host != "127.0.0.1" && host != "localhost") {
				return nil, fmt.Errorf("test dialer: %s is not a hostile host", addr)
			}
			to = net.JoinHostPort("127.0.0.1", port)
		}
		if host, _, _ := net.SplitHostPort(to); host != "127.0.0.1" {
			return nil, fmt.Errorf("test dialer: refusing %s → %s, off loopback", addr, to)
		}
		return d.DialContext(ctx, network, to)
	}
}

func hostileClient(t *testing.T, h *Hostile) *http.Client {
	t.Helper()
	tr := &http.Transport{
		DialContext:        hostileDialer(h),
		DisableCompression: true, // see the bomb as it is sent
		// The certificate is the point of bad-tls; here we check the page
		// behind it (the certificate itself is checked in TestHostileTLS).
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport:     tr,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// fetchHostile GETs rawURL and returns the response with at most limit
// bytes of its body.
func fetchHostile(t *testing.T, c *http.Client, rawURL string, limit int64) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", hostileTestUA)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		t.Fatalf("read %s: %v", rawURL, err)
	}
	return resp, b
}

// rawGet opens a connection to a case's host and sends a GET for path.
func rawGet(t *testing.T, h *Hostile, rawURL string) net.Conn {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := hostileDialer(h)(context.Background(), "tcp", u.Host+":80")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n\r\n", u.RequestURI(), u.Host, hostileTestUA)
	return c
}

// readAllBefore reads c until EOF, failing if that takes longer than d.
func readAllBefore(t *testing.T, c net.Conn, d time.Duration) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read: %v (after %d bytes)", err, len(b))
	}
	return b
}

func byName(t *testing.T, h *Hostile) map[string]Case {
	t.Helper()
	m := map[string]Case{}
	for _, c := range h.Cases() {
		m[c.Name] = c
	}
	return m
}

func TestStartHostileRefusesBadOptions(t *testing.T) {
	for _, o := range []HostileOptions{{TrickleGap: -time.Second}, {FarmHosts: -1}, {FarmHosts: 10000}} {
		if h, err := StartHostile(o); err == nil {
			h.Close()
			t.Errorf("StartHostile(%+v) succeeded", o)
		}
	}
}

// TestHostileCases checks the case list itself: every behaviour the issue
// names is there, names and URLs are well formed, and every host is in
// Resolve on loopback (but the one standing for a private DNS answer).
func TestHostileCases(t *testing.T) {
	h := startHostileT(t, HostileOptions{FarmHosts: 50})
	cases := byName(t, h)
	required := []string{
		ControlCase, "accept-silence", "headers-trickle", "body-trickle", "closed-after-request",
		"closed-mid-headers", "closed-mid-body", "content-length-larger", "content-length-larger-held",
		"content-length-smaller", "garbled-status", "status-999", "status-0", "ten-thousand-headers",
		"megabyte-header", "redirect-loop", "redirect-chain-30", "redirect-relative", "redirect-no-location",
		"redirect-loopback", "redirect-localhost", "redirect-private", "redirect-link-local",
		"redirect-unqualified", "meta-refresh", "dns-private", "huge-body", "gzip-bomb", "image-as-html",
		"pdf-as-html", "cp1251-undeclared", "cp1251-wrong-charset", "sjis-undeclared", "sjis-wrong-charset",
		"charset-inconsistent", "charset-unknown", "high-bit-headers", "bad-tls", "soft-404",
		"soft-404-redirect", "soft-404-same-body", "robots-html", "calendar-trap", "deep-paths", "link-farm", "many-links",
		"nested-markup", "nul-bytes",
	}
	for _, name := range required {
		if _, ok := cases[name]; !ok {
			t.Errorf("no case %q", name)
		}
	}
	if len(cases) != len(h.Cases()) {
		t.Errorf("%d cases, %d distinct names", len(h.Cases()), len(cases))
	}
	if h.Cases()[0].Name != ControlCase {
		t.Errorf("first case is %q, want the control", h.Cases()[0].Name)
	}

	resolve := h.Resolve()
	name := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	classes := map[string]bool{"": true, "timeout": true, "protocol": true, "too-large": true,
		"bad-status": true, "redirect": true, "blocked-address": true, "not-html": true, "tls": true}
	for _, c := range h.Cases() {
		if !name.MatchString(c.Name) || c.Note == "" {
			t.Errorf("case %q: bad name or no note", c.Name)
		}
		if !classes[c.WantClass] {
			t.Errorf("case %s: unexpected class %q", c.Name, c.WantClass)
		}
		if cc := c.WantCrawlClass; cc != "" && (cc == c.WantClass || !classes[cc] && cc != "soft-404") {
			t.Errorf("case %s: unexpected crawl class %q", c.Name, cc)
		}
		if c.Slow != (c.Deadline != "") || (c.Slow && c.WantClass != "timeout") {
			t.Errorf("case %s: slow %v, deadline %q, class %q", c.Name, c.Slow, c.Deadline, c.WantClass)
		}
		u, err := url.Parse(c.URL)
		if err != nil || u.Hostname() != c.Name+"."+HostDomain || u.Port() != "" {
			t.Errorf("case %s: URL %q", c.Name, c.URL)
			continue
		}
		port := map[string]string{"http": "80", "https": "443"}[u.Scheme]
		to, ok := resolve[u.Hostname()+":"+port]
		switch {
		case !ok:
			t.Errorf("case %s: %s:%s not in Resolve", c.Name, u.Hostname(), port)
		case c.Name == "dns-private":
			if to != "10.0.0.1:80" {
				t.Errorf("dns-private resolves to %s", to)
			}
		case !strings.HasPrefix(to, "127.0.0.1:"):
			t.Errorf("case %s resolves off loopback: %s", c.Name, to)
		}
		if c.WantURL != "" {
			if _, err := url.Parse(c.WantURL); err != nil {
				t.Errorf("case %s: WantURL %q", c.Name, c.WantURL)
			}
		}
	}

	hosts := h.Hosts()
	if !sort.StringsAreSorted(hosts) || len(hosts) != len(resolve) {
		t.Errorf("Hosts: %d names (sorted %v), Resolve has %d", len(hosts), sort.StringsAreSorted(hosts), len(resolve))
	}
	for i := 1; i <= 50; i++ {
		if _, ok := resolve[farmHost(i)+":80"]; !ok {
			t.Errorf("farm host %s not in Resolve", farmHost(i))
		}
	}
	if _, ok := resolve[farmHost(51)+":80"]; ok {
		t.Errorf("more farm hosts than asked for")
	}
}

// TestHostileRawServers checks the raw listeners write what their cases
// say, byte for byte where it matters.
func TestHostileRawServers(t *testing.T) {
	h := startHostileT(t, HostileOptions{TrickleGap: testGap})
	cases := byName(t, h)
	exact := map[string]string{
		"closed-after-request": "",
		"closed-mid-headers":   "HTTP/1.1 200 OK\r\nContent-Type: text/ht",
		"garbled-status":       "HTPT/1.l 2OO 0K\r\nContent-Type: text/html\r\n\r\n<p>garbled</p>",
		"content-length-larger": "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5000\r\n\r\n" +
			"<p>and then it closes</p>\n",
	}
	for name, want := range exact {
		t.Run(name, func(t *testing.T) {
			if got := readAllBefore(t, rawGet(t, h, cases[name].URL), 5*time.Second); string(got) != want {
				t.Errorf("sent %q, want %q", got, want)
			}
		})
	}
	t.Run("closed-mid-body", func(t *testing.T) {
		got := string(readAllBefore(t, rawGet(t, h, cases["closed-mid-body"].URL), 5*time.Second))
		_, body, _ := strings.Cut(got, "\r\n\r\n")
		if !strings.Contains(got, "Transfer-Encoding: chunked") || !strings.HasPrefix(body, "400\r\n") || len(body) >= 0x400 {
			t.Errorf("sent %q", got)
		}
	})
	t.Run("content-length-smaller", func(t *testing.T) {
		resp, err := http.ReadResponse(bufio.NewReader(rawGet(t, h, cases["content-length-smaller"].URL)), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if string(b) != cases["content-length-smaller"].WantBody {
			t.Errorf("body %q", b)
		}
	})
	t.Run("statuses", func(t *testing.T) {
		for name, line := range map[string]string{"status-999": "HTTP/1.1 999 ", "status-0": "HTTP/1.1 0 OK\r\n"} {
			if got := readAllBefore(t, rawGet(t, h, cases[name].URL), 5*time.Second); !bytes.HasPrefix(got, []byte(line)) {
				t.Errorf("%s sent %q", name, got)
			}
		}
	})
	t.Run("header floods", func(t *testing.T) {
		got := readAllBefore(t, rawGet(t, h, cases["ten-thousand-headers"].URL), 5*time.Second)
		if n := bytes.Count(got, []byte("\r\nX-A: b")); n != 10_000 || len(got) > 128<<10 {
			t.Errorf("%d header lines in %d bytes", n, len(got))
		}
		got = readAllBefore(t, rawGet(t, h, cases["megabyte-header"].URL), 5*time.Second)
		if line, _, _ := strings.Cut(string(got[bytes.Index(got, []byte("X-Big:")):]), "\r\n"); len(line) < 1<<20 {
			t.Errorf("longest header line %d bytes", len(line))
		}
	})
	t.Run("high-bit-headers", func(t *testing.T) {
		got := readAllBefore(t, rawGet(t, h, cases["high-bit-headers"].URL), 5*time.Second)
		head, _, _ := bytes.Cut(got, []byte("\r\n\r\n"))
		if utf8.Valid(head) || !bytes.Contains(head, []byte("Fran\xe7ois")) {
			t.Errorf("header %q", head)
		}
	})
	t.Run("accept-silence", func(t *testing.T) {
		c := rawGet(t, h, cases["accept-silence"].URL)
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Read(make([]byte, 1))
		if n != 0 || !isTimeout(err) {
			t.Errorf("read %d bytes, %v; want silence", n, err)
		}
	})
	t.Run("content-length-larger-held", func(t *testing.T) {
		c := rawGet(t, h, cases["content-length-larger-held"].URL)
		r := bufio.NewReader(c)
		resp, err := http.ReadResponse(r, nil)
		if err != nil || resp.ContentLength != 5000 {
			t.Fatalf("response %v, %v", resp, err)
		}
		b := make([]byte, 24)
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, err := r.Read(make([]byte, 1)); n != 0 || !isTimeout(err) {
			t.Errorf("after the short body: %d bytes, %v; want the connection held in silence", n, err)
		}
	})
	t.Run("headers-trickle", func(t *testing.T) {
		// 40 bytes cannot come sooner than 40 gaps; the header never ends.
		c := rawGet(t, h, cases["headers-trickle"].URL)
		start := time.Now()
		b := make([]byte, 40)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < 39*testGap || !bytes.HasPrefix(b, []byte("HTTP/1.1 200 OK\r\n")) || bytes.Contains(b, []byte("\r\n\r\n")) {
			t.Errorf("40 bytes in %v: %q", el, b)
		}
	})
	t.Run("body-trickle", func(t *testing.T) {
		c := rawGet(t, h, cases["body-trickle"].URL)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		r := bufio.NewReader(c)
		resp, err := http.ReadResponse(r, nil)
		if err != nil || resp.ContentLength != 1_000_000 {
			t.Fatalf("response %v, %v", resp, err)
		}
		start := time.Now()
		b := make([]byte, 20)
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < 19*testGap {
			t.Errorf("20 body bytes in %v", el)
		}
	})
	t.Run("robots", func(t *testing.T) {
		// Raw hosts answer robots.txt politely so a crawl reaches the page.
		got := readAllBefore(t, rawGet(t, h, "http://accept-silence."+HostDomain+"/robots.txt"), 5*time.Second)
		if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(got, []byte(allowAll)) {
			t.Errorf("robots.txt: %q", got)
		}
	})
	t.Run("log", func(t *testing.T) {
		want := map[string]int{"status-999": 999, "closed-after-request": 0, "garbled-status": 0, "content-length-smaller": 200}
		for _, r := range h.Log() {
			if r.UserAgent != hostileTestUA || r.Path == "" {
				t.Errorf("logged %+v", r)
			}
			name := strings.TrimSuffix(r.Host, "."+HostDomain)
			if st, ok := want[name]; ok && r.Path == "/" {
				if r.Status != st {
					t.Errorf("%s logged status %d, want %d", name, r.Status, st)
				}
				delete(want, name)
			}
		}
		if len(want) > 0 {
			t.Errorf("not logged: %v", want)
		}
	})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestHostileHTTPServers checks the HTTP hosts' answers.
func TestHostileHTTPServers(t *testing.T) {
	h := startHostileT(t, HostileOptions{FarmHosts: 30})
	c := hostileClient(t, h)
	cases := byName(t, h)
	base := func(name string) string { return "http://" + name + "." + HostDomain }
	_, port, _ := net.SplitHostPort(h.Addr())

	table := []struct {
		url      string
		status   int
		ctype    string
		location string
		want     []string
	}{
		{cases[ControlCase].URL, 200, htmlType, "", []string{cases[ControlCase].WantText}},
		{base(ControlCase) + "/robots.txt", 200, textType, "", []string{"User-agent: *\nAllow: /"}},
		{base("redirect-loop") + "/a", 302, htmlType, "/b", nil},
		{base("redirect-loop") + "/b", 301, htmlType, "/a", nil},
		{base("redirect-chain-30") + "/hop/0", 302, htmlType, "/hop/1", nil},
		{base("redirect-chain-30") + "/hop/29", 302, htmlType, "/hop/30", nil},
		{base("redirect-chain-30") + "/hop/30", 200, htmlType, "", []string{"end of the chain"}},
		{base("redirect-chain-30") + "/hop/31", 404, htmlType, "", nil},
		{base("redirect-relative") + "/dir/start", 301, htmlType, "../next/hop", nil},
		{base("redirect-relative") + "/next/hop", 302, htmlType, "end", nil},
		{cases["redirect-relative"].WantURL, 200, htmlType, "", []string{cases["redirect-relative"].WantText}},
		{cases["redirect-no-location"].URL, 302, htmlType, "", nil},
		{cases["redirect-loopback"].URL, 302, htmlType, "http://127.0.0.1:" + port + "/landing/loopback", nil},
		{cases["redirect-loopback"].WantURL, 200, htmlType, "", []string{cases["redirect-loopback"].WantText}},
		{cases["redirect-localhost"].URL, 302, htmlType, "http://localhost:" + port + "/landing/localhost", nil},
		{cases["redirect-localhost"].WantURL, 200, htmlType, "", []string{cases["redirect-localhost"].WantText}},
		{cases["redirect-private"].URL, 302, htmlType, "http://10.0.0.1/admin", nil},
		{cases["redirect-link-local"].URL, 307, htmlType, "http://169.254.169.254/latest/meta-data/", nil},
		{cases["redirect-unqualified"].URL, 302, htmlType, "http://intranet/", nil},
		{cases["meta-refresh"].URL, 200, htmlType, "", []string{`<meta http-equiv="refresh" content="0; url=/refreshed">`}},
		{cases["meta-refresh"].WantURL, 200, htmlType, "", []string{cases["meta-refresh"].WantText}},
		{cases["pdf-as-html"].URL, 200, "text/html", "", []string{"%PDF-1.4"}},
		{cases["soft-404"].URL, 200, htmlType, "", []string{"Page not found", "/people/no-such-person-4711"}},
		{base("soft-404") + "/robots.txt", 200, htmlType, "", []string{"Page not found"}},
		{cases["soft-404-redirect"].URL, 302, htmlType, "/", nil},
		{cases["soft-404-redirect"].WantURL, 200, htmlType, "", []string{"Welcome home"}},
		{cases["soft-404-same-body"].URL, 200, htmlType, "", []string{"Nothing here"}},
		{base("soft-404-same-body") + "/backfill-probe-0123", 200, htmlType, "", []string{"Nothing here"}},
		{base("soft-404-same-body") + "/", 200, htmlType, "", []string{"Welcome home"}},
		{cases["robots-html"].URL, 200, htmlType, "", []string{"<pre>", "Disallow: /private/"}},
		{base("robots-html") + "/", 200, htmlType, "", nil},
		{cases["calendar-trap"].URL, 200, htmlType, "", []string{"November 2026", `href="/calendar/2026/10"`, `href="/calendar/2026/12"`}},
		{base("calendar-trap") + "/calendar/2026/12", 200, htmlType, "", []string{`href="/calendar/2027/1"`}},
		{base("calendar-trap") + "/calendar/2026/13", 404, htmlType, "", nil},
		{base("deep-paths") + "/a/a/a/a/", 200, htmlType, "", []string{"Level 4", `href="a/"`}},
		{base("deep-paths") + "/a/b/", 404, htmlType, "", nil},
		{cases["link-farm"].URL, 200, htmlType, "", []string{`href="http://site-0001.farm.example/"`, `href="http://site-0030.farm.example/"`}},
		{"http://site-0007.farm.example/", 200, htmlType, "", []string{"Site 7 of the network", `href="http://link-farm.hostile.example/"`}},
		{"http://site-0007.farm.example/robots.txt", 200, textType, "", nil},
		{base("many-links") + "/l/99999", 200, htmlType, "", []string{"one of many"}},
		{cases["nul-bytes"].URL, 200, "text/html", "", []string{"before\x00after"}},
	}
	for _, tc := range table {
		t.Run(tc.url, func(t *testing.T) {
			resp, body := fetchHostile(t, c, tc.url, 8<<20)
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != tc.ctype || resp.Header.Get("Location") != tc.location {
				t.Errorf("status %d, type %q, Location %q; want %d, %q, %q",
					resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Location"), tc.status, tc.ctype, tc.location)
			}
			for _, s := range tc.want {
				if !strings.Contains(string(body), s) {
					t.Errorf("body lacks %q; starts %q", s, body[:min(len(body), 300)])
				}
			}
		})
	}

	t.Run("unknown host", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, cases[ControlCase].URL, nil)
		req.Host = "unknown." + HostDomain
		req.Header.Set("User-Agent", hostileTestUA)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("status %d", resp.StatusCode)
		}
	})
	t.Run("farm links", func(t *testing.T) {
		_, body := fetchHostile(t, c, cases["link-farm"].URL, 8<<20)
		if n := strings.Count(string(body), ".farm.example/"); n != 30 {
			t.Errorf("hub links to %d farm hosts, want 30", n)
		}
		_, body = fetchHostile(t, c, "http://site-0012.farm.example/", 1<<20)
		if n := strings.Count(string(body), ".farm.example/"); n != farmFanout {
			t.Errorf("farm site links to %d farm hosts, want %d", n, farmFanout)
		}
	})
	t.Run("floods", func(t *testing.T) {
		_, body := fetchHostile(t, c, cases["many-links"].URL, 8<<20)
		if n := bytes.Count(body, []byte("<a href=")); n != ManyLinks {
			t.Errorf("%d links, want %d", n, ManyLinks)
		}
		_, body = fetchHostile(t, c, cases["nested-markup"].URL, 8<<20)
		if n := bytes.Count(body, []byte("<div>")); n != NestDepth || bytes.Count(body, []byte("</div>")) != NestDepth {
			t.Errorf("%d nested divs, want %d", n, NestDepth)
		}
	})
	t.Run("image", func(t *testing.T) {
		resp, body := fetchHostile(t, c, cases["image-as-html"].URL, 1<<20)
		if _, err := png.Decode(bytes.NewReader(body)); err != nil || resp.Header.Get("Content-Type") != htmlType {
			t.Errorf("served as %q, decodes as PNG: %v", resp.Header.Get("Content-Type"), err)
		}
	})
	t.Run("huge body", func(t *testing.T) {
		resp, body := fetchHostile(t, c, cases["huge-body"].URL, 1<<20)
		if resp.ContentLength != HugeBodyBytes || len(body) != 1<<20 || !bytes.HasPrefix(body, []byte("<p>huge page line 000000</p>\n")) {
			t.Errorf("Content-Length %d, read %d bytes starting %q", resp.ContentLength, len(body), body[:min(len(body), 40)])
		}
	})
	t.Run("gzip bomb", func(t *testing.T) {
		// 8 KiB from the wire must expand past 4 MiB: a ratio no page has.
		resp, wire := fetchHostile(t, c, cases["gzip-bomb"].URL, 8<<10)
		if resp.Header.Get("Content-Encoding") != "gzip" || resp.ContentLength < 1<<20 {
			t.Fatalf("Content-Encoding %q, Content-Length %d", resp.Header.Get("Content-Encoding"), resp.ContentLength)
		}
		zr, err := gzip.NewReader(bytes.NewReader(wire))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, zr) // ends with unexpected EOF at the cut
		if n < 4<<20 {
			t.Errorf("%d wire bytes expand to %d", len(wire), n)
		}
	})
	t.Run("charsets", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			ctype string
			enc   encoding.Encoding
		}{
			{"cp1251-undeclared", "text/html", charmap.Windows1251},
			{"cp1251-wrong-charset", "text/html; charset=iso-8859-1", charmap.Windows1251},
			{"charset-inconsistent", "text/html; charset=utf-8", charmap.Windows1251},
			{"sjis-undeclared", "text/html", japanese.ShiftJIS},
			{"sjis-wrong-charset", "text/html; charset=euc-jp", japanese.ShiftJIS},
			{"charset-unknown", "text/html; charset=shift_jisx0213", japanese.ShiftJIS},
		} {
			resp, body := fetchHostile(t, c, cases[tc.name].URL, 1<<20)
			dec, err := tc.enc.NewDecoder().Bytes(body)
			if resp.Header.Get("Content-Type") != tc.ctype || err != nil || utf8.Valid(body) ||
				!strings.Contains(string(dec), cases[tc.name].WantText) {
				t.Errorf("%s: type %q, valid UTF-8 %v, decoded %q (%v)", tc.name, resp.Header.Get("Content-Type"), utf8.Valid(body), dec, err)
			}
			if tc.name == "charset-inconsistent" && !bytes.Contains(body, []byte("charset=windows-1251")) {
				t.Errorf("%s: no <meta> charset", tc.name)
			}
		}
	})
	t.Run("log", func(t *testing.T) {
		statuses := map[string]int{}
		for _, r := range h.Log() {
			if r.UserAgent != hostileTestUA || r.Status == 0 {
				t.Errorf("logged %+v", r)
			}
			statuses[r.Host+r.Path] = r.Status
		}
		for key, want := range map[string]int{
			"redirect-loop." + HostDomain + "/a": 302, "127.0.0.1/landing/loopback": 200,
			"localhost/landing/localhost": 200, "unknown." + HostDomain + "/": 404, "site-0007.farm.example/": 200,
		} {
			if statuses[key] != want {
				t.Errorf("log: %s has status %d, want %d", key, statuses[key], want)
			}
		}
	})
}

// TestHostileTLS checks the bad certificate: refused by a verifying client,
// served to one that does not verify.
func TestHostileTLS(t *testing.T) {
	h := startHostileT(t, HostileOptions{})
	c := byName(t, h)["bad-tls"]
	u, _ := url.Parse(c.URL)
	dial := hostileDialer(h)
	for _, insecure := range []bool{false, true} {
		raw, err := dial(context.Background(), "tcp", u.Host+":443")
		if err != nil {
			t.Fatal(err)
		}
		conn := tls.Client(raw, &tls.Config{ServerName: u.Host, InsecureSkipVerify: insecure})
		err = conn.Handshake()
		var ua x509.UnknownAuthorityError
		switch {
		case !insecure && !errors.As(err, &ua):
			t.Errorf("verifying handshake: %v, want an unknown authority", err)
		case insecure && err != nil:
			t.Errorf("handshake without verification: %v", err)
		case insecure:
			if names := conn.ConnectionState().PeerCertificates[0].DNSNames; len(names) != 1 || names[0] != u.Host {
				t.Errorf("certificate names %v", names)
			}
		}
		conn.Close()
	}
	resp, body := fetchHostile(t, hostileClient(t, h), c.URL, 1<<20)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "self-signed") {
		t.Errorf("status %d, body %q", resp.StatusCode, body)
	}
}

// TestHostileClose leaves connections hanging in every way the site can
// hang them, then checks Close cuts them all, returns promptly, leaves no
// goroutine and no listener behind.
func TestHostileClose(t *testing.T) {
	baseline := runtime.NumGoroutine()
	h, err := StartHostile(HostileOptions{TrickleGap: testGap, FarmHosts: 10})
	if err != nil {
		t.Fatal(err)
	}
	cases := byName(t, h)
	dial := hostileDialer(h)
	var conns []net.Conn
	for _, name := range []string{"accept-silence", "headers-trickle", "body-trickle", "content-length-larger-held", "huge-body", "gzip-bomb"} {
		u, _ := url.Parse(cases[name].URL)
		conn, err := dial(context.Background(), "tcp", u.Host+":80")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		// Sent but never read: the huge body and the bomb block in Write.
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n\r\n", u.Host, hostileTestUA)
	}
	// An idle keep-alive connection on the TLS server.
	tlsRaw, err := dial(context.Background(), "tcp", "bad-tls."+HostDomain+":443")
	if err != nil {
		t.Fatal(err)
	}
	conns = append(conns, tlsRaw)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()

	deadline := time.Now().Add(5 * time.Second)
	for len(h.Log()) < 6 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 6 requests arrived", len(h.Log()))
		}
		time.Sleep(5 * time.Millisecond) // polling the log, not synchronising
	}
	closed := make(chan error, 1)
	go func() { closed <- h.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while connections hung")
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	for _, c := range conns {
		// Every connection was cut: reading reaches its end at once.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, c); isTimeout(err) {
			t.Errorf("connection %s still open after Close", c.RemoteAddr())
		}
	}
	for _, addr := range h.Resolve() {
		if !strings.HasPrefix(addr, "127.0.0.1:") {
			continue
		}
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections after Close", addr)
		}
	}
	deadline = time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after Close, %d before Start:\n%s",
				runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
}

// FuzzHostilePaths feeds arbitrary paths and host names (outside input) to
// the trap generators and the farm's host parser: never a panic, and every
// page they make links onward.
func FuzzHostilePaths(f *testing.F) {
	for _, s := range []string{"/calendar/2026/11", "/calendar/1/1", "/calendar/999999999/12", "/calendar/0/5",
		"/calendar/-1/-1", "/a/", "/a/a/a/", "/a//a/", "/", "site-0001.farm.example", "site-99999.farm.example", "site-+001.farm.example"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if body, ok := calendarPage(s); ok && !strings.Contains(body, "next month") {
			t.Errorf("calendar page for %q has no next month", s)
		}
		if body, ok := deepPage(s); ok && !strings.Contains(body, `href="a/"`) {
			t.Errorf("deep page for %q has no deeper link", s)
		}
		if isFarmHost(s, 10) && !strings.HasPrefix(s, "site-00") {
			t.Errorf("%q taken for one of 10 farm hosts", s)
		}
	})
}
