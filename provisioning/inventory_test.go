package provisioning_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"backfill/provisioning"
)

// validInventory is the base the bad inventories change.
const validInventory = `name = "crawl"
contact = "https://example.org/about"
admin_ssh_keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA+IP+iX90r+4oi42DMtA8w2NL5Bav8elMiumyXISmsu admin@example"]

[binary]
url = "https://example.org/backfill"
sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

[crawl]
records = "records.csv"

[mongodb]

[[hosts]]
name = "dispatcher"
address = "203.0.113.10"
memory = "1G"
roles = ["dispatcher"]

[[hosts]]
name = "db"
address = "203.0.113.11"
memory = "1G"
roles = ["mongodb"]

[[hosts]]
name = "crawler-1"
address = "203.0.113.12"
memory = "512M"
roles = ["supervisor"]
`

// TestBadInventories: each mistake is an error naming the file, the line
// it is on and the field.
func TestBadInventories(t *testing.T) {
	cases := []struct {
		name     string
		old, new string // the change to validInventory
		line     string // a text on the line the error must name ("" for none)
		field    string
		msg      string
	}{
		{"duplicate host", `name = "crawler-1"`, `name = "db"`, `name = "db"
address = "203.0.113.12"`, "hosts[3].name", `duplicate host "db" (first at line 21)`},
		{"unknown role", `roles = ["supervisor"]`, `roles = ["crawler"]`, `roles = ["crawler"]`, "hosts[3].roles", `unknown role "crawler"`},
		{"no dispatcher", `roles = ["dispatcher"]`, `roles = ["supervisor"]`, `[[hosts]]`, "hosts", "no host has the dispatcher role"},
		{"two dispatchers", `roles = ["mongodb"]`, `roles = ["mongodb", "dispatcher"]`, `roles = ["mongodb", "dispatcher"]`, "hosts[2].roles", "a second dispatcher (dispatcher is one already)"},
		{"missing SSH key", `admin_ssh_keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA+IP+iX90r+4oi42DMtA8w2NL5Bav8elMiumyXISmsu admin@example"]`, `admin_ssh_keys = []`, `admin_ssh_keys = []`, "admin_ssh_keys", "missing: at least one OpenSSH public key"},
		{"bad SSH key", `AAAAIA+IP+iX90r`, `AAAAIA+IP+iX90rX`, `admin_ssh_keys`, "admin_ssh_keys[1]", "ssh-ed25519 key"},
		{"plaintext MongoDB on a public address", "[mongodb]\n", "[mongodb]\ntls = false\n", `tls = false`, "mongodb.tls", "false would serve MongoDB in plaintext on a public address (203.0.113.11:27017) for dispatcher"},
		{"unknown field", `memory = "512M"`, "memory = \"512M\"\nmemroy = \"1G\"", `memroy`, "hosts.memroy", "unknown field"},
		{"syntax error", `name = "crawl"`, `name = "crawl`, `name = "crawl`, "", "toml: basic strings cannot have new lines"},
		{"too little memory for MongoDB", `memory = "1G"
roles = ["mongodb"]`, `memory = "512M"
roles = ["mongodb"]`, `memory = "512M"
roles = ["mongodb"]`, "hosts[2].memory", "512M: the mongodb role needs a droplet of at least 1024 MiB"},
		{"no records", `records = "records.csv"`, `records = "nowhere.csv"`, `records = "nowhere.csv"`, "crawl.records", "nowhere.csv: no such file"},
		{"placeholder contact", `contact = "https://example.org/about"`, `contact = "https://backfill.invalid/about-the-crawler"`, `contact = "https://backfill.invalid`, "contact", `"https://backfill.invalid/about-the-crawler": still the .invalid placeholder`},
		{"about without email", "[binary]\n", "[about]\noperator = \"Example Lab\"\n\n[binary]\n", `[about]`, "about", "email \"\": want an address"},
		{"unknown encryption", "[binary]\n", "encryption = \"rot13\"\n\n[binary]\n", `encryption = "rot13"`, "encryption", `"rot13": want "provider"`},
		{"address twice", `address = "203.0.113.12"`, `address = "203.0.113.11"`, `address = "203.0.113.11"
memory = "512M"`, "hosts[3].address", "203.0.113.11 is also the address of db"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(validInventory, c.old) {
				t.Fatalf("the base inventory has no %q", c.old)
			}
			text := strings.Replace(validInventory, c.old, c.new, 1)
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "records.csv"), []byte("id,url\n1,https://example.org/\n"), 0o644)
			path := filepath.Join(dir, "cluster.toml")
			os.WriteFile(path, []byte(text), 0o644)
			_, err := provisioning.Load(path)
			if err == nil {
				t.Fatal("accepted")
			}
			want := path + ":" + strconv.Itoa(lineOf(t, text, c.line)) + ": "
			if c.field != "" {
				want += c.field + ": "
			}
			want += c.msg
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error\n  %v\nwant one containing\n  %s", err, want)
			}
		})
	}
}

