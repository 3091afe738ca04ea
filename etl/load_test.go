package etl

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestLoadErrors loads each broken mapping under testdata/load and compares
// every error message with the golden file beside it.
func TestLoadErrors(t *testing.T) {
	files, err := filepath.Glob("testdata/load/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no load fixtures: %v", err)
	}
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			set, err := Load(map[string][]byte{name: data})
			if err == nil {
				t.Fatalf("loaded %d mappings, want an error", len(set.Mappings()))
			}
			if set != nil {
				t.Fatal("a set came back with an error")
			}
			var b strings.Builder
			for _, e := range Unjoin(err) {
				var le *LoadError
				if !errors.As(e, &le) {
					t.Errorf("error %q is not a *LoadError", e)
				}
				b.WriteString(e.Error())
				b.WriteString("\n")
			}
			golden := strings.TrimSuffix(file, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if b.String() != string(want) {
				t.Errorf("errors differ from %s\n--- got\n%s--- want\n%s", golden, b.String(), want)
			}
		})
	}
}

func TestLoadDirCollectsAllFiles(t *testing.T) {
	dir := t.TempDir()
	good := `{"name":"ok","url_patterns":[{"type":"regex","pattern":"^https://ok\\.example/"}],"fields":[{"name":"x","processors":[{"type":"trim"}]}]}`
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.json", good)
	write("b.json", good) // duplicate name "ok"
	write("c.json", `{"name":"c","fields":[{"name":"x","processors":[{"type":"nope"}]}]}`)
	write("d.json", `{`)
	write("schema.json", `{"$schema":"https://json-schema.org/draft/2020-12/schema"}`) // skipped
	write("notes.txt", "not a mapping")                                                // skipped
	_, err := LoadDir(dir)
	errs := Unjoin(err)
	if len(errs) != 3 {
		t.Fatalf("got %d errors, want 3: %v", len(errs), err)
	}
	for i, want := range []string{
		filepath.Join(dir, "b.json") + `:1:9: mapping "ok": duplicate mapping name, already defined in ` + filepath.Join(dir, "a.json"),
		filepath.Join(dir, "c.json") + `:1:57: mapping "c": fields[0] "x": processors[0] (nope): unknown processor type "nope"`,
		filepath.Join(dir, "d.json") + `:1:2: JSON syntax error: unexpected end of JSON input`,
	} {
		if !strings.HasPrefix(errs[i].Error(), want) {
			t.Errorf("error %d = %q\nwant prefix %q", i, errs[i], want)
		}
	}
	if got := Check(dir); len(got) != 3 {
		t.Errorf("Check returned %d errors, want 3", len(got))
	}

	if _, err := LoadDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("LoadDir of a missing directory succeeded")
	}
	if _, err := LoadDir(filepath.Join(dir, "notes.txt")); err == nil {
		t.Error("LoadDir of a file succeeded")
	}
}

func TestLoadSeedFormat(t *testing.T) {
	set := loadTestSet(t, "gravatar.json")
	ms := set.Mappings()
	if len(ms) != 1 || ms[0].Name != "gravatar" || !ms[0].Follow || ms[0].Render != RenderAuto || ms[0].Priority != 0 {
		t.Fatalf("unexpected mappings %+v", ms)
	}
	if got := strings.Join(set.FieldNames(), ","); got != "location,name" {
		t.Errorf("FieldNames = %s", got)
	}
	for u, want := range map[string]bool{
		"https://gravatar.com/ada":       true,
		"http://en.gravatar.com/ada/":    true,
		"https://www.gravatar.com/ada":   true,
		"https://gravatar.com/avatar":    false, // the seed's negative lookahead
		"https://gravatar.com/support":   false,
		"https://gravatar.com/ada/more":  false,
		"https://notgravatar.example/ab": false,
	} {
		if got, _ := set.Matches(u); got != want {
			t.Errorf("Matches(%s) = %v, want %v", u, got, want)
		}
	}
	if set.Digest() == "" {
		t.Error("empty digest")
	}
	other := loadTestSet(t, "gravatar.json", "extensions.json")
	if other.Digest() == set.Digest() {
		t.Error("different sets share a digest")
	}
	again := loadTestSet(t, "gravatar.json")
	if again.Digest() != set.Digest() {
		t.Error("same content, different digest")
	}
}

