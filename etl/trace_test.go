package etl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTrace(t *testing.T) {
	set := loadTestSet(t, "gravatar.json", "extensions.json")
	body, err := os.ReadFile("testdata/pages/gravatar.html")
	if err != nil {
		t.Fatal(err)
	}
	tr := set.Trace("https://gravatar.com/ada", body, "text/html", "gravatar")
	if strings.Join(tr.Matched, ",") != "gravatar" {
		t.Fatalf("matched %v", tr.Matched)
	}
	if len(tr.Rules) != 4 {
		t.Fatalf("got %d rules, want 2 url_parsers + 2 fields: %+v", len(tr.Rules), tr.Rules)
	}
	name := tr.Rules[2]
	if name.Field != "name" || len(name.Steps) != 2 || name.Steps[0].Processor != "processors[0] (xpath)" ||
		!strings.Contains(name.Steps[0].Out[0], "\n") || name.Steps[1].Out[0] != "Ada Example" {
		t.Errorf("name trace = %+v", name)
	}
	if len(tr.Extraction.Fields) != 2 {
		t.Errorf("extraction = %+v", tr.Extraction)
	}
}

func TestFixtures(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"extensions.json", "people-ada.html"} {
		data, err := os.ReadFile(filepath.Join("testdata", "mappings", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	res := set.TestFixtures()
	if len(res) != 1 {
		t.Fatalf("got %d results", len(res))
	}
	// The fixture expects only the name: every other field, and the broken
	// field's error, must show up as differences.
	r := res[0]
	if r.OK() || r.Err != nil {
		t.Fatalf("fixture passed or failed to run: %v", r)
	}
	diff := strings.Join(r.Diff, "\n")
	for _, want := range []string{"field email:", `+ got  ["ada@people.example"]`, "error: people-directory/broken/processors[1] (jsonpath)"} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff lacks %q:\n%s", want, diff)
		}
	}
	if strings.Contains(diff, "field name:") {
		t.Errorf("the expected field is reported as different:\n%s", diff)
	}

	if err := os.Remove(filepath.Join(dir, "people-ada.html")); err != nil {
		t.Fatal(err)
	}
	if res := set.TestFixtures(); res[0].Err == nil {
		t.Error("a missing fixture page did not fail")
	}
}
