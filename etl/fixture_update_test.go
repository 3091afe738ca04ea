package etl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyFiles copies testdata/update/<names> into a fresh directory.
func copyFiles(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join("testdata", "update", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestUpdateFixtures(t *testing.T) {
	dir := copyFiles(t, "team.json", "team.html")
	path := filepath.Join(dir, "team.json")

	// Before: the stale fixture fails.
	set, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	failing := 0
	for _, r := range set.TestFixtures() {
		if !r.OK() {
			failing++
		}
	}
	if failing != 1 {
		t.Fatalf("%d fixtures fail before the update, want 1", failing)
	}

	changed, err := UpdateFixtures(path)
	if err != nil || changed != 1 {
		t.Fatalf("UpdateFixtures = %d, %v; want 1, nil", changed, err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "update", "team.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("updated file differs from %s\n--- got\n%s--- want\n%s", golden, got, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("file mode not kept: %v %v", fi.Mode(), err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".team.json.*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	// After: the file still loads, every fixture passes, and a second
	// update changes nothing, byte for byte.
	set, err = LoadDir(dir)
	if err != nil {
		t.Fatalf("updated file does not load: %v", err)
	}
	for _, r := range set.TestFixtures() {
		if !r.OK() {
			t.Errorf("after update: %s", r)
		}
	}
	if changed, err := UpdateFixtures(path); err != nil || changed != 0 {
		t.Errorf("second UpdateFixtures = %d, %v; want 0, nil", changed, err)
	}
	again, _ := os.ReadFile(path)
	if string(again) != string(got) {
		t.Error("a no-op update rewrote the file")
	}
}

func TestUpdateFixturesKeepsOrderAndValues(t *testing.T) {
	got, err := os.ReadFile(filepath.Join("testdata", "update", "team.golden"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	// The mapping's keys in canonical order, whatever order the file had.
	last := -1
	for _, k := range []string{`"$schema"`, `"name": "team"`, `"url_patterns"`, `"url_parsers"`, `"fields"`, `"priority"`, `"fixtures"`} {
		i := strings.Index(s, k)
		if i < last {
			t.Errorf("%s out of order", k)
		}
		last = i
	}
	for _, want := range []string{
		`"expression": "//a[contains(@href, '/people/')]/@href"`, // no \u0027 or \u003c escapes
		`"pattern": "^https://team\\.example/"`,
		`"description": "stale: the name changed and links were never recorded"`,
		`"title": "The team"`, // the fixture that was right is left as written
		`"https://team.example/people/alan"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("updated file lacks %s", want)
		}
	}
}

func TestUpdateFixturesErrors(t *testing.T) {
	t.Run("missing page", func(t *testing.T) {
		dir := copyFiles(t, "team.json")
		path := filepath.Join(dir, "team.json")
		before, _ := os.ReadFile(path)
		if n, err := UpdateFixtures(path); err == nil || n != 0 || !strings.Contains(err.Error(), "team.html") {
			t.Errorf("UpdateFixtures = %d, %v; want an error naming the page", n, err)
		}
		after, _ := os.ReadFile(path)
		if string(before) != string(after) {
			t.Error("file changed although the update failed")
		}
	})
	t.Run("invalid mapping", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "bad.json")
		if err := os.WriteFile(path, []byte(`{"name": "bad", "fields": [{"name": "x", "processors": [{"type": "nope"}]}]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := UpdateFixtures(path); err == nil || !strings.Contains(err.Error(), `bad.json:1:`) {
			t.Errorf("err = %v, want a located load error", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		if _, err := UpdateFixtures(filepath.Join(t.TempDir(), "none.json")); err == nil {
			t.Error("no error for a missing file")
		}
	})
	t.Run("errors that new expectations cannot fix", func(t *testing.T) {
		dir := copyFiles(t, "team.html")
		path := filepath.Join(dir, "broken.json")
		src := `[{"name": "broken", "url_patterns": [{"pattern": "^https://team\\.example/"}],
 "fields": [{"name": "data", "processors": [{"type": "xpath", "parameters": {"expression": "//title"}}, {"type": "jsonpath", "parameters": {"expression": "$.x"}}]},
            {"name": "title", "processors": [{"type": "xpath", "parameters": {"expression": "//title"}}]}],
 "fixtures": [{"url": "https://team.example/", "file": "team.html"}]},
 {"name": "elsewhere", "url_patterns": [{"pattern": "^https://other\\.example/"}],
 "fields": [{"name": "title", "processors": [{"type": "xpath", "parameters": {"expression": "//title"}}]}],
 "fixtures": [{"url": "https://team.example/", "file": "team.html"}]}]`
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		n, err := UpdateFixtures(path)
		if n != 1 || err == nil {
			t.Fatalf("UpdateFixtures = %d, %v; want 1 and the remaining problems", n, err)
		}
		for _, want := range []string{"does not match the mapping's url_patterns", "jsonpath"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
		got, _ := os.ReadFile(path)
		if !strings.Contains(string(got), `"title": [`+"\n") || !strings.Contains(string(got), `"Team & friends"`) {
			t.Errorf("expectation not written:\n%s", got)
		}
	})
}