func TestLoadExtensions(t *testing.T) {
	set := loadTestSet(t, "extensions.json")
	m := set.Mapping("people-directory")
	if m == nil {
		t.Fatal("mapping people-directory missing")
	}
	if m.Render != RenderAlways || m.Priority != 5 || m.Follow {
		t.Errorf("options not loaded: %+v", m)
	}
	if ok, prio := set.Matches("https://people.example/p/ada"); !ok || prio != 5 {
		t.Errorf("Matches = %v, %d", ok, prio)
	}
	if !set.NeedsRender("https://people.example/p/ada") || set.NeedsRender("https://other.example/") {
		t.Error("NeedsRender wrong")
	}
	if ok, _ := set.Matches("https://anything.example/"); ok {
		t.Error("a generic mapping made an arbitrary URL match")
	}
	// The fields a page may give: its mappings' and the generic ones'.
	if got, want := strings.Join(set.FieldsAt("https://people.example/p/ada"), ","), "born,broken,email,followers,name,phone,tags,title,website"; got != want {
		t.Errorf("FieldsAt(a profile) = %s, want %s", got, want)
	}
	if got := strings.Join(set.FieldsAt("https://anything.example/"), ","); got != "title" {
		t.Errorf("FieldsAt(any page) = %s, want the generic mapping's title", got)
	}
	if ok, prio, fields := set.Applies("https://people.example/p/ada"); !ok || prio != 5 || len(fields) != 9 {
		t.Errorf("Applies(a profile) = %v, %d, %q; want Matches' and FieldsAt's", ok, prio, fields)
	}
	if len(m.Fixtures()) != 1 || m.Fixtures()[0].Fields["name"][0] != "Ada Example" {
		t.Errorf("fixtures not loaded: %+v", m.Fixtures())
	}
	for field, want := range map[string]string{"name": TypeString, "email": TypeEmail, "followers": TypeNumber, "tags": TypeList, "nope": ""} {
		if got := m.FieldType(field); got != want {
			t.Errorf("FieldType(%q) = %q, want %q", field, got, want)
		}
	}
}

// TestLoadRenderOptions checks render (modes, and booleans as older files
// have them) and render_resources, and what the set answers from them.
func TestLoadRenderOptions(t *testing.T) {
	set := loadTestSet(t, "render.json")
	for name, want := range map[string]RenderMode{
		"legacy-true": RenderAlways, "legacy-false": RenderAuto, "never": RenderNever,
		"always-images": RenderAlways, "auto-fonts": RenderAuto, "default": RenderAuto,
	} {
		if m := set.Mapping(name); m == nil || m.Render != want {
			t.Errorf("mapping %s: render %v, want %v", name, m.Render, want)
		}
	}
	for u, want := range map[string]bool{
		"https://a.example/x": true, "https://b.example/x": false, "https://c.example/x": false,
		"https://d.example/x": true, "https://e.example/x": false,
	} {
		if got := set.NeedsRender(u); got != want {
			t.Errorf("NeedsRender(%s) = %v, want %v", u, got, want)
		}
	}
	for u, want := range map[string]string{
		"https://d.example/x":   "stylesheet,image",
		"https://d.example/p/1": "stylesheet,image,font", // both mappings, in the order of RenderResourceKinds
		"https://e.example/x":   "",
	} {
		if got := strings.Join(set.RenderResources(u), ","); got != want {
			t.Errorf("RenderResources(%s) = %q, want %q", u, got, want)
		}
	}
}

// loadTestSet loads mapping files from testdata/mappings (and the bundled
// gravatar mapping by its name).
func loadTestSet(t testing.TB, names ...string) *Set {
	t.Helper()
	files := map[string][]byte{}
	for _, n := range names {
		p := filepath.Join("testdata", "mappings", n)
		if n == "gravatar.json" {
			p = filepath.Join("..", "mappings", n)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[n] = data
	}
	set, err := Load(files)
	if err != nil {
		t.Fatalf("load %v: %v", names, err)
	}
	return set
}
