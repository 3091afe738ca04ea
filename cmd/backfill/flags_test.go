package main

import (
	"strings"
	"testing"
	"time"

	"backfill/dispatcher"
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
