package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// storeSecret is the password of the store URIs below: no message may
// show it.
const storeSecret = "pw-Zq81xT"

// TestStoreFile: --store-file gives the store's URI from a file that
// only its owner may read, with # comments; every error names the file,
// never what it holds.
func TestStoreFile(t *testing.T) {
	dir := t.TempDir()
	uri := "mongodb://crawler:" + storeSecret + "@127.0.0.1:1/crawl?authSource=admin&tls=true"
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name    string
		sf      storeFlags
		want    string // the URI, or a part of the error
		wantErr bool
		usage   bool
	}{
		{"commented", storeFlags{file: write("ok", "# the crawl's MongoDB\n\n"+uri+"\r\n", 0o600)}, uri, false, false},
		{"owner read only", storeFlags{file: write("ro", uri, 0o400)}, uri, false, false},
		{"no file", storeFlags{uri: "results.db"}, "results.db", false, false},
		{"group readable", storeFlags{file: write("group", uri, 0o640)}, "group: readable by others (mode 0640)", true, false},
		{"world readable", storeFlags{file: write("world", uri+"\n", 0o644)}, "world: readable by others (mode 0644)", true, false},
		{"two URIs", storeFlags{file: write("two", uri+"\n"+uri+"\n", 0o600)}, "two:2: a second line", true, false},
		{"only comments", storeFlags{file: write("empty", "# nothing\n\n", 0o600)}, "empty: no URI in it", true, false},
		{"missing", storeFlags{file: filepath.Join(dir, "nope")}, "nope", true, false},
		{"both flags", storeFlags{uri: uri, file: write("both", uri, 0o600)}, "--store or --store-file, not both", true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.sf.target()
			switch {
			case c.wantErr && err == nil:
				t.Fatalf("target() = %q, want an error", got)
			case !c.wantErr && err != nil:
				t.Fatalf("target(): %v", err)
			case !c.wantErr && got != c.want:
				t.Errorf("target() = %q, want %q", got, c.want)
			case c.wantErr:
				if !strings.Contains(err.Error(), c.want) {
					t.Errorf("error %q does not say %q", err, c.want)
				}
				if strings.Contains(err.Error(), storeSecret) {
					t.Errorf("error %q shows the password", err)
				}
				if errors.Is(err, errUsage) != c.usage {
					t.Errorf("error %q: usage error = %v, want %v", err, !c.usage, c.usage)
				}
			}
		})
	}
}

// TestStoreFileEveryCommand: each command that takes --store takes
// --store-file too and refuses one that others may read, and a store
// that cannot be reached is reported without its password.
func TestStoreFileEveryCommand(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "store-open")
	os.WriteFile(open, []byte("mongodb://crawler:"+storeSecret+"@127.0.0.1:1/crawl\n"), 0o644)
	records := filepath.Join(dir, "records.csv")
	os.WriteFile(records, []byte("id,homepage\n1,http://a.example/\n"), 0o644)
	domains := filepath.Join(dir, "domains.txt")
	os.WriteFile(domains, []byte("a.example\n"), 0o644)
	state := filepath.Join(dir, "state")
	for _, args := range [][]string{
		{"run", "--records", records},
		{"dispatcher", "--records", records},
		{"supervisor", "--dispatcher", "tcp://127.0.0.1:1"},
		{"export"},
		{"report"},
		{"survey", "web", "--domains", domains},
		{"survey", "ports", "--targets", "127.0.0.1"},
	} {
		name := args[0]
		if name == "survey" {
			name += " " + args[1]
		}
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := mainExit(append(args, "--state-dir", state, "--store-file", open), &stdout, &stderr)
			if code == exitOK || !strings.Contains(stderr.String(), open+": readable by others") {
				t.Errorf("exit %d, stderr %q: want the world-readable %s refused", code, stderr.String(), open)
			}
		})
	}

	os.Chmod(open, 0o600)
	var stdout, stderr bytes.Buffer
	code := mainExit([]string{"export", "--store-file", open, "--store-timeout", "500ms", "--store-retry", "0"}, &stdout, &stderr)
	if code == exitOK || !strings.Contains(stderr.String(), "mongodb://crawler@127.0.0.1:1/crawl") {
		t.Errorf("export from an unreachable store: exit %d, stderr %q; want the URI named without its password", code, stderr.String())
	}
	if strings.Contains(stderr.String(), storeSecret) {
		t.Errorf("export's error shows the password: %q", stderr.String())
	}
}
