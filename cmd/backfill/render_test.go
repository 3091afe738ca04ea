package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backfill/dispatcher"
	"backfill/proctest"
	"backfill/testweb"
)

// TestRenderEndToEnd crawls the fixture web's app.example, whose profiles
// get their data from a script, with `backfill run` in this process: once
// without --render, when the JavaScript records stay unfilled and the
// summary says the pages may need rendering, and once with --render, when
// the dispatcher sends the profiles again to the render-capable supervisor
// and the records end at SampleJS's truth. Either way the Crawl-delay holds
// for every request app.example gets, the browser's included (each
// profile's data, no favicon), each profile page is requested once (the
// render starts from the HTML its fetch got), and with --render no browser
// process or profile is left afterwards.
func TestRenderEndToEnd(t *testing.T) {
	proctest.Short(t, "end-to-end crawl with a browser")
	browser := findChromium()
	if browser == "" {
		proctest.NoChromium(t, "no Chromium on PATH (Debian package chromium; `make deps-render` installs it): the render test needs one")
	}
	const crawlDelay = time.Second
	web, err := testweb.Start(testweb.Options{CrawlDelay: int(crawlDelay / time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()

	dir := t.TempDir()
	records, truth := testweb.SampleJS()
	recordsPath := filepath.Join(dir, "records.csv")
	if err := os.WriteFile(recordsPath, records, 0o644); err != nil {
		t.Fatal(err)
	}
	// The browser's profile directories are made under TMPDIR: point it at
	// a directory of the test's, to tell whether anything of it is left.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)

	for _, tc := range []struct {
		name   string
		flags  []string
		filled bool
	}{
		{"without render", nil, false},
		{"with render", []string{"--render", "--render-tabs", "2", "--render-timeout", "15s", "--chromium", browser}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stateDir := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			summaryPath := filepath.Join(dir, tc.name+".json")
			start := time.Now()
			args := []string{"run", "--records", recordsPath, "--state-dir", stateDir, "--summary", summaryPath,
				"--allow-loopback", "--delay", "1s", "--contact", "https://backfill.invalid/render-e2e"}
			for host, addr := range web.Resolve() {
				args = append(args, "--resolve", host+":"+addr)
			}
			args = append(args, tc.flags...)
			var stdout, stderr bytes.Buffer
			if code := mainExit(args, &stdout, &stderr); code != exitOK {
				t.Fatalf("run exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			t.Logf("run took %v; summary:%s", time.Since(start).Round(time.Millisecond), stdout.String())
			if tc.filled != strings.Contains(stderr.String(), `"msg":"renderer started"`) {
				t.Errorf("renderer started = %v, want %v", !tc.filled, tc.filled)
			}
			// The supervisor's last word says what the browser cost.
			stoppedLines := 0
			for _, line := range strings.Split(stderr.String(), "\n") {
				if !strings.Contains(line, `"msg":"supervisor stopped"`) {
					continue
				}
				stoppedLines++
				var stopped struct {
					RenderRSS *uint64 `json:"render_rss"`
					Rendered  int64   `json:"rendered"`
				}
				if err := json.Unmarshal([]byte(line), &stopped); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if tc.filled && (stopped.RenderRSS == nil || *stopped.RenderRSS == 0 || stopped.Rendered != 3) {
					t.Errorf("stopped line %s: want the browser's memory and 3 pages rendered", line)
				}
				if !tc.filled && stopped.RenderRSS != nil {
					t.Errorf("stopped line %s: browser memory reported without --render", line)
				}
			}
			if stoppedLines != 1 {
				t.Errorf("%d \"supervisor stopped\" log lines, want 1", stoppedLines)
			}

			var sum dispatcher.Summary
			if b, err := os.ReadFile(summaryPath); err != nil {
				t.Fatal(err)
			} else if err := json.Unmarshal(b, &sum); err != nil {
				t.Fatalf("summary file: %v", err)
			}
			// Every profile's HTML left the mapping empty-handed: rendered
			// again with a render node, reported without one.
			if tc.filled && (sum.RenderRetried != 3 || sum.RenderWanted != 0) {
				t.Errorf("render retried %d, wanted %d; want 3 and 0", sum.RenderRetried, sum.RenderWanted)
			}
			if !tc.filled {
				if sum.RenderRetried != 0 || sum.RenderWanted != 3 {
					t.Errorf("render retried %d, wanted %d; want 0 and 3", sum.RenderRetried, sum.RenderWanted)
				}
				if !strings.Contains(stdout.String(), "need JavaScript") || !strings.Contains(stdout.String(), "--render") {
					t.Errorf("summary does not tell the user to render:\n%s", stdout.String())
				}
			}

			got := exportJS(t, stateDir)
			for id, fields := range truth {
				for f, want := range fields {
					if !tc.filled {
						want = ""
					}
					if g := got[id][f]; g != want {
						t.Errorf("record %s field %s = %q, want %q", id, f, g, want)
					}
				}
			}

			// Every request app.example got keeps the Crawl-delay, what
			// the pages' scripts load included; each profile is fetched
			// once, and with a render node its data too.
			var last time.Time
			perPage := map[string]int{}
			for _, r := range web.Log() {
				if r.Host != "app.example" || r.Time.Before(start) {
					continue
				}
				if !strings.Contains(r.UserAgent, "backfill/") {
					t.Errorf("%s requested with User-Agent %q", r.Path, r.UserAgent)
				}
				if !last.IsZero() && r.Time.Sub(last) < crawlDelay {
					t.Errorf("%s requested %v after the previous request to app.example; Crawl-delay is %v", r.Path, r.Time.Sub(last), crawlDelay)
				}
				last = r.Time
				perPage[r.Path]++
			}
			for p, n := range perPage {
				if n > 1 {
					t.Errorf("%s requested %d times, want once (requests: %v)", p, n, perPage)
				}
			}
			for _, slug := range []string{"maya", "omar", "pia"} {
				if perPage["/u/"+slug] != 1 {
					t.Errorf("/u/%s requested %d times, want once (requests: %v)", slug, perPage["/u/"+slug], perPage)
				}
				data := 0
				if tc.filled {
					data = 1
				}
				if perPage["/api/u/"+slug+".json"] != data {
					t.Errorf("/api/u/%s.json requested %d times, want %d (requests: %v)", slug, perPage["/api/u/"+slug+".json"], data, perPage)
				}
			}
			if perPage["/favicon.ico"] != 0 {
				t.Errorf("/favicon.ico requested %d times: the browser's own request must not go out", perPage["/favicon.ico"])
			}
		})
	}

	// Nothing of any browser is left: no process of a profile under tmp,
	// no profile directory.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte("--user-data-dir="+tmp)) {
			t.Errorf("browser process left after the run: %s: %s", filepath.Dir(p), bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("left in TMPDIR after the run: %v", names)
	}
}

// exportJS exports the records of a state directory: id → field → value,
// for the fields that were filled.
func exportJS(t *testing.T, stateDir string) map[string]map[string]string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := mainExit([]string{"export", "--state-dir", stateDir, "--format", "jsonl", "--provenance"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("export exit %d: %s", code, stderr.String())
	}
	got := foundValues(t, &stdout)
	return got
}

// TestRenderFlags checks how the render flags become a supervisor's
// RenderConfig.
func TestRenderFlags(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		usage   bool // a usage error
		render  bool // a RenderConfig
		tabs    int
		timeout time.Duration
		exec    string
	}{
		{"off by default", nil, false, false, 0, 0, ""},
		{"chromium alone renders nothing", []string{"--chromium", "/opt/chromium"}, false, false, 0, 0, ""},
		{"defaults", []string{"--render"}, false, true, 2, 20 * time.Second, ""},
		{"set", []string{"--render", "--render-tabs", "4", "--render-timeout", "5s", "--chromium", "/opt/chromium"}, false, true, 4, 5 * time.Second, "/opt/chromium"},
		{"no tabs", []string{"--render", "--render-tabs", "0"}, true, false, 0, 0, ""},
		{"no time", []string{"--render", "--render-timeout", "0s"}, true, false, 0, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cf crawlerFlags
			fs := newFlagSet("supervisor", &bytes.Buffer{})
			cf.register(fs)
			cf.render.register(fs)
			if err := parse(fs, c.args); err != nil {
				t.Fatalf("parse: %v", err)
			}
			err := cf.validate()
			if c.usage {
				if !errors.Is(err, errUsage) {
					t.Errorf("validate: %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("validate: %v", err)
			}
			rc := cf.supervisorConfig("s", "tcp://127.0.0.1:1", nil, nil, nil).Render
			if (rc != nil) != c.render {
				t.Fatalf("RenderConfig %+v, want one: %v", rc, c.render)
			}
			if rc != nil && (rc.Tabs != c.tabs || rc.PageTimeout != c.timeout || rc.Exec != c.exec) {
				t.Errorf("RenderConfig %+v, want %d tabs, timeout %v, exec %q", rc, c.tabs, c.timeout, c.exec)
			}
		})
	}
}
