package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backfill/dispatcher"
	"backfill/learn"
	"backfill/proctest"
	"backfill/store"
	"backfill/supervisor"
	"backfill/testweb"
)

// The `mappings learn --state-dir` tests learn from the templates web:
// learnStateTeachers are the teachers of every template (or of one).

// learnStateTeachers writes the teachers of the templates web (perTemplate
// of each; only those of host when it is not "") into dir and returns the
// file.
func learnStateTeachers(t *testing.T, dir string, perTemplate int, host string) string {
	t.Helper()
	teachers, _, _, _ := splitTemplateRecords(perTemplate)
	if host != "" {
		lines := strings.SplitAfter(string(teachers), "\n")
		keep := lines[0]
		for _, l := range lines[1:] {
			if strings.Contains(l, "://"+host+"/") {
				keep += l
			}
		}
		teachers = []byte(keep)
	}
	path := filepath.Join(dir, "people.csv")
	if err := os.WriteFile(path, teachers, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startLearnWeb starts the templates web for the test.
func startLearnWeb(t *testing.T) *testweb.Web {
	t.Helper()
	web, err := testweb.StartTemplates(testweb.TemplatesOptions{PerTemplate: learnPerTemplate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { web.Close() })
	return web
}

// learnArgs are the command on records over stateDir, writing
// into out, pointed at web.
func learnArgs(web *testweb.Web, records, stateDir, out string) []string {
	args := []string{"mappings", "learn", "--records", records, "--fields", "location,website,email", "--state-dir", stateDir, "-o", out}
	return append(args, webFlags(web)...)
}

// readTree reads every file under dir, by path relative to it.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestLearnStateDirKeepsTeacherPages runs the command with
// --state-dir, then learns again over the same state directory (the same
// fields, then other fields and folds): the later learnings ask the web
// for nothing, say that every page came from the state directory, and
// write the same mappings.
func TestLearnStateDirKeepsTeacherPages(t *testing.T) {
	proctest.Short(t, "learns from the templates web")
	web := startLearnWeb(t)
	dir := t.TempDir()
	records := learnStateTeachers(t, dir, 5, "")
	stateDir := filepath.Join(dir, "backfill-state")
	kept := filepath.Join(stateDir, learn.PageCacheFile)
	learnOnce := func(out string, extra ...string) string {
		return runBackfill(t, append(learnArgs(web, records, stateDir, filepath.Join(dir, out)), extra...)...)
	}

	first := learnOnce("learned")
	asked := len(web.Log())
	pages := 0
	for _, r := range web.Log() {
		if r.Path != "/robots.txt" {
			pages++
		}
	}
	checkPoliteness(t, web.Log(), 0)
	if want := fmt.Sprintf("teacher pages: 0 read from %s, %d fetched\n", kept, pages); pages == 0 || !strings.Contains(first, want) {
		t.Fatalf("the first learning does not say %q:\n%s", want, first)
	}
	if !strings.Contains(first, "5 mapping(s) learned") {
		t.Errorf("the first learning did not learn every template:\n%s", first)
	}
	want := readTree(t, filepath.Join(dir, "learned"))

	cases := []struct {
		name, out string
		extra     []string
		same      bool // writes what the first learning wrote
	}{
		{"the same learning", "again", nil, true},
		{"other fields and folds", "other", []string{"--fields", "location", "--folds", "3"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := learnOnce(c.out, c.extra...)
			if n := len(web.Log()); n != asked {
				t.Errorf("learning over the kept pages asked the web %d more times: %v", n-asked, web.Log()[asked:])
			}
			if w := fmt.Sprintf("teacher pages: %d read from %s, 0 fetched\n", pages, kept); !strings.Contains(out, w) {
				t.Errorf("the output does not say %q:\n%s", w, out)
			}
			if !strings.Contains(out, "5 mapping(s) learned") {
				t.Errorf("not every template learned:\n%s", out)
			}
			if !c.same {
				return
			}
			got := readTree(t, filepath.Join(dir, c.out))
			for name, body := range want {
				if got[name] != body {
					t.Errorf("%s differs from the first learning's", name)
				}
			}
			if len(got) != len(want) {
				t.Errorf("wrote %d files, the first learning %d", len(got), len(want))
			}
		})
	}
}

// TestLearnWaitsForTheCrawlsHosts: a last-crawl time in the state
// directory's store holds learning's first request to that host (its
// robots.txt) until the crawl's time, taken as late as a supervisor may
// write it, plus the delay; learning's own requests are recorded there.
func TestLearnWaitsForTheCrawlsHosts(t *testing.T) {
	proctest.Short(t, "learns from the templates web")
	web := startLearnWeb(t)
	dir := t.TempDir()
	const host = "directory.example"
	records := learnStateTeachers(t, dir, 3, host)
	stateDir := filepath.Join(dir, "state")
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(stateDir, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutLastCrawl(ctx, host, time.Now()); err != nil {
		t.Fatal(err)
	}
	crawled, err := st.LastCrawl(ctx, host) // as the store keeps it
	if err != nil {
		t.Fatal(err)
	}

	const delay = 500 * time.Millisecond
	args := learnArgs(web, records, stateDir, filepath.Join(dir, "learned"))
	out := runBackfill(t, append(args, "--delay", delay.String())...)
	if !strings.Contains(out, "1 mapping(s) learned") {
		t.Errorf("learning from %s:\n%s", host, out)
	}
	log := web.Log()
	checkPoliteness(t, log, delay)
	if len(log) == 0 || log[0].Host != host || log[0].Path != "/robots.txt" {
		t.Fatalf("the web was asked %+v", log)
	}
	if earliest := crawled.Add(supervisor.LastCrawlLag + delay); log[0].Time.Before(earliest) {
		t.Errorf("learning first asked %s at %v, before the crawl's last request %v + %v + the delay %v", host, log[0].Time, crawled, supervisor.LastCrawlLag, delay)
	}
	recorded, err := st.LastCrawl(ctx, host)
	if last := log[len(log)-1].Time.Truncate(time.Millisecond); err != nil || recorded.Before(last) {
		t.Errorf("the store's last crawl of %s is %v (%v); learning last asked it at %v", host, recorded, err, last)
	}
}

// TestLearnBesideARunningCrawl learns over the state directory of a
// dispatcher process that is running, and so holds its lock and its
// store: learning takes neither, keeps its pages in its own file and
// records its requests in the crawl's store.
func TestLearnBesideARunningCrawl(t *testing.T) {
	proctest.Short(t, "starts a process")
	web := startLearnWeb(t)
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	startDispatcher(t, "--records", oneRecord(t, dir), "--state-dir", stateDir, "--listen", "tcp://127.0.0.1:*")

	const host = "press.example"
	records := learnStateTeachers(t, dir, 3, host)
	var stdout, stderr bytes.Buffer
	args := learnArgs(web, records, stateDir, filepath.Join(dir, "learned"))
	if code := mainExit(args, &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), "1 mapping(s) learned") {
		t.Fatalf("learning beside a running crawl: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if err := dispatcher.CheckStateDir(stateDir); !errors.Is(err, dispatcher.ErrStateInUse) {
		t.Errorf("the crawl's lock after learning: %v, want it still held by the dispatcher", err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, learn.PageCacheFile)); err != nil {
		t.Errorf("no kept pages: %v", err)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(stateDir, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if at, err := st.LastCrawl(ctx, host); err != nil || at.IsZero() {
		t.Errorf("learning's requests to %s are not in the crawl's store: %v, %v", host, at, err)
	}
}

// TestLearnStateDocs: the documents give the page cache's bounds as the
// code has them.
func TestLearnStateDocs(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"../../docs/learn.md", fmt.Sprintf("at most %d pages of one host", learn.PageCacheHostPages)},
		{"../../docs/learn.md", fmt.Sprintf("%d MiB of compressed bodies", learn.PageCacheBytes>>20)},
		{"../../docs/learn.md", fmt.Sprintf("default %d days", learn.DefaultRecrawlAfter/(24*time.Hour))},
		{"../../README.md", fmt.Sprintf("at most %d pages a host and %d MiB in all", learn.PageCacheHostPages, learn.PageCacheBytes>>20)},
		{"../../README.md", fmt.Sprintf("(default %d\ndays)", learn.DefaultRecrawlAfter/(24*time.Hour))},
	} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), c.want) {
			t.Errorf("%s does not say %q", c.file, c.want)
		}
	}
}
