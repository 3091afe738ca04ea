package provisioning_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backfill/provisioning"
)

// TestEncryptionAtRest: the inventory's encryption reaches the droplets.
// With "luks" every host gets backfill-unlock (shellcheck passes it) and
// its services wait for the encrypted volume (systemd-analyze passes
// them); with "provider" nothing more is needed; with neither, provision
// check warns for every host.
func TestEncryptionAtRest(t *testing.T) {
	for _, c := range []struct {
		name, line string
		unlock     bool
		warn       bool
	}{
		{"none", "", false, true},
		{"provider", "encryption = \"provider\"\n", false, false},
		{"luks", "encryption = \"luks\"\n", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, _ := renderValid(t, c.line+"\n")
			read := func(host, p string) string {
				b, _ := os.ReadFile(filepath.Join(out, host, provisioning.FilesDir, filepath.FromSlash(p)))
				return string(b)
			}
			if got := read("crawler-1", "/etc/backfill/encryption"); !strings.HasSuffix(got, "\n"+c.name+"\n") {
				t.Errorf("/etc/backfill/encryption says %q, want %s", got, c.name)
			}
			if c.name != "provider" { // the validators take seconds: the cases that differ
				rep, err := provisioning.Check(context.Background(), out)
				if err != nil {
					t.Fatal(err)
				}
				warned := strings.Join(rep.Warnings, "\n")
				if c.warn != (len(rep.Warnings) == 3) || (c.warn && !strings.Contains(warned, `not encrypted at rest: set encryption = "provider"`)) {
					t.Errorf("warnings:\n%s\nwant one per host: %v", warned, c.warn)
				}
			}
			unlock := read("db", "/usr/local/sbin/backfill-unlock")
			if c.unlock != (unlock != "") {
				t.Fatalf("backfill-unlock rendered: %v, want %v", unlock != "", c.unlock)
			}
			if !c.unlock {
				return
			}
			for host, want := range map[string][]string{
				"db":         {"mount --bind \"$mnt/mongodb\" /var/lib/mongodb", "systemctl start mongod.service"},
				"dispatcher": {"mount --bind \"$mnt/backfill\" /var/lib/backfill", "systemctl start backfill-dispatcher.service", "cryptsetup open --key-file=\"$key\""},
			} {
				for _, w := range want {
					if s := read(host, "/usr/local/sbin/backfill-unlock"); !strings.Contains(s, w) {
						t.Errorf("%s: backfill-unlock does not say %q", host, w)
					}
				}
			}
			if s := read("dispatcher", "/etc/systemd/system/backfill-dispatcher.service"); !strings.Contains(s, "ConditionPathIsMountPoint=/var/lib/backfill") {
				t.Errorf("the dispatcher's unit does not wait for the encrypted volume:\n%s", s)
			}
			if s := read("db", "/etc/systemd/system/mongod.service.d/backfill.conf"); !strings.Contains(s, "ConditionPathIsMountPoint=/var/lib/mongodb") {
				t.Errorf("mongod does not wait for the encrypted volume:\n%s", s)
			}
		})
	}
}

// TestLUKSKeysMade: with encryption = "luks", render makes each host's
// LUKS key in the cluster's keys directory (random, mode 0600), says how
// to send it, and writes it into no file that goes to a droplet.
func TestLUKSKeysMade(t *testing.T) {
	out, hosts := renderValid(t, "encryption = \"luks\"\n")
	keys := filepath.Join(filepath.Dir(out), "cluster.keys")
	if len(hosts) == 0 {
		t.Fatal("no hosts rendered")
	}
	for _, h := range hosts {
		path := filepath.Join(keys, h.Name+".luks")
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatalf("%s: no LUKS key made: %v", h.Name, err)
		}
		if fi.Mode().Perm() != 0o600 || fi.Size() != 64 {
			t.Errorf("%s: key %s mode %v, %d bytes; want 0600 and 64 bytes", h.Name, path, fi.Mode().Perm(), fi.Size())
		}
		key, _ := os.ReadFile(path)
		if notes := strings.Join(h.Notes, "\n"); !strings.Contains(notes, path) || !strings.Contains(notes, "backfill-unlock --format") {
			t.Errorf("%s: render's notes do not say how to send %s:\n%s", h.Name, path, notes)
		}
		filepath.WalkDir(filepath.Join(out, h.Name), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if b, _ := os.ReadFile(p); bytes.Contains(b, key) {
					t.Errorf("%s: the LUKS key is in %s, which goes to the droplet", h.Name, p)
				}
			}
			return nil
		})
	}
	if _, err := os.Stat(filepath.Join(keys, "crawler-1.luks")); err != nil {
		t.Fatal(err)
	}
}
