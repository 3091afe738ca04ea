package fetch

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseBlacklist(t *testing.T) {
	good := "# hosts we were asked to leave alone\n" +
		"Example.TEST.\n" +
		"\n" +
		"  tracker.example   # and its subdomains\n" +
		"192.0.2.7\n" +
		"2001:db8::1\n" +
		"198.51.100.0/24\n" +
		"2001:db8:1::/48\n" +
		"198.51.100.77/24\n" +
		"Bücher.example\n"
	bl, err := ParseBlacklist(strings.NewReader(good), "list.txt")
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, h := range bl.Hosts {
		hosts = append(hosts, h.Host+"@"+h.Where)
	}
	if got, want := strings.Join(hosts, " "), "example.test@list.txt:2 tracker.example@list.txt:4 xn--bcher-kva.example@list.txt:10"; got != want {
		t.Errorf("hosts %q, want %q", got, want)
	}
	var prefixes []string
	for _, p := range bl.Prefixes {
		prefixes = append(prefixes, p.String())
	}
	if got, want := strings.Join(prefixes, " "), "192.0.2.7/32 2001:db8::1/128 198.51.100.0/24 2001:db8:1::/48 198.51.100.0/24"; got != want {
		t.Errorf("prefixes %q, want %q", got, want)
	}

	bad := []struct{ text, want string }{
		{"ok.test\nnot a host\n", "list.txt:2: "},
		{"10.0.0.0/33\n", "list.txt:1: \"10.0.0.0/33\" is not a CIDR"},
		{"a..test\n", "list.txt:1: "},
		{"\n\nhttp://a.test/\n", "list.txt:3: "},
		{"a.test:8080\n", "list.txt:1: "},
		{"fe80::1%eth0\n", "list.txt:1: "},
		{strings.Repeat("a", 64) + ".test\n", "list.txt:1: "},
		{"xn--zz.test\n", "list.txt:1: \"xn--zz.test\" is not a host name"},
	}
	for _, tc := range bad {
		_, err := ParseBlacklist(strings.NewReader(tc.text), "list.txt")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParseBlacklist(%q) error %v, want one starting %q", tc.text, err, tc.want)
		}
	}

	path := filepath.Join(t.TempDir(), "blacklist.txt")
	if err := os.WriteFile(path, []byte("a.test\n\n???\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBlacklist(path); err == nil || !strings.Contains(err.Error(), path+":3: ") {
		t.Errorf("LoadBlacklist error %v, want one naming %s:3", err, path)
	}
	if _, err := LoadBlacklist(filepath.Join(t.TempDir(), "missing.txt")); err == nil {
		t.Error("LoadBlacklist of a missing file succeeded")
	}
}

// FuzzBlacklist: parsing never panics; what it accepts is well formed,
// and an error names the file and a line.
func FuzzBlacklist(f *testing.F) {
	f.Add([]byte("a.test\n# c\n10.0.0.0/8\n::1\n"))
	f.Add([]byte("Ex_ample.TEST.  # x\n\n192.0.2.1/32\n"))
	f.Add([]byte("bad host\n"))
	f.Add([]byte("1.2.3.4/99\n\xff\xfe\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		bl, err := ParseBlacklist(bytes.NewReader(data), "f")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f:") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for _, h := range bl.Hosts {
			if h.Host == "" || h.Host != strings.ToLower(h.Host) || strings.ContainsAny(h.Host, " /:#") || !strings.HasPrefix(h.Where, "f:") {
				t.Fatalf("bad host entry %+v", h)
			}
		}
		for _, p := range bl.Prefixes {
			if !p.IsValid() || p != p.Masked() {
				t.Fatalf("bad prefix %v", p)
			}
		}
	})
}
