package etl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// TestExtractGolden runs mappings on saved pages and compares the whole
// Extraction with a golden file under testdata/extract.
func TestExtractGolden(t *testing.T) {
	tests := []struct {
		name     string
		mappings []string
		url      string
		page     string
		ctype    string
	}{
		{"gravatar", []string{"gravatar.json"}, "https://en.gravatar.com/adaexample", "gravatar.html", "text/html; charset=utf-8"},
		{"gravatar-no-match", []string{"gravatar.json"}, "https://gravatar.com/avatar", "gravatar.html", "text/html"},
		{"extensions", []string{"extensions.json"}, "https://people.example/p/ada", "people-ada.html", "text/html"},
		{"json-api", []string{"api.json", "extensions.json"}, "https://api.people.example/v1/people", "api.json", "application/json"},
		{"json-as-html", []string{"api.json"}, "https://api.people.example/v1/people", "api.json", "text/html"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set := loadTestSet(t, tc.mappings...)
			body, err := os.ReadFile(filepath.Join("testdata", "pages", tc.page))
			if err != nil {
				t.Fatal(err)
			}
			ex := set.Extract(tc.url, body, tc.ctype)
			got, err := json.MarshalIndent(ex, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			// The extraction owns what it returns: the caller may reuse body.
			scribble(body)
			if again, _ := json.MarshalIndent(ex, "", "  "); !bytes.Equal(append(again, '\n'), append(got, '\n')) {
				t.Errorf("the extraction changed with its body:\n%s", again)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "extract", tc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("extraction differs from %s\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

func TestExtractConcurrent(t *testing.T) {
	set := loadTestSet(t, "gravatar.json", "extensions.json")
	body, err := os.ReadFile("testdata/pages/gravatar.html")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(set.Extract("https://gravatar.com/ada", body, "text/html"))
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if got := fmt.Sprint(set.Extract("https://gravatar.com/ada", body, "text/html")); got != want {
					errs <- got
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for got := range errs {
		t.Errorf("concurrent extraction differs:\n%s\nwant\n%s", got, want)
	}
}

// panicProc is registered only in tests, to prove a panicking processor
// cannot take Extract down.
type panicProc struct{}

func (panicProc) Process([]Value, *Document) ([]Value, error) { panic("boom") }

func init() {
	register("test-panic", func(json.RawMessage) (Processor, error) { return panicProc{}, nil })
}

func TestExtractRecoversPanics(t *testing.T) {
	set, err := Load(map[string][]byte{"p.json": []byte(`[
		{"name":"bad","fields":[{"name":"x","processors":[{"type":"test-panic"}]}]},
		{"name":"good","fields":[{"name":"title","processors":[{"type":"xpath","parameters":{"expression":"//title"}}]}]}]`)})
	if err != nil {
		t.Fatal(err)
	}
	ex := set.Extract("https://a.example/", []byte("<title>Hi</title>"), "text/html")
	if len(ex.Errors) != 1 || ex.Errors[0].Mapping != "bad" || ex.Errors[0].Field != "x" || !strings.Contains(ex.Errors[0].Err, "boom") {
		t.Errorf("errors = %+v", ex.Errors)
	}
	if len(ex.Fields) != 1 || ex.Fields[0].Values[0] != "Hi" {
		t.Errorf("the good mapping did not run: %+v", ex.Fields)
	}
}

func TestOutLinks(t *testing.T) {
	var b strings.Builder
	b.WriteString(`<base href="/sub/"><a href="a">a</a><a href="a#frag">dup</a><a href="HTTP://Host.Example:80/x">x</a>`)
	b.WriteString(`<a href="doc.PDF">pdf</a><a href="v.mp4?x=1">video</a><a href="ftp://f.example/">ftp</a><a href="mailto:x@y.example">m</a>`)
	b.WriteString(`<map><area href="/area"></map><a>no href</a><a href="http://[::1">bad</a><a href="page.html">ok</a><a href="setup.exe">exe</a>`)
	ex := (&Set{}).Extract("https://site.example/dir/page", []byte(b.String()), "text/html")
	want := []string{"https://site.example/sub/a", "http://host.example/x", "https://site.example/area", "https://site.example/sub/page.html"}
	if fmt.Sprint(ex.OutLinks) != fmt.Sprint(want) {
		t.Errorf("OutLinks = %q\nwant %q", ex.OutLinks, want)
	}

	b.Reset()
	for i := range MaxOutLinks + 100 {
		fmt.Fprintf(&b, `<a href="/p%d">p</a>`, i)
	}
	ex = (&Set{}).Extract("https://site.example/", []byte(b.String()), "text/html")
	if len(ex.OutLinks) != MaxOutLinks {
		t.Errorf("got %d out links, want the cap %d", len(ex.OutLinks), MaxOutLinks)
	}
}

func TestNormalizeURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"HTTP://Example.COM", "http://example.com/"},
		{"https://example.com:443/a", "https://example.com/a"},
		{"http://example.com:80/a", "http://example.com/a"},
		{"http://example.com:8080/a", "http://example.com:8080/a"},
		{"https://example.com:80/a", "https://example.com:80/a"},
		{"https://example.com/a/./b/../c", "https://example.com/a/c"},
		{"https://example.com/a/b/..", "https://example.com/a/"},
		{"https://example.com/../../x", "https://example.com/x"},
		{"https://example.com/a#frag", "https://example.com/a"},
		{"https://example.com/p?b=2&a=1&A=%20", "https://example.com/p?b=2&a=1&A=%20"},
		{"https://example.com/%7Euser/a%2Fb", "https://example.com/%7Euser/a%2Fb"},
		{"https://example.com/Case/Path", "https://example.com/Case/Path"},
		{"http://[::1]:80/", "http://[::1]/"},
		{"http://[::1]:8080/x", "http://[::1]:8080/x"},
		{"  https://example.com/x  ", "https://example.com/x"},
		{"https://user@example.com/", "https://user@example.com/"},
		{"ftp://example.com/", ""},
		{"mailto:a@example.com", ""},
		{"/relative", ""},
		{"http://", ""},
		{"http://%zz/", ""},
		{"https://example.com/" + strings.Repeat("a", MaxURLLength), ""},
		// One host, whichever way it is spelt: its ASCII form (UTS #46).
		{"http://Bücher.example/a", "http://xn--bcher-kva.example/a"},
		{"http://xn--bcher-kva.example/a", "http://xn--bcher-kva.example/a"},
		{"http://XN--BCHER-KVA.Example:80/a", "http://xn--bcher-kva.example/a"},
		{"https://例え.テスト:8443/", "https://xn--r8jz45g.xn--zckzah:8443/"},
		{"http://r4---sn-x.video.example/", "http://r4---sn-x.video.example/"},
		{"http://xn--zz.example/", ""}, // not punycode
		{"http://x‍y.example/", ""},
	}
	for _, tc := range tests {
		got, err := NormalizeURL(tc.in)
		if tc.want == "" {
			if err == nil || !errors.Is(err, ErrBadURL) {
				t.Errorf("NormalizeURL(%q) = %q, %v; want a bad-url error", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if again, _ := NormalizeURL(got); again != got {
			t.Errorf("NormalizeURL is not idempotent on %q: %q", got, again)
		}
	}
}

func TestMatchKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"  José   DÍAZ ", "jose diaz"},
		{"Ada\tExample\n", "ada example"},
		{"Ångström", "angstrom"},
		{"ﬁne", "fine"}, // compatibility ligature
		{"Zoë Müller-Lüdenscheidt", "zoe muller-ludenscheidt"},
		{"", ""},
		{"  Ada   LOVELACE\r\n", "ada lovelace"}, // ASCII only
		{"Ada\x00\x7f Example", "ada\x00\x7f example"},
		{"ada@X.Example", "ada@x.example"},
	}
	for _, tc := range tests {
		if got := MatchKey(tc.in); got != tc.want {
			t.Errorf("MatchKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
		// The ASCII shortcut agrees with the full normalization.
		if got := matchKeyUnicode(tc.in); got != tc.want {
			t.Errorf("matchKeyUnicode(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestIsBinaryURL(t *testing.T) {
	for u, want := range map[string]bool{
		"https://a.example/x.pdf":      true,
		"https://a.example/x.JPEG?s=1": true,
		"https://a.example/x.tar.gz":   true,
		"https://a.example/x.html":     false,
		"https://a.example/pdf":        false,
		"https://a.example/":           false,
		"https://a.example":            false,
		"https://a.example/x?f=a.pdf":  false,
	} {
		if got := IsBinaryURL(u); got != want {
			t.Errorf("IsBinaryURL(%q) = %v", u, got)
		}
	}
}

// ExtractWithFingerprint fingerprints the tree it parsed exactly as PageFingerprint
// parses the page itself, HTML or not.
func TestExtractFingerprint(t *testing.T) {
	set := loadTestSet(t, "extensions.json")
	html, err := os.ReadFile(filepath.Join("testdata", "pages", "people-ada.html"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, url, ctype string
		body             []byte
	}{
		{"html", "https://people.example/p/ada", "text/html", html},
		{"json", "https://api.people.example/v1/people", "application/json", []byte(`{"name": "Ann Example", "city": "Lyon"}`)},
		{"broken json", "https://api.people.example/v1/people", "application/json", []byte(`{"name": `)},
		{"empty", "https://people.example/empty", "text/html", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := set.ExtractWithFingerprint(tc.url, tc.body, tc.ctype).Fingerprint
			want := PageFingerprint(tc.url, tc.body, tc.ctype)
			if got != want {
				t.Fatalf("Extract fingerprint %+v, PageFingerprint %+v", got, want)
			}
			if len(tc.body) > 0 && got.Words == 0 {
				t.Fatalf("no words counted in %q", tc.body)
			}
		})
	}
}

// scribble overwrites b, as a caller reusing its buffer would.
func scribble(b []byte) {
	for i := range b {
		b[i] = '#'
	}
}

// TestDetach: the strings of an extraction that lie in the page's memory
// are copied out, and the others are left as they are.
func TestDetach(t *testing.T) {
	body := []byte("<p>Ada Example</p><a href='https://a.example/x'>")
	text := unsafe.String(&body[0], len(body))
	outside := strings.Repeat("built elsewhere", 2)
	ex := &Extraction{
		Mappings: []string{"m"},
		Fields:   []FieldValues{{Mapping: "m", Field: "name", Values: []string{text[3:14], outside, ""}}},
		Links:    []string{text[27:46]},
		OutLinks: []string{text[27:46], outside},
		Errors:   []FieldError{{Mapping: "m", Field: "f", Processor: "p", Err: text[:3]}},
	}
	want := fmt.Sprintf("%#v", *ex)
	d := &Document{}
	d.detach(ex, body)
	scribble(body)
	if got := fmt.Sprintf("%#v", *ex); got != want {
		t.Fatalf("after detach and a reuse of the body:\n%s\nwant\n%s", got, want)
	}
	if unsafe.StringData(ex.Fields[0].Values[1]) != unsafe.StringData(outside) || unsafe.StringData(ex.OutLinks[1]) != unsafe.StringData(outside) {
		t.Error("a string outside the body was copied")
	}
}
