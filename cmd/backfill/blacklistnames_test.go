package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backfill/resolver/resolvertest"
)

// TestBlacklistedNamesNeverLookedUp: `mappings try` and `mappings learn`
// refuse a host name on --blacklist (or a subdomain of one) before asking
// DNS about it, whether it is asked for or a redirect leads there; the
// DNS server on loopback that every unpinned name goes to never hears of
// it.
func TestBlacklistedNamesNeverLookedUp(t *testing.T) {
	dns, err := resolvertest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dns.Close)
	hop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		http.Redirect(w, r, "http://www.blocked.test/p", http.StatusFound)
	}))
	t.Cleanup(hop.Close)
	dir := t.TempDir()
	list := filepath.Join(dir, "blacklist.txt")
	if err := os.WriteFile(list, []byte("# never\nblocked.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--allow-loopback", "--blacklist", list, "--resolver", dns.Addr, "--delay", "0",
		"--resolve", "hop.example:80:" + strings.TrimPrefix(hop.URL, "http://")}
	cases := []struct {
		name string
		args []string
	}{
		{"try", append([]string{"mappings", "try"}, append(common, "http://www.blocked.test/p")...)},
		{"try through a redirect", append([]string{"mappings", "try"}, append(common, "http://hop.example/go")...)},
		{"learn", append([]string{"mappings", "learn", "-o", filepath.Join(dir, "learned"), "--url", "http://deep.www.blocked.test/p",
			"--value", "name=Ada Lovelace", "--value", "location=London"}, common...)},
		{"learn through a redirect", append([]string{"mappings", "learn", "-o", filepath.Join(dir, "learned2"), "--url", "http://hop.example/go",
			"--value", "name=Ada Lovelace", "--value", "location=London"}, common...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := mainExit(tc.args, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code == exitOK {
				t.Errorf("exit 0 for a blacklisted host:\n%s", out)
			}
			if !strings.Contains(out, "blacklist") {
				t.Errorf("the output does not say the host is blacklisted:\n%s", out)
			}
			for q := range dns.Asked() {
				if strings.Contains(q, "blocked.test") {
					t.Errorf("the blacklisted name was looked up: %s", q)
				}
			}
		})
	}
}
