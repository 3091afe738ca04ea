package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	at := func(complete, pages int64, sec int) dispatcher.Progress {
		return dispatcher.Progress{Records: 10, Complete: int(complete), Pages: pages, Elapsed: time.Duration(sec) * time.Second}
	}
	cases := []struct {
		name string
		prs  []dispatcher.Progress
		want []string
	}{
		{"half done in ten seconds", []dispatcher.Progress{at(0, 0, 0), at(5, 20, 10)},
			[]string{"5/10 records complete", "ETA 10s", "2.0 pages/s", strings.Repeat("█", 5) + strings.Repeat("░", 5)}},
		{"nothing complete yet", []dispatcher.Progress{at(0, 0, 0), at(0, 3, 1)}, []string{"0/10", "ETA ?", "3.0 pages/s"}},
		{"one report", []dispatcher.Progress{at(2, 1, 1)}, []string{"2/10", "ETA ?", "0.0 pages/s"}},
		// The window forgets what is older than rateWindow: the rate is
		// the last 30 seconds', not the whole run's.
		{"window", []dispatcher.Progress{at(0, 0, 0), at(1, 100, 60), at(4, 130, 90)},
			[]string{"4/10", "1.0 pages/s", "ETA 1m0s"}},
		{"all complete", []dispatcher.Progress{{Records: 4, Complete: 4, Elapsed: time.Second}}, []string{"4/4", "ETA 0s", strings.Repeat("█", 10)}},
		// The dispatcher's ETA, from the pages left per host, comes before
		// what the records completed say, from the first report.
		{"the hosts bound it", []dispatcher.Progress{{Records: 10, Elapsed: time.Second, ETA: dispatcher.ETA{Seconds: 360, Estimate: 400,
			Host: "a.example", HostRequests: 25, HostCycle: 15, HostSeconds: 360, RateSeconds: 100, Pages: 30, Hosts: 4}}},
			[]string{"ETA 6m40s (≥ 6m0s: host a.example, 25 requests one every 15.0s)"}},
		{"empty", []dispatcher.Progress{{}}, []string{"0/0"}},
	}
	for _, c := range cases {
		var r rates
		for _, pr := range c.prs {
			r.add(pr)
		}
		got := progressLine(c.prs[len(c.prs)-1], &r, 10)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: progressLine = %q, want it to contain %q", c.name, got, w)
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

// TestTerminalLogAboveProgress: a log line written while the progress
// line is on screen clears it, prints, and draws it again below.
func TestTerminalLogAboveProgress(t *testing.T) {
	var b strings.Builder
	term := newTerminal(&b)
	term.update(dispatcher.Progress{Records: 2, Complete: 1, Pages: 3})
	line := term.line
	if line == "" || !strings.HasSuffix(b.String(), line+"\x1b[K") {
		t.Fatalf("no progress line drawn: %q", b.String())
	}
	b.Reset()
	fmt.Fprint(term, "level=INFO msg=hello\n")
	if want := "\r\x1b[Klevel=INFO msg=hello\n" + line; b.String() != want {
		t.Errorf("log write = %q, want %q", b.String(), want)
	}
	b.Reset()
	term.finish()
	fmt.Fprint(term, "after\n")
	if b.String() != "\nafter\n" {
		t.Errorf("after finish: %q, want the line ended and the log plain", b.String())
	}
}

// TestProgressLog: without a terminal, progress is a log line every
// progressLogEvery of the run, with the rate and the ETA.
func TestProgressLog(t *testing.T) {
	var b strings.Builder
	p := &progressLog{log: slog.New(slog.NewJSONHandler(&b, nil))}
	for s := 0; s <= 70; s += 5 {
		p.update(dispatcher.Progress{Records: 100, Complete: s, Pages: int64(2 * s), Elapsed: time.Duration(s) * time.Second})
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d progress lines over 70s, want 2 (at 30s and 60s):\n%s", len(lines), b.String())
	}
	for _, want := range []string{`"msg":"progress"`, `"complete":60`, `"pages_per_sec":2`, `"eta":"40s"`} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("progress line %s lacks %s", lines[1], want)
		}
	}
}
