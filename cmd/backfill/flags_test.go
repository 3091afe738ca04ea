package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"backfill/dispatcher"
	"backfill/etl"
)

func TestResolveFlag(t *testing.T) {
	cases := []struct {
		in      string
		key     string
		addr    string
		wantErr bool
	}{
		{"People.Example:80:127.0.0.1:8080", "people.example:80", "127.0.0.1:8080", false},
		{"v6.example:443:[::1]:8443", "v6.example:443", "[::1]:8443", false},
		{"nohost", "", "", true},
		{"a.example:80", "", "", true},
		{":80:127.0.0.1:1", "", "", true},
	}
	for _, c := range cases {
		r := resolveFlag{}
		err := r.Set(c.in)
		if (err != nil) != c.wantErr {
			t.Errorf("Set(%q) error = %v, want error %v", c.in, err, c.wantErr)
			continue
		}
		if !c.wantErr && r[c.key] != c.addr {
			t.Errorf("Set(%q) → %v, want %s → %s", c.in, r, c.key, c.addr)
		}
	}
}

func TestProgressLine(t *testing.T) {
	cases := []struct {
		pr   dispatcher.Progress
		want []string
	}{
		{dispatcher.Progress{Records: 10, Complete: 5, Elapsed: 10 * time.Second}, []string{"5/10 records complete", "ETA 10s", strings.Repeat("█", 5) + strings.Repeat("░", 5)}},
		{dispatcher.Progress{Records: 10, Complete: 0, Elapsed: time.Second}, []string{"0/10", "ETA ?"}},
		{dispatcher.Progress{Records: 4, Complete: 4, Elapsed: time.Second}, []string{"4/4", "ETA 0s", strings.Repeat("█", 10)}},
		{dispatcher.Progress{}, []string{"0/0"}},
	}
	for _, c := range cases {
		got := progressLine(c.pr, 10)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("progressLine(%+v) = %q, want it to contain %q", c.pr, got, w)
			}
		}
	}
}

// TestHTMLParserFlag: the switch reaches the supervisors' mapping set, its
// environment variable sets only the default, and a bad name is a usage
// error naming both.
func TestHTMLParserFlag(t *testing.T) {
	set, err := loadSet("")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env, flag string
		want      etl.HTMLParser
		bad       bool
	}{
		{"", "", etl.ParserFast, false},
		{"", "standard", etl.ParserStandard, false},
		{"standard", "", etl.ParserStandard, false},
		{"standard", "fast", etl.ParserFast, false},
		{"", "quick", 0, true},
		{"quick", "", 0, true},
	} {
		t.Setenv(htmlParserEnv, c.env)
		fs := newFlagSet("test", io.Discard)
		var cf crawlerFlags
		cf.register(fs)
		var args []string
		if c.flag != "" {
			args = []string{"--html-parser", c.flag}
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		err := cf.validate()
		if c.bad {
			if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), htmlParserEnv) {
				t.Errorf("env %q flag %q: error %v, want a usage error naming %s", c.env, c.flag, err, htmlParserEnv)
			}
			continue
		}
		if err != nil {
			t.Fatalf("env %q flag %q: %v", c.env, c.flag, err)
		}
		if got := cf.supervisorConfig("s", "tcp://127.0.0.1:1", set, nil, nil).Mappings.HTMLParser(); got != c.want {
			t.Errorf("env %q flag %q: the supervisor parses with %v, want %v", c.env, c.flag, got, c.want)
		}
	}
}
