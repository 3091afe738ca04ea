package provisioning_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backfill/proctest"
	"backfill/provisioning"
	"backfill/wire"
)

// TestRenderAbout: the inventory's [about] table becomes about.html beside
// the hosts' directories, the page the contact URL serves, and render says
// where to host it; without the table render says the page is the
// operator's to write.
func TestRenderAbout(t *testing.T) {
	for _, c := range []struct {
		name, table string
		page        bool
		note        string
	}{
		{"with [about]", "[about]\noperator = \"Example Lab\"\nemail = \"crawl@example.org\"\npurpose = \"We complete a public directory of labs.\"\n\n", true, "at https://example.org/about: the page the crawl's User-Agent links to"},
		{"without", "", false, "no [about] table in the inventory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, hosts := renderValid(t, c.table)
			if notes := strings.Join(hosts[0].Notes, "\n"); !strings.Contains(notes, c.note) {
				t.Errorf("notes %q do not say %q", notes, c.note)
			}
			b, err := os.ReadFile(filepath.Join(out, provisioning.AboutFile))
			if !c.page {
				if err == nil {
					t.Errorf("%s written without an [about] table", provisioning.AboutFile)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"Example Lab", "mailto:crawl@example.org", "We complete a public directory of labs.", "https://example.org/about"} {
				if !strings.Contains(string(b), s) {
					t.Errorf("%s does not say %q", provisioning.AboutFile, s)
				}
			}
		})
	}
}

// renderValid renders validInventory with top-level keys and tables added
// before its [binary] table, and returns the output directory.
func renderValid(t *testing.T, added string) (string, []provisioning.HostOutput) {
	t.Helper()
	if !wire.HasCurve() {
		proctest.NoCurve(t, "libzmq was built without CURVE: no cluster keys to render")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "records.csv"), []byte("id,url\n1,https://example.org/\n"), 0o644)
	path := filepath.Join(dir, "cluster.toml")
	os.WriteFile(path, []byte(strings.Replace(validInventory, "[binary]", added+"[binary]", 1)), 0o644)
	inv, err := provisioning.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "deploy")
	hosts, err := provisioning.Render(inv, out)
	if err != nil {
		t.Fatal(err)
	}
	return out, hosts
}
