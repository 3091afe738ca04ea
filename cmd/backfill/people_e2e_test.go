package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backfill/dispatcher"
	"backfill/proctest"
	"backfill/supervisor"
	"backfill/testweb"
)

// TestPeopleWebEndToEnd crawls the people web (testweb.StartPeople) with
// `backfill run` to depth 2, a real dispatcher and supervisor over ZeroMQ
// and SQLite state and store, in two runs on one state directory: in the
// first one host is down (its connections refused), in the second it is
// back. Each run ends with exactly the values testweb.PeopleTruth computes
// for it: every findable record filled, none with a value it should not
// have; the rerun retries the failed pages, and only those, and says so;
// and no host is asked twice within its Crawl-delay, across both runs.
//
// Each leg is one row. The render leg runs the supervisor with a browser:
// the JavaScript profiles are filled too, the browser's requests are in
// the web's log like any other (no favicon or image among them), and the
// only pages rendered are JavaScript profiles, whose HTML holds nothing:
// no page whose HTML sufficed is rendered because the other mappings of
// its URL pattern found nothing there.
func TestPeopleWebEndToEnd(t *testing.T) {
	proctest.Short(t, "end-to-end crawl")
	const crawlDelay = 50 * time.Millisecond
	browser := findChromium()
	for _, leg := range []struct {
		name           string
		flags          []string
		render         bool // JavaScript profiles are filled too
		hosts, records int
	}{
		{"static", nil, false, 100, 300},
		// A smaller web: every JavaScript profile a record needs is
		// rendered, about one in five of them, and a render takes about
		// a second of a tab.
		{"render", []string{"--render", "--render-tabs", "4", "--chromium", browser, "--log-level", "debug"}, true, 40, 120},
	} {
		t.Run(leg.name, func(t *testing.T) {
			if leg.render && browser == "" {
				proctest.NoChromium(t, "no Chromium on PATH (Debian package chromium; `make deps-render` installs it): the render leg needs one")
			}
			web, err := testweb.StartPeople(testweb.PeopleOptions{Hosts: leg.hosts, Pages: 4, Records: leg.records, CrawlDelay: crawlDelay})
			if err != nil {
				t.Fatal(err)
			}
			defer web.Close()
			dir := t.TempDir()
			records := filepath.Join(dir, "records.csv")
			maps := filepath.Join(dir, "mappings")
			if err := os.WriteFile(records, testweb.PeopleRecords(web), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(maps, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, b := range testweb.PeopleMappings() {
				if err := os.WriteFile(filepath.Join(maps, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			full := testweb.PeopleCrawl{Depth: 2, Render: leg.render}
			want := testweb.PeopleTruth(web, full)
			// The host to take down: the first whose absence loses values.
			var down string
			var wantDown map[string]map[string]string
			for _, h := range web.Hosts() {
				c := full
				c.Down = []string{h}
				if td := testweb.PeopleTruth(web, c); filledCount(td) < filledCount(want) {
					down, wantDown = h, td
					break
				}
			}
			if down == "" {
				t.Fatal("no host of the people web holds a findable value")
			}
			if err := web.SetDown(down, true); err != nil {
				t.Fatal(err)
			}
			stateDir := filepath.Join(dir, "state")
			var rendered []string // pages the dispatcher sent to be rendered, over both runs
			run := func(name string) *dispatcher.Summary {
				t.Helper()
				summaryPath := filepath.Join(dir, name+".json")
				args := []string{"run", "--records", records, "--mappings", maps, "--state-dir", stateDir,
					"--depth", "2", "--summary", summaryPath, "--allow-loopback", "--delay", "1s", "--workers", "16",
					"--contact", "https://backfill.invalid/people-e2e"}
				for host, addr := range web.Resolve() {
					args = append(args, "--resolve", host+":"+addr)
				}
				args = append(args, leg.flags...)
				var stdout, stderr bytes.Buffer
				start := time.Now()
				if code := mainExit(args, &stdout, &stderr); code != exitOK {
					t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", name, code, stdout.String(), stderr.String())
				}
				t.Logf("%s took %v; summary:%s", name, time.Since(start).Round(time.Millisecond), stdout.String())
				rendered = append(rendered, renderedPages(t, stderr.Bytes())...)
				var sum dispatcher.Summary
				if b, err := os.ReadFile(summaryPath); err != nil {
					t.Fatal(err)
				} else if err := json.Unmarshal(b, &sum); err != nil {
					t.Fatalf("summary file: %v", err)
				}
				return &sum
			}

			// Run 1: the host is down.
			first := run("run-1")
			if first.Errors["connect"] == 0 {
				t.Errorf("run 1 with %s down: errors %v, want connect failures", down, first.Errors)
			}
			checkTruth(t, "run 1 ("+down+" down)", exportJS(t, stateDir), wantDown)

			// Run 2: the host is back; its failed pages are retried.
			if err := web.SetDown(down, false); err != nil {
				t.Fatal(err)
			}
			before := len(web.Log())
			second := run("run-2")
			// A failed page is retried while a record that wants it is
			// incomplete: with rendering, a record can complete in run 1
			// through a JavaScript profile and no longer need a page of
			// the down host.
			if n := second.Retried["connect"]; n == 0 || n > first.Errors["connect"] {
				t.Errorf("run 2 retried %v, want some of the %d connect failures of run 1, and no more", second.Retried, first.Errors["connect"])
			}
			checkTruth(t, "run 2", exportJS(t, stateDir), want)
			for _, r := range web.Log()[before:] {
				if r.Host == down {
					continue
				}
				// Elsewhere only what the retried pages led to: pages new
				// to the crawl (nothing is asked twice: checkPoliteness),
				// a soft-404 probe, and no robots.txt (the store has it).
				if r.Path == "/robots.txt" {
					t.Errorf("run 2 asked %s for robots.txt again", r.Host)
				}
			}
			checkPoliteness(t, web.Log(), crawlDelay)
			for _, r := range web.Log() {
				if r.Path == "/favicon.ico" || strings.HasPrefix(r.Path, "/img/") {
					t.Errorf("%s%s requested: no mapping allows the browser images", r.Host, r.Path)
				}
			}
			if !leg.render {
				return
			}
			if len(rendered) == 0 {
				t.Fatal("no page was rendered")
			}
			js := 0
			for _, u := range rendered {
				body := peoplePage(t, web, u)
				if !strings.Contains(body, `<div id="root"></div>`) {
					t.Errorf("%s rendered, but its HTML is no JavaScript shell:\n%s", u, body)
					continue
				}
				js++
			}
			t.Logf("%d pages rendered, %d of them JavaScript profiles", len(rendered), js)
		})
	}
}

// findChromium returns the browser a render node would start, "" when
// there is none on PATH.
func findChromium() string {
	p, _ := supervisor.FindBrowser()
	return p
}

// renderedPages lists the URLs a run's dispatcher sent to be rendered, from
// its debug log.
func renderedPages(t *testing.T, log []byte) []string {
	t.Helper()
	var urls []string
	for _, line := range bytes.Split(log, []byte("\n")) {
		if !bytes.Contains(line, []byte(`"page queued again to be rendered"`)) {
			continue
		}
		var l struct{ URL string }
		if err := json.Unmarshal(line, &l); err != nil || l.URL == "" {
			t.Fatalf("log line %q: %v", line, err)
		}
		urls = append(urls, l.URL)
	}
	return urls
}

// peoplePage gets a page of the people web as it is served, outside the
// crawl (after its requests were checked).
func peoplePage(t *testing.T, web *testweb.Web, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	addr, ok := web.Resolve()[u.Hostname()+":"+port]
	if !ok {
		t.Fatalf("%s: not a host of the web", rawURL)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
	resp, err := client.Get(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func filledCount(truth map[string]map[string]string) int {
	n := 0
	for _, fields := range truth {
		for _, v := range fields {
			if v != "" {
				n++
			}
		}
	}
	return n
}

// checkTruth compares an export with the truth: every target field, and
// nothing filled that is not a target.
func checkTruth(t *testing.T, what string, got, truth map[string]map[string]string) {
	t.Helper()
	if len(got) != len(truth) {
		t.Errorf("%s: export has %d records, truth %d", what, len(got), len(truth))
	}
	missed, wrong := 0, 0
	for id, fields := range truth {
		for f, want := range fields {
			if g := got[id][f]; g != want {
				if g == "" {
					missed++
				} else {
					wrong++
				}
				t.Errorf("%s: record %s field %s = %q, want %q", what, id, f, g, want)
			}
		}
		for f, v := range got[id] {
			if _, ok := fields[f]; !ok {
				t.Errorf("%s: record %s field %s filled with %q but it is not a target", what, id, f, v)
			}
		}
	}
	t.Logf("%s: %d values to find, %d missed, %d wrong", what, filledCount(truth), missed, wrong)
}
