package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backfill/dispatcher"
)

func TestDispatcherFilterFlags(t *testing.T) {
	dir := t.TempDir()
	records := filepath.Join(dir, "r.csv")
	top := filepath.Join(dir, "top.csv")
	deny := filepath.Join(dir, "deny.txt")
	for _, p := range []string{records, top, deny} {
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := []string{"--records", records}
	cases := []struct {
		name    string
		args    []string
		want    func(c dispatcher.Config) bool
		wantErr string
	}{
		{"defaults", nil, func(c dispatcher.Config) bool {
			return c.HostBudget == 1000 && c.RecordBudget == 200 && c.MaxPathDepth == 16 &&
				c.MaxRepeats == 3 && c.MaxFanout == 100 && c.ExcludeTop == 0 && c.Blacklist == ""
		}, ""},
		{"zero is no limit", []string{"--host-budget", "0", "--record-budget", "0", "--max-path-depth", "0", "--max-repeats", "0", "--max-fanout", "0"},
			func(c dispatcher.Config) bool {
				return c.HostBudget < 0 && c.RecordBudget < 0 && c.MaxPathDepth < 0 && c.MaxRepeats < 0 && c.MaxFanout < 0
			}, ""},
		{"lists", []string{"--top-sites", top, "--exclude-top", "20000", "--blacklist", deny},
			func(c dispatcher.Config) bool {
				return c.TopSites == top && c.ExcludeTop == 20000 && c.Blacklist == deny
			}, ""},
		{"exclude without list", []string{"--exclude-top", "5"}, nil, "--exclude-top needs --top-sites"},
		{"negative", []string{"--max-fanout", "-1"}, nil, "must not be negative"},
		{"missing blacklist", []string{"--blacklist", filepath.Join(dir, "nope")}, nil, "blacklist file"},
		{"retry defaults", nil, func(c dispatcher.Config) bool {
			return c.RetryAttempts == dispatcher.DefaultRetryAttempts && !c.RetryFailed
		}, ""},
		{"retry never", []string{"--retry-attempts", "0"}, func(c dispatcher.Config) bool { return c.RetryAttempts < 0 }, ""},
		{"retry everything", []string{"--retry-attempts", "5", "--retry-failed"}, func(c dispatcher.Config) bool {
			return c.RetryAttempts == 5 && c.RetryFailed
		}, ""},
		{"negative retries", []string{"--retry-attempts", "-1"}, nil, "--retry-attempts must not be negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var d dispatcherFlags
			d.register(fs)
			if err := fs.Parse(append(append([]string{}, base...), c.args...)); err != nil {
				t.Fatal(err)
			}
			err := d.validate()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("validate = %v, want an error with %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg := d.config("", nil, nil, nil); !c.want(cfg) {
				t.Errorf("config %+v", cfg)
			}
		})
	}
}

// Another flag group (the supervisors') may register --blacklist first:
// the dispatcher then reads the same value instead of redefining it.
func TestDispatcherBlacklistFlagShared(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	theirs := fs.String("blacklist", "", "")
	var d dispatcherFlags
	d.register(fs)
	if err := fs.Parse([]string{"--blacklist", "deny.txt"}); err != nil {
		t.Fatal(err)
	}
	if *theirs != "deny.txt" || d.blacklistPath() != "deny.txt" {
		t.Errorf("blacklist: theirs %q, dispatcher %q", *theirs, d.blacklistPath())
	}
	if err := d.validate(); err == nil || !errors.Is(err, errUsage) {
		t.Errorf("validate without --records = %v, want a usage error", err)
	}
}

func TestPrintSummaryFiltered(t *testing.T) {
	var b bytes.Buffer
	printSummary(&b, &dispatcher.Summary{
		Filtered:  map[string]int64{dispatcher.FilterTopSite: 3, dispatcher.FilterBlacklisted: 1},
		LinkFarms: 2, BadTopSites: 4,
	})
	want := "links not followed: blacklisted=1 top-site=3  (link farms: 2, malformed top-sites lines: 4)"
	if !strings.Contains(b.String(), want) {
		t.Errorf("summary\n%s\nwant a line %q", b.String(), want)
	}
	b.Reset()
	printSummary(&b, &dispatcher.Summary{})
	if strings.Contains(b.String(), "not followed") {
		t.Errorf("summary without filtered links mentions them:\n%s", b.String())
	}
}