// lineOf is the line on which text starts in doc.
func lineOf(t *testing.T, doc, text string) int {
	t.Helper()
	i := strings.Index(doc, text)
	if i < 0 {
		t.Fatalf("%q is not in the inventory", text)
	}
	return strings.Count(doc[:i], "\n") + 1
}

// TestSecretReadableByOthers: a secret in the keys directory that others
// may read is refused at the keys field's line.
func TestSecretReadableByOthers(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "records.csv"), []byte("id,url\n1,https://example.org/\n"), 0o644)
	text := strings.Replace(validInventory, "[binary]", "keys = \"secrets\"\n\n[binary]", 1)
	path := filepath.Join(dir, "cluster.toml")
	os.WriteFile(path, []byte(text), 0o644)
	os.MkdirAll(filepath.Join(dir, "secrets"), 0o700)
	os.WriteFile(filepath.Join(dir, "secrets", "crawler-1.key"), []byte("# secret\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "secrets", "crawler-1.pub"), []byte("# public\n"), 0o644)
	_, err := provisioning.Load(path)
	want := path + ":" + strconv.Itoa(lineOf(t, text, `keys = "secrets"`)) + ": keys: secret " + filepath.Join(dir, "secrets", "crawler-1.key") + " is readable by others (mode 0644)"
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "crawler-1.pub") {
		t.Fatalf("error %v\nwant %s", err, want)
	}
}

// TestExampleRenders: the inventory `provision init` writes renders as it
// is, once its records file exists.
func TestExampleRenders(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.toml")
	if err := provisioning.WriteExample(path); err != nil {
		t.Fatal(err)
	}
	if err := provisioning.WriteExample(path); err == nil {
		t.Error("init wrote over an existing inventory")
	}
	if _, err := provisioning.Load(path); err == nil || !strings.Contains(err.Error(), "crawl.records") {
		t.Errorf("the example without its records: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "records.csv"), []byte("id,url\n1,https://example.org/\n"), 0o644)
	inv, err := provisioning.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provisioning.Render(inv, filepath.Join(dir, "deploy")); err != nil {
		t.Fatal(err)
	}
}

// TestExecLine: command lines survive systemd's quoting.
func TestExecLine(t *testing.T) {
	args := []string{"/usr/local/bin/backfill", "supervisor", "--contact", "https://example.org/a%20b", "--name", `odd "name" \ $HOME`, "--store", "${BACKFILL_STORE}", ""}
	line, err := provisioning.ExecLine(args)
	if err != nil {
		t.Fatal(err)
	}
	got, err := splitExecLine(line)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != strings.Join(args, "|") {
		t.Errorf("ExecLine %q splits into %q, want %q", line, got, args)
	}
	if _, err := provisioning.ExecLine([]string{"backfill"}); err == nil {
		t.Error("a relative program path was accepted")
	}
}
