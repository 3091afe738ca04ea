package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backfill/dispatcher"
	"backfill/proctest"
	"backfill/testweb"
)

const freshMapping = `{
  "name": "fresh-people",
  "url_patterns": [{"type": "regex", "pattern": "^https?://[a-z]+\\.example/"}],
  "fields": [
    {"name": "name", "match": true, "processors": [{"type": "xpath", "parameters": {"expression": "//h1/text()"}}, {"type": "trim"}]},
    {"name": "email", "processors": [{"type": "xpath", "parameters": {"expression": "//span[@class='email']/text()"}}, {"type": "trim"}]},
    {"name": "title", "processors": [{"type": "xpath", "parameters": {"expression": "//p[@class='title']/text()"}}, {"type": "trim"}]}
  ]
}`

func freshProfile(name, email, title string) string {
	return `<!doctype html><html><head><title>` + name + `</title></head><body><h1>` + name +
		`</h1><span class="email">` + email + `</span><p class="title">` + title + `</p></body></html>`
}

// TestRefreshEndToEnd crawls a fixture web whose pages carry validators,
// changes one page, and runs again with --refresh: the changed value
// replaces the old one, which shows in the export's provenance history;
// the unchanged pages are answered 304 to conditional requests and their
// values only get a newer time.
func TestRefreshEndToEnd(t *testing.T) {
	proctest.Short(t, "runs the binary")
	web, err := testweb.StartFresh(0)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	modified := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	annOld := freshProfile("Ann Lee", "ann@old.example", "Chief")
	web.Put("ann.example", "/", testweb.FreshPage{Body: annOld, ETag: true, LastModified: modified})
	web.Put("bob.example", "/", testweb.FreshPage{Body: freshProfile("Bob Roe", "bob@bob.example", "Clerk"), LastModified: modified})
	web.Put("cy.example", "/", testweb.FreshPage{Body: freshProfile("Cy Doe", "cy@cy.example", "Boss"), ETag: true})

	dir := t.TempDir()
	maps := filepath.Join(dir, "mappings")
	if err := os.MkdirAll(maps, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(maps, "fresh.json"), []byte(freshMapping), 0o644); err != nil {
		t.Fatal(err)
	}
	records := filepath.Join(dir, "records.csv")
	if err := os.WriteFile(records, []byte("id,name,email,title,site\n"+
		"ann,Ann Lee,,,http://ann.example/\n"+
		"bob,Bob Roe,,,http://bob.example/\n"+
		"cy,Cy Doe,cy@mine.example,,http://cy.example/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(dir, "state")
	args := []string{"run", "--records", records, "--state-dir", stateDir, "--mappings", maps,
		"--allow-loopback", "--delay", "0", "--workers", "2", "--contact", "https://backfill.invalid/e2e"}
	for host, addr := range web.Resolve() {
		args = append(args, "--resolve", host+":"+addr)
	}
	run := func(name string, extra ...string) dispatcher.Summary {
		t.Helper()
		sumPath := filepath.Join(dir, name+".json")
		p := start(t, name, append(append(append([]string(nil), args...), "--summary", sumPath), extra...)...)
		if code := p.waitExit(2 * time.Minute); code != 0 {
			t.Fatalf("%s exit code %d\n%s", name, code, p.stderr)
		}
		b, err := os.ReadFile(sumPath)
		if err != nil {
			t.Fatal(err)
		}
		var s dispatcher.Summary
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s summary: %v", name, err)
		}
		t.Logf("%s summary:%s", name, p.stdout.String())
		return s
	}

	first := run("first")
	if first.Complete != 3 || first.Pages != 3 {
		t.Fatalf("first run: %d complete, %d pages; want 3 and 3", first.Complete, first.Pages)
	}
	before := exportProvenance(t, stateDir)
	firstRequests := len(web.Log())

	// Ann moves; the others do not.
	annNew := freshProfile("Ann Lee", "ann@new.example", "Chief")
	web.Put("ann.example", "/", testweb.FreshPage{Body: annNew, ETag: true, LastModified: modified.Add(time.Hour)})

	second := run("refresh", "--refresh", "--recrawl-after", "1ms")
	if second.Pages != 1 || second.NotModified != 2 || second.Recrawled != 3 ||
		second.Changed != 1 || second.Refreshed != 4 || second.Unconfirmed != 0 || second.Complete != 3 {
		t.Errorf("refresh summary: pages %d not-modified %d recrawled %d changed %d refreshed %d unconfirmed %d complete %d; want 1 2 3 1 4 0 3",
			second.Pages, second.NotModified, second.Recrawled, second.Changed, second.Refreshed, second.Unconfirmed, second.Complete)
	}

	// The request log: each page once more, conditionally, and 304 where
	// it did not change.
	want := map[string]struct {
		inm, ims string
		status   int
	}{
		"ann.example": {testweb.ETagOf(annOld), modified.Format(http.TimeFormat), http.StatusOK},
		"bob.example": {"", modified.Format(http.TimeFormat), http.StatusNotModified},
		"cy.example":  {testweb.ETagOf(freshProfile("Cy Doe", "cy@cy.example", "Boss")), "", http.StatusNotModified},
	}
	seen := map[string]int{}
	for _, r := range web.Log()[firstRequests:] {
		if r.Path != "/" {
			continue
		}
		seen[r.Host]++
		w, ok := want[r.Host]
		if !ok {
			t.Errorf("unexpected request %s%s", r.Host, r.Path)
			continue
		}
		if r.IfNoneMatch != w.inm || r.IfModifiedSince != w.ims || r.Status != w.status {
			t.Errorf("%s: If-None-Match %q If-Modified-Since %q status %d; want %q %q %d",
				r.Host, r.IfNoneMatch, r.IfModifiedSince, r.Status, w.inm, w.ims, w.status)
		}
	}
	for host := range want {
		if seen[host] != 1 {
			t.Errorf("%s requested %d times by the refresh, want once", host, seen[host])
		}
	}

	after := exportProvenance(t, stateDir)
	ann := after["ann"]["email"]
	if ann.Value != "ann@new.example" || len(ann.History) != 1 {
		t.Fatalf("ann email after the refresh: %+v", ann)
	}
	h := ann.History[0]
	if h.Value != "ann@old.example" || h.Source != "http://ann.example/" || h.At != before["ann"]["email"].At || h.Replaced == "" {
		t.Errorf("ann email history %+v, want the old value found at %s", h, before["ann"]["email"].At)
	}
	for _, c := range []struct{ rec, field, value string }{
		{"ann", "title", "Chief"}, {"bob", "email", "bob@bob.example"}, {"bob", "title", "Clerk"}, {"cy", "title", "Boss"},
	} {
		v, was := after[c.rec][c.field], before[c.rec][c.field]
		if v.Value != c.value || len(v.History) != 0 || v.At <= was.At {
			t.Errorf("%s %s = %+v (was %+v): want %q, a newer time and no history", c.rec, c.field, v, was, c.value)
		}
	}
	if v, ok := after["cy"]["email"]; ok {
		t.Errorf("cy's own email was overwritten: %+v", v)
	}
}

type provenanceEntry struct {
	Value   string `json:"value"`
	Source  string `json:"source"`
	At      string `json:"at"`
	History []struct {
		Value    string `json:"value"`
		Source   string `json:"source"`
		At       string `json:"at"`
		Replaced string `json:"replaced"`
	} `json:"history"`
}

// exportProvenance runs export --provenance and returns each record's
// provenance by field.
func exportProvenance(t *testing.T, stateDir string) map[string]map[string]provenanceEntry {
	t.Helper()
	exp := start(t, "export", "export", "--state-dir", stateDir, "--format", "jsonl", "--provenance")
	if code := exp.waitExit(time.Minute); code != 0 {
		t.Fatalf("export exit code %d", code)
	}
	out := map[string]map[string]provenanceEntry{}
	sc := bufio.NewScanner(strings.NewReader(exp.stdout.String()))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var rec struct {
			ID         string                     `json:"id"`
			Provenance map[string]provenanceEntry `json:"provenance"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("export line %q: %v", sc.Text(), err)
		}
		out[rec.ID] = rec.Provenance
	}
	return out
}

func TestFreshnessFlags(t *testing.T) {
	dir := t.TempDir()
	records := filepath.Join(dir, "r.csv")
	if err := os.WriteFile(records, []byte("id,name,homepage\n1,A,http://a.example/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"refresh without an age", []string{"run", "--records", records, "--refresh"}, "--refresh needs --recrawl-after"},
		{"negative age", []string{"dispatcher", "--records", records, "--recrawl-after", "-1h"}, "--recrawl-after must not be negative"},
		{"bad age", []string{"run", "--records", records, "--recrawl-after", "soon"}, "invalid value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := mainExit(c.args, &stdout, &stderr); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr: %s", code, exitUsage, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.want) {
				t.Errorf("stderr %q does not mention %q", stderr.String(), c.want)
			}
		})
	}
}
