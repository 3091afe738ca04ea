package resolver_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"backfill/resolver"
)

// TestParseHosts: a hosts file as machines have them; each bad line is
// skipped and named by file and line, the others kept.
func TestParseHosts(t *testing.T) {
	path := filepath.Join("testdata", "hosts", "mixed")
	h, skipped, err := resolver.ReadHosts(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		want []string
	}{
		{"localhost", []string{"127.0.0.1", "::1"}},
		{"ip6-loopback", []string{"::1"}},
		{"people.example", []string{"192.0.2.10", "192.0.2.13", "2001:db8::5"}},
		{"www.people.example", []string{"192.0.2.10"}},
		{"blog.example.net", []string{"198.51.100.7"}},
		{"linklocal.example", []string{"fe80::1"}},
		{"broken.example", nil},
		{"good.example", nil}, // on a line with a bad name: the whole line goes
	}
	for _, c := range cases {
		var got []string
		for _, ip := range h[c.name] {
			got = append(got, ip.String())
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	var lines []string
	for _, e := range skipped {
		var le *resolver.HostsLineError
		if !errors.As(e, &le) {
			t.Fatalf("skipped line error %T %v", e, e)
		}
		lines = append(lines, e.Error())
	}
	want := []string{path + ":8: ", path + ":9: ", path + ":10: "}
	if len(lines) != len(want) {
		t.Fatalf("skipped %q, want lines 8, 9 and 10", lines)
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("skipped %q, want it at %s", lines[i], want[i])
		}
	}
}

// TestHostsFileMissingOrLong: no file is no names; a line past the bound
// is skipped, not read as a name.
func TestHostsFileMissingOrLong(t *testing.T) {
	h, skipped, err := resolver.ReadHosts(filepath.Join(t.TempDir(), "none"))
	if err != nil || len(h) != 0 || len(skipped) != 0 {
		t.Fatalf("missing file: %v %v %v", h, skipped, err)
	}
	path := filepath.Join(t.TempDir(), "hosts")
	long := "192.0.2.1 " + strings.Repeat("a", 70<<10) + "\n192.0.2.2 after.example\n"
	if err := os.WriteFile(path, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	h, skipped, err = resolver.ReadHosts(path)
	if err != nil || len(skipped) != 1 || !strings.HasPrefix(skipped[0].Error(), path+":1: ") {
		t.Fatalf("long line: skipped %v, err %v", skipped, err)
	}
	if got := h["after.example"]; len(got) != 1 || got[0] != netip.MustParseAddr("192.0.2.2") {
		t.Fatalf("the line after a long one: %v", got)
	}
}

// TestHostsBeforeDNS: a name in the hosts file is answered from it, fresh
// at once, and the DNS server is asked nothing; other names are asked.
func TestHostsBeforeDNS(t *testing.T) {
	s := startServer(t)
	s.Add("www.people.example", pub2) // what DNS would say: the file wins
	s.Add("other.example", pub1)
	h, _, err := resolver.ReadHosts(filepath.Join("testdata", "hosts", "mixed"))
	if err != nil {
		t.Fatal(err)
	}
	c := resolver.NewCache(newResolver(t, s, resolver.Config{}), resolver.CacheConfig{Hosts: h})
	if !c.Fresh("WWW.people.example.") {
		t.Error("a hosts-file name is not fresh: the scheduler would hold its host for a look-up")
	}
	addrs, err := c.Addrs(context.Background(), "www.people.example")
	if err != nil || len(addrs) != 1 || addrs[0] != pub1 {
		t.Fatalf("www.people.example: %v %v, want the hosts file's %v", addrs, err, pub1)
	}
	if q := s.Queries(); q != 0 {
		t.Fatalf("%d queries for a name of the hosts file", q)
	}
	if addrs, err := c.Addrs(context.Background(), "other.example"); err != nil || len(addrs) != 1 || addrs[0] != pub1 {
		t.Fatalf("other.example: %v %v", addrs, err)
	}
	if q := s.Queries(); q != 1 {
		t.Fatalf("%d queries for one name not in the hosts file, want 1", q)
	}
}

// FuzzParseHosts: no input crashes the reader; what it keeps is a name it
// can look up with addresses that parse.
func FuzzParseHosts(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1 localhost\n::1 localhost\n",
		"# comment only\n\n",
		"192.0.2.1\tA.Example. b.example # c\n",
		"fe80::1%eth0 ll\n",
		"x y\n192.0.2.1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, _, err := resolver.ParseHosts(strings.NewReader(string(b)), "fuzz")
		if err != nil {
			t.Fatalf("a reader that cannot fail failed: %v", err)
		}
		for name, addrs := range h {
			if name == "" || strings.ToLower(name) != name || len(addrs) == 0 {
				t.Fatalf("kept %q → %v", name, addrs)
			}
			for _, ip := range addrs {
				if !ip.IsValid() || ip.Zone() != "" {
					t.Fatalf("kept %q → %v", name, ip)
				}
			}
		}
	})
}
