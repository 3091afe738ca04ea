package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backfill/testweb"
)

// TestMappingsCommands runs the authoring tools as a user would.
func TestMappingsCommands(t *testing.T) {
	web, err := testweb.Start(testweb.Options{CrawlDelay: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	live := []string{"--allow-loopback", "--contact", "https://backfill.invalid/test"}
	for host, addr := range web.Resolve() {
		live = append(live, "--resolve", host+":"+addr)
	}
	// A host whose robots.txt fails: that is not a "disallow".
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	noLoopback := []string{"--contact", "https://backfill.invalid/test"}
	for host, addr := range web.Resolve() {
		noLoopback = append(noLoopback, "--resolve", host+":"+addr)
	}
	page := filepath.Join(t.TempDir(), "alice.html")
	if err := os.WriteFile(page, []byte(`<html><body><div class="profile"><h1 class="fn">Alice Moreau</h1><p class="location">Lyon, France</p></div></body></html>`), 0o644); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name    string
		args    []string
		code    int
		want    []string // in stdout+stderr
		notWant []string
	}{
		{"check bundled", []string{"mappings", "check"}, exitOK, []string{"ok:", "mappings", "location"}, nil},
		{"check reports every error", []string{"mappings", "check", "testdata/badmaps"}, exitFail,
			[]string{"one.json:", `"one"`, "xpath", "two.json:", "xpathh", "2 error(s)"}, nil},
		{"check missing dir", []string{"mappings", "check", "testdata/nope"}, exitFail, []string{"testdata/nope"}, nil},
		{"test bundled fixtures", []string{"mappings", "test"}, exitOK, []string{"fixtures, 0 failed"}, []string{"FAIL"}},
		{"try saved page", []string{"mappings", "try", "--url", "http://people.example/p/alice", page}, exitOK,
			[]string{"testweb-people", "processors[0] (xpath)", `"Alice Moreau"`, `location = ["Lyon, France"]`}, nil},
		{"try with the standard parser", []string{"mappings", "try", "--html-parser", "standard", "--url", "http://people.example/p/alice", page}, exitOK,
			[]string{"HTML parser: standard", `"Alice Moreau"`, `location = ["Lyon, France"]`}, nil},
		{"try unknown parser", []string{"mappings", "try", "--html-parser", "quick", "--url", "http://people.example/p/alice", page}, exitUsage,
			[]string{"--html-parser", `unknown HTML parser "quick"`}, nil},
		{"try saved page needs url", []string{"mappings", "try", page}, exitUsage, []string{"--url"}, nil},
		{"try live page", append(append([]string{"mappings", "try"}, live...), "http://people.example/p/alice"), exitOK,
			[]string{"status 200", "testweb-people", "location = "}, nil},
		{"try obeys robots.txt", append(append([]string{"mappings", "try"}, live...), "http://staff.example.org/private/kim.html"), exitFail,
			[]string{"robots.txt of staff.example.org disallows"}, nil},
		{"try loopback without --allow-loopback", append(append([]string{"mappings", "try"}, noLoopback...), "http://people.example/p/alice"), exitFail,
			[]string{"people.example: the address guard refuses it", "(loopback)", "pass --allow-loopback"}, []string{"disallow"}},
		{"try with robots.txt failing", []string{"mappings", "try", "--allow-loopback", down.URL + "/p/alice"}, exitFail,
			[]string{"could not be read", "robots.txt answered status 503", "nothing is fetched"}, []string{"disallow"}},
		{"try unknown mapping", []string{"mappings", "try", "--mapping", "nope", "--url", "http://a.example/", page}, exitUsage, []string{`no mapping named "nope"`}, nil},
		{"unknown subcommand", []string{"mappings", "lint"}, exitUsage, []string{`unknown mappings subcommand "lint"`}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := mainExit(c.args, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s", code, c.code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not mention %q:\n%s", w, out)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(out, w) {
					t.Errorf("output mentions %q:\n%s", w, out)
				}
			}
		})
	}
	for _, r := range web.Log() {
		if strings.HasPrefix(r.Path, "/private/") {
			t.Errorf("mappings try requested the disallowed %s%s", r.Host, r.Path)
		}
	}
}

// TestMappingsTestUpdate: a stale expectation fails `mappings test`, and
// `--update` makes it pass again.
func TestMappingsTestUpdate(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "testdata"), 0o755)
	mapping, err := os.ReadFile("../../mappings/contact.json")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("../../mappings/testdata/contact.html")
	if err != nil {
		t.Fatal(err)
	}
	stale := strings.Replace(string(mapping), "jobs@shop.example", "old@shop.example", 1)
	if stale == string(mapping) {
		t.Fatal("fixture expectation to make stale not found")
	}
	os.WriteFile(filepath.Join(dir, "contact.json"), []byte(stale), 0o644)
	os.WriteFile(filepath.Join(dir, "testdata", "contact.html"), page, 0o644)

	steps := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"mappings", "test", dir}, exitFail, "old@shop.example"},
		{[]string{"mappings", "test", "--update", dir}, exitOK, "1 fixture(s) updated"},
		{[]string{"mappings", "test", dir}, exitOK, "1 fixtures, 0 failed"},
	}
	for _, s := range steps {
		var stdout, stderr bytes.Buffer
		code := mainExit(s.args, &stdout, &stderr)
		out := stdout.String() + stderr.String()
		if code != s.code || !strings.Contains(out, s.want) {
			t.Fatalf("%v: exit %d (want %d), output should mention %q:\n%s", s.args, code, s.code, s.want, out)
		}
	}
}
