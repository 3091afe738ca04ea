package etl

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// TestJSOnly runs the detector on the pages of testdata/jsonly: a page
// named js-* is a shell that JavaScript fills in, one named static-* holds
// its content in its HTML. Each is parsed both by html.Parse and by the
// parser Extract uses, which must agree.
func TestJSOnly(t *testing.T) {
	files, err := filepath.Glob("testdata/jsonly/*.html")
	if err != nil || len(files) < 10 {
		t.Fatalf("jsonly pages: %d (%v)", len(files), err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			var want bool
			switch {
			case strings.HasPrefix(name, "js-"):
				want = true
			case strings.HasPrefix(name, "static-"):
			default:
				t.Fatalf("%s: name it js-* or static-*", name)
			}
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			root, err := html.Parse(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if got := JSOnly(root); got != want {
				t.Errorf("JSOnly (html.Parse) = %v, want %v", got, want)
			}
			if got := JSOnly(NewDocument("https://site.example/p/x", body, "text/html").Root); got != want {
				t.Errorf("JSOnly (Document) = %v, want %v", got, want)
			}
		})
	}
	if JSOnly(nil) {
		t.Error("JSOnly(nil) = true")
	}
}

// TestExtractJSOnly checks that Extract reports the sign only on pages a
// mapping with url_patterns and render auto matched and left a field
// empty.
func TestExtractJSOnly(t *testing.T) {
	set := loadTestSet(t, "render.json", "extensions.json") // mappings with each render mode, and a generic one
	shell, err := os.ReadFile("testdata/jsonly/js-create-react-app.html")
	if err != nil {
		t.Fatal(err)
	}
	static, err := os.ReadFile("testdata/jsonly/static-profile-with-analytics.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url  string
		body []byte
		want bool
	}{
		{"https://e.example/p/ada", shell, true},      // render auto, its field empty
		{"https://e.example/p/ada", static, false},    // render auto, its field found (and no shell)
		{"https://c.example/p/ada", shell, false},     // render never
		{"https://a.example/p/ada", shell, false},     // render always: rendered anyway
		{"https://other.example/p/ada", shell, false}, // only the generic mapping runs there
	} {
		if got := set.Extract(tc.url, tc.body, "text/html").JSOnly; got != tc.want {
			t.Errorf("Extract(%s, %d bytes).JSOnly = %v, want %v", tc.url, len(tc.body), got, tc.want)
		}
	}
}
