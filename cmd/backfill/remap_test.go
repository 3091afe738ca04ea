package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"backfill/dispatcher"
	"backfill/proctest"
	"backfill/testweb"
)

// remapMapping is the mapping of the remap test: pattern is its
// url_pattern, titleClass the class its title's XPath looks for; with
// parser, a url_parser takes the contact page's address out of a data
// attribute (no <a> links there, so a crawl follows it only through the
// mapping).
func remapMapping(pattern, titleClass string, parser bool) string {
	parsers := ""
	if parser {
		parsers = `"url_parsers": [{"processors": [{"type": "xpath", "parameters": {"expression": "//div/@data-contact"}}]}],`
	}
	return `{
  "name": "people",
  "url_patterns": [{"type": "regex", "pattern": "` + pattern + `"}],
  ` + parsers + `
  "fields": [
    {"name": "name", "match": true, "processors": [{"type": "xpath", "parameters": {"expression": "//h1/text()"}}, {"type": "trim"}]},
    {"name": "title", "processors": [{"type": "xpath", "parameters": {"expression": "//p[@class='` + titleClass + `']/text()"}}, {"type": "trim"}]},
    {"name": "email", "processors": [{"type": "xpath", "parameters": {"expression": "//span[@class='email']/text()"}}, {"type": "trim"}]}
  ]
}`
}

// TestMappingsChangedReextractsKeptPages is the mapping author's loop:
// a crawl with a mapping whose title XPath is mistyped fills nothing;
// the XPath fixed (and a url_parser added), a rerun on the same state
// fills the titles from the pages the first run kept, asking their hosts
// nothing (the server's log shows no request for them), and fetches only
// the contact pages the new url_parser leads to; the summary says how
// many pages were re-extracted and how many fetched.
func TestMappingsChangedReextractsKeptPages(t *testing.T) {
	proctest.Short(t, "runs the binary twice")
	web, err := testweb.StartFresh(0)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	people := []struct{ id, name, title, email string }{
		{"ann", "Ann Lee", "Chief", "ann@ann.example"},
		{"bob", "Bob Roe", "Clerk", "bob@bob.example"},
	}
	var csv strings.Builder
	csv.WriteString("id,name,title,email,site\n")
	for _, p := range people {
		host := p.id + ".example"
		web.Put(host, "/", testweb.FreshPage{Body: `<html><body><h1>` + p.name + `</h1><a href="/about">about</a><div data-contact="/contact"></div></body></html>`})
		web.Put(host, "/about", testweb.FreshPage{Body: `<html><body><h1>` + p.name + `</h1><p class="title">` + p.title + `</p></body></html>`})
		web.Put(host, "/contact", testweb.FreshPage{Body: `<html><body><h1>` + p.name + `</h1><span class="email">` + p.email + `</span></body></html>`})
		fmt.Fprintf(&csv, "%s,%s,,,http://%s/\n", p.id, p.name, host)
	}
	dir := t.TempDir()
	writeMapping := func(body string) string {
		t.Helper()
		return writeMappings(t, dir, map[string]string{"people.json": body})
	}
	records := filepath.Join(dir, "records.csv")
	if err := os.WriteFile(records, []byte(csv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(dir, "state")
	args := freshRunArgs(records, stateDir, filepath.Join(dir, "mappings"), web)
	run := func(name string) (dispatcher.Summary, string) {
		t.Helper()
		return runSummary(t, dir, name, args)
	}
	pagesAsked := func(from int) []string {
		var out []string
		for _, r := range web.Log()[from:] {
			if r.Path != "/robots.txt" && !strings.HasPrefix(r.Path, "/backfill-probe-") { // robots.txt and the soft-404 probe
				out = append(out, r.Host+r.Path)
			}
		}
		sort.Strings(out)
		return out
	}

	// The pattern matches the about pages, so the crawl fetches them (at
	// the depth limit a page no mapping runs on is not worth a request).
	writeMapping(remapMapping(`^http://[a-z]+\\.example/`, "titel", false)) // mistyped
	first, out := run("first")
	if first.Complete != 0 || first.Pages != 4 || first.Remap.Changed {
		t.Fatalf("first run: %d complete, %d pages, remap %+v; want 0, 4 (each site's home and about page), none\n%s", first.Complete, first.Pages, first.Remap, out)
	}
	if got := fmt.Sprint(pagesAsked(0)); got != "[ann.example/ ann.example/about bob.example/ bob.example/about]" {
		t.Fatalf("first run asked for %s", got)
	}
	firstLog := len(web.Log())

	writeMapping(remapMapping(`^http://[a-z]+\\.example/`, "title", true))
	second, out := run("second")
	if got := fmt.Sprint(pagesAsked(firstLog)); got != "[ann.example/contact bob.example/contact]" {
		t.Errorf("the rerun asked for %s; want only the contact pages the new url_parser leads to (the pages fetched before come from the kept pages)", got)
	}
	if !second.Remap.Changed || second.Remap.Reextracted != 4 || second.Remap.Refetched != 0 || second.Pages != 2 || second.Complete != 2 {
		t.Errorf("rerun: remap %+v, %d pages fetched, %d complete; want 4 re-extracted, 2 fetched, 2 complete\n%s", second.Remap, second.Pages, second.Complete, out)
	}
	if want := "mappings changed: 4 pages re-extracted, 2 fetched"; !strings.Contains(out, want) {
		t.Errorf("the summary does not say %q:\n%s", want, out)
	}
	if !strings.Contains(out, "mappings changed since the last run") {
		t.Errorf("the log does not say the mappings changed:\n%s", out)
	}
	prov := exportProvenance(t, stateDir)
	for _, p := range people {
		title, email := prov[p.id]["title"], prov[p.id]["email"]
		if title.Value != p.title || title.Source != "http://"+p.id+".example/about" || email.Value != p.email || email.Source != "http://"+p.id+".example/contact" {
			t.Errorf("%s: title %+v, email %+v", p.id, title, email)
		}
	}

	// The kept pages, for other tools: every page fetched, as WARC.
	warcPath := filepath.Join(dir, "pages.warc.gz")
	exp := start(t, "export-warc", "export", "--state-dir", stateDir, "--warc", "-o", warcPath)
	if code := exp.waitExit(time.Minute); code != 0 || !strings.Contains(exp.stderr.String(), "6 kept page(s) written as WARC") {
		t.Fatalf("export --warc: exit %d\n%s", code, exp.stderr.String())
	}
	f, err := os.Open(warcPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(body), "WARC-Type: response\r\n"); n != 6 || !strings.HasPrefix(string(body), "WARC/1.1\r\nWARC-Type: warcinfo\r\n") ||
		!strings.Contains(string(body), "WARC-Target-URI: http://ann.example/about\r\n") || !strings.Contains(string(body), "<p class=\"title\">Chief</p>") {
		t.Errorf("the WARC file has %d response records:\n%.2000s", n, body)
	}

	// The same mappings once more: nothing to re-extract, nothing fetched.
	logNow := len(web.Log())
	third, out := run("third")
	if third.Remap.Changed || third.Pages != 0 || len(pagesAsked(logNow)) != 0 || strings.Contains(out, "mappings changed") {
		t.Errorf("a rerun with the same mappings: remap %+v, %d pages, asked %v\n%s", third.Remap, third.Pages, pagesAsked(logNow), out)
	}
}
