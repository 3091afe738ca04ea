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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/net/html"

	"backfill/dispatcher"
	"backfill/supervisor/browsertest"
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
