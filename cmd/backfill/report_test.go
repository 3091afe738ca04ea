package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/net/html"

	"backfill/dispatcher"
	"backfill/proctest"
	"backfill/supervisor/browsertest"
	"backfill/testweb"
)

// checkReport writes the run report of the crawl in state and holds its
// numbers to the export of the results, the status and the history: fill
// rates per field and values per mapping, records complete, failures by
// class; the politeness table says every fixture host kept its delay; the
// file refers to nothing outside itself, and, where Chromium is at hand,
// opens from disk with its charts drawn and nothing fetched.
func checkReport(t *testing.T, state string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "report.html")
	var out, errOut strings.Builder
	if code := mainExit([]string{"report", "--state-dir", state, "-o", path}, &out, &errOut); code != exitOK {
		t.Fatalf("report exit %d: %s", code, errOut.String())
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(f)
	f.Close()
	if err != nil {
		t.Fatalf("report is not HTML: %v", err)
	}

	// What the export says.
	var exp strings.Builder
	if code := mainExit([]string{"export", "--provenance", "--state-dir", state}, &exp, io.Discard); code != exitOK {
		t.Fatalf("export exit %d", code)
	}
	records := 0
	filled, needed, byMapping := map[string]int{}, map[string]int{}, map[string]int{}
	var rows []map[string]any
	sc := bufio.NewScanner(strings.NewReader(exp.String()))
	for sc.Scan() {
		var rec struct {
			Fields     map[string]any `json:"fields"`
			Provenance map[string]struct {
				Mapping string `json:"mapping"`
			} `json:"provenance"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		records++
		rows = append(rows, rec.Fields)
		for f, p := range rec.Provenance {
			filled[f]++
			needed[f]++
			byMapping[p.Mapping]++
		}
	}

	attr := func(n *html.Node, key string) string {
		for _, a := range n.Attr {
			if a.Key == key {
				return a.Val
			}
		}
		return ""
	}
	var walk func(*html.Node, func(*html.Node))
	walk = func(n *html.Node, fn func(*html.Node)) {
		fn(n)
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, fn)
		}
	}
	num := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("report number %q: %v", s, err)
		}
		return n
	}
	gotFilled, gotNeeded, gotMapping, gotFail := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int64{}
	ids := map[string]string{}
	polyPoints, paceRows := 0, 0
	walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		for _, a := range n.Attr {
			if a.Key == "src" || a.Key == "href" || n.Data == "script" || n.Data == "link" {
				t.Errorf("report refers to something outside itself: <%s %s=%q>", n.Data, a.Key, a.Val)
			}
		}
		if id := attr(n, "id"); id != "" && attr(n, "data-n") != "" {
			ids[id] = attr(n, "data-n")
		}
		switch {
		case n.Data == "tr" && attr(n, "data-field") != "" && attr(n, "data-needed") != "":
			f := attr(n, "data-field")
			gotFilled[f], gotNeeded[f] = num(attr(n, "data-filled")), num(attr(n, "data-needed"))
		case n.Data == "tr" && attr(n, "data-mapping") != "":
			gotMapping[attr(n, "data-mapping")] = num(attr(n, "data-values"))
		case n.Data == "tr" && attr(n, "data-class") != "":
			gotFail[attr(n, "data-class")] = int64(num(attr(n, "data-n")))
		case n.Data == "polyline":
			if num(attr(n, "data-points")) >= 2 {
				polyPoints++
			}
		case n.Data == "tr" && attr(n, "data-requests") != "":
			paceRows++
			gap, _ := strconv.ParseFloat(attr(n, "data-gap"), 64)
			delay, _ := strconv.ParseFloat(attr(n, "data-delay"), 64)
			if num(attr(n, "data-requests")) > 1 && gap < delay {
				t.Errorf("politeness row %s: shortest gap %v s under the delay %v s", attr(n, "data-host"), gap, delay)
			}
		case n.Data == "p" && attr(n, "id") == "politeness-summary":
			if attr(n, "data-overruns") != "0" || attr(n, "data-hosts") == "0" {
				t.Errorf("politeness summary: %d hosts, %s overruns", num(attr(n, "data-hosts")), attr(n, "data-overruns"))
			}
		}
	})
	// A field lacking in the input is null or absent in the export,
	// unless backfill filled it.
	fields := maps.Clone(gotNeeded)
	for f := range filled {
		fields[f] = 0
	}
	for f := range fields {
		for _, r := range rows {
			if v, ok := r[f]; !ok || v == nil {
				needed[f]++
			}
		}
	}
	if len(filled) == 0 {
		t.Fatal("the crawl filled nothing to report on")
	}
	for f := range fields {
		if gotFilled[f] != filled[f] || gotNeeded[f] != needed[f] {
			t.Errorf("report: field %s filled %d of %d; the export: %d of %d", f, gotFilled[f], gotNeeded[f], filled[f], needed[f])
		}
	}
	if !maps.Equal(gotMapping, byMapping) {
		t.Errorf("report: values per mapping %v; the export %v", gotMapping, byMapping)
	}
	st, err := dispatcher.ReadStatus(state)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"records": fmt.Sprint(records), "complete": fmt.Sprint(st.Complete), "partial": fmt.Sprint(st.Partial),
		"untouched": fmt.Sprint(records - st.Complete - st.Partial)}
	for id, v := range want {
		if ids[id] != v {
			t.Errorf("report: %s %q, want %s", id, ids[id], v)
		}
	}
	if !maps.Equal(gotFail, st.Errors) {
		t.Errorf("report: failures %v; the status %v", gotFail, st.Errors)
	}
	if polyPoints < 2 {
		t.Errorf("report: %d charts with a line", polyPoints)
	}
	if paceRows == 0 {
		t.Errorf("report: no politeness rows")
	}
	t.Run("offline in a browser", func(t *testing.T) { openOffline(t, path) })
}

// openOffline opens the report from disk in headless Chromium, which may
// reach nothing else, and checks that it drew its charts and fetched
// nothing.
func openOffline(t *testing.T, path string) {
	t.Helper()
	bctx := browsertest.Start(t, "report",
		chromedp.ProxyServer("http://127.0.0.1:9"), chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND"))
	ctx, cancel := context.WithTimeout(bctx, time.Minute)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate("file://"+path)); err != nil {
		t.Fatalf("open the report: %v", err)
	}
	type seen struct {
		Charts    int      `json:"charts"`
		Width     float64  `json:"width"`
		Resources []string `json:"resources"`
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[seen](`({
		charts: document.querySelectorAll('svg polyline, svg rect').length,
		width: document.querySelector('svg.chart').getBoundingClientRect().width,
		resources: performance.getEntriesByType('resource').map(e => e.name),
	})`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Charts < 3 || got.Width < 100 || len(got.Resources) > 0 {
		t.Errorf("report in the browser: %d chart shapes, chart width %v, resources loaded %v", got.Charts, got.Width, got.Resources)
	}
}

// TestReportRunTargets: the report judges fill rates by what the run set
// out to fill, whichever mappings are at hand: without --mappings (the
// bundled ones would judge fields the run never targeted, and miss the
// run's own), with the run's mappings, and it refuses mappings that are
// not the run's.
func TestReportRunTargets(t *testing.T) {
	proctest.Short(t, "runs the binary")
	web, err := testweb.StartFresh(0)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	web.Put("ann.example", "/", testweb.FreshPage{Body: freshProfile("Ann Lee", "ann@ann.example", "Chief")})
	web.Put("bob.example", "/", testweb.FreshPage{Body: freshProfile("Bob Roe", "bob@bob.example", "")})
	web.Put("cy.example", "/", testweb.FreshPage{Body: freshProfile("Cy Doe", "cy@cy.example", "Boss")})

	dir := t.TempDir()
	mine, other := filepath.Join(dir, "mappings"), filepath.Join(dir, "other")
	for d, body := range map[string]string{mine: freshMapping, other: strings.Replace(freshMapping, `"fresh-people"`, `"other-people"`, 1)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "people.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	records := filepath.Join(dir, "records.csv")
	// Targets: ann and bob lack email and title, cy lacks title; nobody
	// lacks name.
	if err := os.WriteFile(records, []byte("id,name,email,title,site\n"+
		"ann,Ann Lee,,,http://ann.example/\n"+
		"bob,Bob Roe,,,http://bob.example/\n"+
		"cy,Cy Doe,cy@mine.example,,http://cy.example/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	args := []string{"run", "--records", records, "--state-dir", state, "--mappings", mine,
		"--allow-loopback", "--delay", "0", "--workers", "2", "--contact", "https://backfill.invalid/e2e"}
	for host, addr := range web.Resolve() {
		args = append(args, "--resolve", host+":"+addr)
	}
	if p := start(t, "run", args...); p.waitExit(2*time.Minute) != 0 {
		t.Fatalf("run failed\n%s", p.stderr)
	}

	fillRows := regexp.MustCompile(`data-field="([^"]+)" data-needed="(\d+)" data-filled="(\d+)"`)
	want := map[string]string{"email": "2/2", "title": "2/3"}
	for _, extra := range [][]string{nil, {"--mappings", mine}} {
		var out, errOut strings.Builder
		if code := mainExit(append([]string{"report", "--state-dir", state, "-o", "-"}, extra...), &out, &errOut); code != exitOK {
			t.Fatalf("report %v: exit %d: %s", extra, code, errOut.String())
		}
		got := map[string]string{}
		for _, m := range fillRows.FindAllStringSubmatch(out.String(), -1) {
			got[m[1]] = m[3] + "/" + m[2]
		}
		if !maps.Equal(got, want) {
			t.Errorf("report %v: fill (filled/lacking) %v, want %v", extra, got, want)
		}
		if errOut.Len() > 0 || strings.Contains(out.String(), `id="fill-warning"`) {
			t.Errorf("report %v warns of its fill rates: %s", extra, errOut.String())
		}
	}

	var out, errOut strings.Builder
	code := mainExit([]string{"report", "--state-dir", state, "--mappings", other, "-o", filepath.Join(dir, "r.html")}, &out, &errOut)
	if code == exitOK || !strings.Contains(errOut.String(), "not the ones the crawl ran with") || !strings.Contains(errOut.String(), "--mappings") {
		t.Errorf("report with other mappings: exit %d, stderr %q; want a refusal naming --mappings", code, errOut.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "r.html")); err == nil {
		t.Error("a refused report was written")
	}
}
