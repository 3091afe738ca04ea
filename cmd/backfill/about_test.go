package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAboutCommand: `backfill about` refuses the .invalid default contact
// and a page with no way to reach the operator, writes the page from the
// bundled template or from the user's own copy of it.
func TestAboutCommand(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "about.html")
	tmpl := filepath.Join(dir, "about.tmpl")
	who := []string{"--operator", "Example Lab", "--email", "crawl@example.org"}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string // in stdout+stderr
	}{
		{"default contact", append([]string{"about"}, who...), exitUsage, "still the .invalid placeholder"},
		{"no email", []string{"about", "--contact", "https://example.org/crawler", "--operator", "Example Lab"}, exitUsage, "email"},
		{"page", append([]string{"about", "--contact", "https://example.org/crawler", "-o", page}, who...), exitOK, "host it at https://example.org/crawler"},
		{"template copy", []string{"about", "--write-template", tmpl}, exitOK, "wrote " + tmpl},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := mainExit(c.args, &stdout, &stderr)
			if out := stdout.String() + stderr.String(); code != c.code || !strings.Contains(out, c.want) {
				t.Errorf("exit %d, want %d saying %q:\n%s", code, c.code, c.want, out)
			}
		})
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Example Lab", "mailto:crawl@example.org", "backfill/" + version + " (&#43;https://example.org/crawler)"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("the page does not say %q", s)
		}
	}
	// The user's edited copy is what is filled.
	orig, err := os.ReadFile(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(orig), "<h2>Why it crawls</h2>", "<h2>Why it crawls</h2>\n<p>Edited by {{.Operator}}.</p>", 1)
	os.WriteFile(tmpl, []byte(edited), 0o644)
	var stdout, stderr bytes.Buffer
	if code := mainExit(append([]string{"about", "--contact", "https://example.org/crawler", "--template", tmpl}, who...), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "<p>Edited by Example Lab.</p>") {
		t.Errorf("the edited template was not filled:\n%s", stdout.String())
	}
}
