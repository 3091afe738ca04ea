package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBlacklistFlag: --blacklist reads the file into the fetcher's deny
// list (IPs, CIDRs) and the supervisor's host list; a bad line is an error
// naming file:line.
func TestBlacklistFlag(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.txt")
	bad := filepath.Join(dir, "bad.txt")
	os.WriteFile(good, []byte("# never\nbad.example\n192.0.2.1\n198.51.100.0/24\n"), 0o644)
	os.WriteFile(bad, []byte("bad.example\nnot a host\n"), 0o644)
	cases := []struct {
		file     string
		err      string
		hosts    int
		prefixes int
	}{
		{file: good, hosts: 1, prefixes: 2},
		{file: bad, err: bad + ":2: "},
		{file: filepath.Join(dir, "missing.txt"), err: "missing.txt"},
		{file: ""},
	}
	for _, tc := range cases {
		var c crawlerFlags
		fs := newFlagSet("supervisor", io.Discard)
		c.register(fs)
		args := []string{}
		if tc.file != "" {
			args = append(args, "--blacklist", tc.file)
		}
		if err := parse(fs, args); err != nil {
			t.Fatal(err)
		}
		err := c.validate()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one with %q", tc.file, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		cfg := c.supervisorConfig("s", "tcp://127.0.0.1:1", nil, nil, nil)
		if len(cfg.Blacklist.Hosts) != tc.hosts || len(cfg.Fetch.Deny) != tc.prefixes {
			t.Errorf("%s: %d hosts and %d denied prefixes, want %d and %d", tc.file,
				len(cfg.Blacklist.Hosts), len(cfg.Fetch.Deny), tc.hosts, tc.prefixes)
		}
	}
}
