package about

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/page.golden.html")

var good = Page{Contact: "https://lab.example.org/crawler", Operator: "Example Lab", Email: "crawl@lab.example.org"}

// TestValidate: a page that would not let a site operator reach the
// crawl's operator is refused, saying what is missing.
func TestValidate(t *testing.T) {
	with := func(f func(*Page)) Page { p := good; f(&p); return p }
	for _, c := range []struct {
		name string
		page Page
		want string // "" for valid
	}{
		{"valid", good, ""},
		{"placeholder contact", with(func(p *Page) { p.Contact = "https://backfill.invalid/about-the-crawler" }), "still the .invalid placeholder"},
		{"placeholder with a dot", with(func(p *Page) { p.Contact = "http://crawler.invalid./" }), "still the .invalid placeholder"},
		{"relative contact", with(func(p *Page) { p.Contact = "/about" }), "want an absolute http or https URL"},
		{"no contact", with(func(p *Page) { p.Contact = "" }), "contact: missing"},
		{"no operator", with(func(p *Page) { p.Operator = " " }), "operator: missing"},
		{"no email", with(func(p *Page) { p.Email = "" }), `email "": want an address`},
		{"email with a name", with(func(p *Page) { p.Email = "Lab <crawl@lab.example.org>" }), "want an address"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.page.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			if strings.Contains(c.name, "placeholder") && !errors.Is(err, ErrPlaceholderContact) {
				t.Errorf("%v is not ErrPlaceholderContact", err)
			}
		})
	}
}

// TestRender: the bundled template filled matches the golden page (go
// test -update rewrites it); an invalid page and a broken template are
// errors; a user's own template is filled instead.
func TestRender(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, nil, good); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "page.golden.html")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("the page differs from %s (go test -update rewrites it):\n%s", golden, b.String())
	}
	for _, s := range []string{"Example Lab", `href="mailto:crawl@lab.example.org"`, "backfill (&#43;https://lab.example.org/crawler)", "User-agent: backfill"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("the page does not say %q", s)
		}
	}
	if err := Render(&bytes.Buffer{}, nil, Page{Contact: "https://x.invalid/"}); err == nil {
		t.Error("rendered a page with a placeholder contact and no operator")
	}
	if err := Render(&bytes.Buffer{}, []byte("{{.Nope}}"), good); err == nil {
		t.Error("rendered a template naming a field Page does not have")
	}
	b.Reset()
	if err := Render(&b, []byte("<p>{{.Operator}}: {{.Email}}; {{.Purpose}}</p>"), with(good, "<b>research</b>")); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != "<p>Example Lab: crawl@lab.example.org; &lt;b&gt;research&lt;/b&gt;</p>" {
		t.Errorf("own template: %s", got)
	}
}

func with(p Page, purpose string) Page { p.Purpose = purpose; return p }
