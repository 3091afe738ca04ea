package fetch

import (
	"bytes"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestClassifyAddr(t *testing.T) {
	cases := []struct {
		ip   string
		want addrKind
	}{
		{"93.184.216.34", kindPublic},
		{"2606:4700::1111", kindPublic},
		{"127.0.0.1", kindLoopback},
		{"127.255.0.9", kindLoopback},
		{"::1", kindLoopback},
		{"::ffff:127.0.0.1", kindLoopback},
		{"10.0.0.1", kindPrivate},
		{"172.16.5.4", kindPrivate},
		{"172.32.0.1", kindPublic},
		{"192.168.1.1", kindPrivate},
		{"fd00::1", kindPrivate},
		{"100.64.0.1", kindCGNAT},
		{"100.128.0.1", kindPublic},
		{"169.254.169.254", kindLinkLocal},
		{"fe80::1", kindLinkLocal},
		{"224.0.0.251", kindMulticast},
		{"ff02::1", kindMulticast},
		{"0.0.0.0", kindUnspecified},
		{"::", kindUnspecified},
		{"240.0.0.1", kindReserved},
		{"255.255.255.255", kindReserved},
		{"192.0.2.10", kindReserved},
		{"2001:db8::1", kindReserved},
		{"2002:0a00:0001::1", kindPrivate}, // 6to4 wrapping 10.0.0.1
	}
	for _, c := range cases {
		if got := classifyAddr(netip.MustParseAddr(c.ip)); got != c.want {
			t.Errorf("%s: %q, want %q", c.ip, got, c.want)
		}
	}
}

func TestAllowed(t *testing.T) {
	cases := []struct {
		cfg  Config
		ip   string
		want bool
	}{
		{Config{}, "127.0.0.1", false},
		{Config{AllowLoopback: true}, "127.0.0.1", true},
		{Config{AllowLoopback: true}, "10.0.0.1", false},
		{Config{AllowPrivate: true}, "10.0.0.1", true},
		{Config{AllowPrivate: true}, "100.64.0.1", true},
		{Config{AllowPrivate: true, AllowLoopback: true}, "169.254.169.254", false},
		{Config{AllowPrivate: true, AllowLoopback: true}, "0.0.0.0", false},
		{Config{}, "8.8.8.8", true},
	}
	for _, c := range cases {
		if got, _ := c.cfg.allowed(netip.MustParseAddr(c.ip)); got != c.want {
			t.Errorf("%+v %s: %v, want %v", c.cfg, c.ip, got, c.want)
		}
	}
}

func TestIsLocalhostName(t *testing.T) {
	for name, want := range map[string]bool{
		"localhost": true, "LOCALHOST.": true, "app.localhost": true, "localhost.localdomain": true,
		"ip6-localhost": true, "localhost.example": false, "people.example": false, "notlocalhost": false,
	} {
		if got := isLocalhostName(name); got != want {
			t.Errorf("%q: %v, want %v", name, got, want)
		}
	}
}

func TestIsBinaryPath(t *testing.T) {
	cases := map[string]bool{
		"http://a.example/photo.JPG":          true,
		"http://a.example/paper.pdf?dl=1":     true,
		"http://a.example/dist/app.tar.gz":    true,
		"http://a.example/font.woff2":         true,
		"http://a.example/staff/ada":          false,
		"http://a.example/index.html":         false,
		"http://a.example/page.php?f=x.pdf":   false,
		"http://a.example/":                   false,
		"http://a.example/v1.2/people":        false,
		"http://a.example/archive.zip#part-2": true,
	}
	for raw, want := range cases {
		if got := IsBinaryPath(must(url.Parse(raw))); got != want {
			t.Errorf("%s: %v, want %v", raw, got, want)
		}
	}
	if IsBinaryPath(nil) {
		t.Error("nil URL is not binary")
	}
}

func TestParseRefresh(t *testing.T) {
	cases := []struct {
		in     string
		delay  time.Duration
		target string
		ok     bool
	}{
		{"0; url=/next", 0, "/next", true},
		{"5;URL='http://b.example/x'", 5 * time.Second, "http://b.example/x", true},
		{`3, "/q"`, 3 * time.Second, "/q", true},
		{"0.5; url = /half", 500 * time.Millisecond, "/half", true},
		{"7", 7 * time.Second, "", true},
		{"  10 ;  /bare", 10 * time.Second, "/bare", true},
		{"url=/x", 0, "", false},
		{"", 0, "", false},
		{"5 /x", 0, "", false},
	}
	for _, c := range cases {
		d, tgt, ok := parseRefresh(c.in)
		if d != c.delay || tgt != c.target || ok != c.ok {
			t.Errorf("%q: (%v, %q, %v), want (%v, %q, %v)", c.in, d, tgt, ok, c.delay, c.target, c.ok)
		}
	}
}

func TestMediaType(t *testing.T) {
	cases := []struct{ in, mt, cs string }{
		{"text/html; charset=UTF-8", "text/html", "UTF-8"},
		{"TEXT/HTML", "text/html", ""},
		{"text/html; charset=\"shift_jis\"", "text/html", "shift_jis"},
		{"text/html;; charset=windows-1251; foo", "text/html", "windows-1251"},
		{"text/html; charset=\xff\xfe", "text/html", "\xff\xfe"},
		{"garbage", "", ""},
		{"", "", ""},
	}
	for _, c := range cases {
		mt, cs := mediaType(c.in)
		if mt != c.mt || cs != c.cs {
			t.Errorf("%q: (%q, %q), want (%q, %q)", c.in, mt, cs, c.mt, c.cs)
		}
	}
}

// TestDecode runs the golden files in testdata/decode: NAME.in is a body,
// NAME.ct its Content-Type (optional), NAME.want the expected UTF-8 and
// NAME.charset the charset it must be read as.
func TestDecode(t *testing.T) {
	ins, err := filepath.Glob(filepath.Join("testdata", "decode", "*.in"))
	if err != nil || len(ins) == 0 {
		t.Fatalf("no decode fixtures: %v", err)
	}
	for _, in := range ins {
		name := strings.TrimSuffix(in, ".in")
		t.Run(filepath.Base(name), func(t *testing.T) {
			body := must(os.ReadFile(in))
			ct, _ := os.ReadFile(name + ".ct")
			want := must(os.ReadFile(name + ".want"))
			wantCS := strings.TrimSpace(string(must(os.ReadFile(name + ".charset"))))
			mt, label := mediaType(strings.TrimSpace(string(ct)))
			got, cs := decodeText(body, label, mt == "" || isHTMLType(mt))
			if cs != wantCS {
				t.Errorf("charset %q, want %q", cs, wantCS)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("decoded\n%q\nwant\n%q", got, want)
			}
		})
	}
}

// FuzzDecode feeds arbitrary bodies and Content-Types through sniffing and
// charset decoding: nothing may panic, and text always comes out as valid
// UTF-8 without NULs.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("<p>hello</p>"), "text/html")
	f.Add(cp1251Page, "text/html; charset=utf-8")
	f.Add(sjisPage, "")
	f.Add([]byte("\xff\xfe<\x00p\x00"), "text/html; charset=shift_jis")
	f.Add([]byte(`<meta charset="x-bogus"><p>\x00\xc3</p>`), "text/html; charset=")
	f.Add(pngBytes, "text/html")
	f.Fuzz(func(t *testing.T, body []byte, ct string) {
		mt, label := mediaType(ct)
		kind, text := sniff(body, mt)
		if kind == "" && len(body) > 0 {
			t.Fatalf("no media type for %q", body)
		}
		if !text {
			return
		}
		out, cs := decodeText(body, label, isHTMLType(kind))
		if cs == "" {
			t.Fatal("no charset named")
		}
		if !utf8.Valid(out) {
			t.Fatalf("invalid UTF-8 from %q as %s", body, cs)
		}
		if bytes.IndexByte(out, 0) >= 0 {
			t.Fatalf("NUL left in output of %q", body)
		}
	})
}

func TestContainsFold(t *testing.T) {
	for in, want := range map[string]bool{
		`<META HTTP-EQUIV="REFRESH">`: true, "refresh": true, "Refres": false, "": false, "xxrEfReShxx": true,
	} {
		if got := containsFold([]byte(in), "refresh"); got != want {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}
