package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"backfill/dispatcher"
	"backfill/etl"
	"backfill/mappings"
	"backfill/proctest"
	"backfill/store"
	"backfill/supervisor"
)

// TestDemoObserved starts the demo with --metrics and --status as its
// own process, waits for its crawl to finish while it goes on serving
// (--hold), and checks what an operator sees: the status JSON, the page
// and its assets, and the Prometheus text format parsed with expfmt,
// whose numbers agree with the status and with the export of the results.
// The Grafana dashboard under docs/ must name only metrics that exist, and
// the crawl's run report must agree with the export (checkReport).
func TestDemoObserved(t *testing.T) {
	proctest.Short(t, "demo crawl in its own process")
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	demo := start(t, "demo", "demo", "--state-dir", state, "--log-level", "info",
		"--metrics", "127.0.0.1:0", "--status", "127.0.0.1:0", "--hold")
	deadline := time.Now().Add(2 * time.Minute)
	url := func(msg string) string {
		line, ok := demo.stderr.wait(regexp.MustCompile(`"msg":"`+msg+`"`), deadline)
		if !ok {
			t.Fatalf("demo never logged %q\n%s", msg, demo.stderr)
		}
		var l struct{ URL string }
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.URL == "" {
			t.Fatalf("log line %q: %v", line, err)
		}
		return l.URL
	}
	metricsURL := url("metrics listening")
	pageURL := url("status page listening")

	// export --follow tails the crawl from its start, through the feed.
	if _, ok := demo.stderr.wait(regexp.MustCompile(`"msg":"records loaded"`), deadline); !ok {
		t.Fatalf("demo never loaded its records\n%s", demo.stderr)
	}
	type followed struct {
		code     int
		out, err string
	}
	followDone := make(chan followed, 1)
	go func() {
		var out, errOut strings.Builder
		code := mainExit([]string{"export", "--follow", "--from", pageURL, "--state-dir", state}, &out, &errOut)
		followDone <- followed{code, out.String(), errOut.String()}
	}()

	// The crawl ends (its last status is written before it says so); the
	// demo holds its endpoints open.
	if _, ok := demo.stderr.wait(regexp.MustCompile(`"msg":"dispatcher finished"`), deadline); !ok {
		t.Fatalf("demo crawl did not finish\n%s", demo.stderr)
	}
	var st dispatcher.Status
	if body := get(t, pageURL+"status.json"); json.Unmarshal(body, &st) != nil || st.State != dispatcher.StateFinished {
		t.Fatalf("status.json after the crawl: %s", body)
	}
	if st.Records == 0 || st.Complete == 0 || st.Pages == 0 || len(st.Timeline) < 2 {
		t.Errorf("finished status lacks a crawl: %d records, %d complete, %d pages, %d timeline points",
			st.Records, st.Complete, st.Pages, len(st.Timeline))
	}
	html := string(get(t, pageURL))
	if !strings.Contains(html, `<script src="app.js"`) || strings.Contains(html, "http://") || strings.Contains(html, "https://") {
		t.Errorf("status page refers to something not its own:\n%s", html)
	}
	for _, asset := range []string{"app.js", "style.css"} {
		if len(get(t, pageURL+asset)) == 0 {
			t.Errorf("%s is empty", asset)
		}
	}
	// The page is on the metrics listener too.
	if !strings.Contains(string(get(t, strings.TrimSuffix(metricsURL, "metrics"))), `<script src="app.js"`) {
		t.Errorf("no status page at / of the metrics listener")
	}

	fam := scrape(t, metricsURL)
	for _, c := range []struct {
		name string
		want float64
	}{
		{"backfill_records", float64(st.Records)},
		{"backfill_records_complete", float64(st.Complete)},
		{"backfill_records_partial", float64(st.Partial)},
		{"backfill_pages_total", float64(st.Pages)},
		{"backfill_members", 2},
		{"backfill_members_joined_total", 2},
	} {
		if got := sum(fam, c.name, nil); got != c.want {
			t.Errorf("%s = %v, the status says %v", c.name, got, c.want)
		}
	}
	// Every page request is counted once by status class and observed
	// once in the latency histogram (the demo renders nothing).
	requests := sum(fam, "backfill_fetches_total", nil)
	if h := histCount(fam, "backfill_fetch_duration_seconds"); requests == 0 || h != requests {
		t.Errorf("%v page requests counted, %v observed in backfill_fetch_duration_seconds", requests, h)
	}
	if ok := sum(fam, "backfill_fetches_total", map[string]string{"status_class": "2xx"}); ok < float64(st.Pages) {
		t.Errorf("%v 2xx page requests for %d pages", ok, st.Pages)
	}
	if r := sum(fam, "backfill_robots_fetches_total", map[string]string{"outcome": supervisor.RobotsRules}); r == 0 {
		t.Errorf("no robots.txt fetched with rules; the fixture hosts all have one")
	}
	for _, kind := range []string{"hello", "heartbeat", "task", "result"} {
		if sum(fam, "backfill_wire_frames_total", map[string]string{"kind": kind}) == 0 {
			t.Errorf("no %s frames counted", kind)
		}
	}
	// Fields filled agree with the export of the results, field by field.
	var out strings.Builder
	if code := mainExit([]string{"export", "--provenance", "--state-dir", state}, &out, io.Discard); code != exitOK {
		t.Fatalf("export exit %d", code)
	}
	want := map[string]float64{}
	for _, fields := range foundValues(t, strings.NewReader(out.String())) {
		for f := range fields {
			want[f]++
		}
	}
	if len(want) == 0 {
		t.Fatal("the demo filled no field")
	}
	for f, n := range want {
		if got := sum(fam, "backfill_fields_filled_total", map[string]string{"field": f}); got != n {
			t.Errorf("backfill_fields_filled_total{field=%q} = %v, the export has %v", f, got, n)
		}
	}

	// The follower ends with the crawl, having written every record once.
	fl := <-followDone
	if fl.code != exitOK {
		t.Fatalf("export --follow exit %d: %s", fl.code, fl.err)
	}
	var feed dispatcher.Feed
	if err := json.Unmarshal(get(t, pageURL+"settled.json?after=0"), &feed); err != nil {
		t.Fatal(err)
	}
	checkStream(t, state, fl.out, int(feed.Last))

	// backfill status reads the same JSON from afar.
	var remote strings.Builder
	if code := mainExit([]string{"status", "--from", pageURL}, &remote, io.Discard); code != exitOK {
		t.Fatalf("status --from %s: exit %d", pageURL, code)
	}
	for _, want := range []string{fmt.Sprintf("records    %d: %d complete", st.Records, st.Complete), "demo-1", "demo-2", "finished"} {
		if !strings.Contains(remote.String(), want) {
			t.Errorf("status --from lacks %q:\n%s", want, remote.String())
		}
	}

	checkDashboard(t, fam)
	checkReport(t, state)

	// A signal ends the held demo as it ends any command but a service.
	demo.cmd.Process.Signal(syscall.SIGTERM)
	if code := demo.waitExit(time.Minute); code != exitInterrupted {
		t.Errorf("demo exit %d after SIGTERM, want %d", code, exitInterrupted)
	}
}

// checkDashboard holds docs/grafana-dashboard.json to the metrics that
// exist: those scraped, and those the dispatcher's and a supervisor's
// collectors describe (a metric without samples yet is not scraped); and
// docs/monitoring.md to listing every one of them.
func checkDashboard(t *testing.T, scraped map[string]*dto.MetricFamily) {
	t.Helper()
	exist := map[string]bool{}
	for name := range scraped {
		exist[name] = true
	}
	described := describedMetrics(t)
	for _, name := range described {
		exist[name] = true
	}
	// docs/monitoring.md lists every metric the collectors describe.
	doc, err := os.ReadFile("../../docs/monitoring.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(described, "backfill_wire_frames_total", "backfill_wire_bytes_total") {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/monitoring.md does not list %s", name)
		}
	}
	b, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	// Metric names in PromQL: ours, the Go runtime's and the process's.
	name := regexp.MustCompile(`\b(?:backfill|go|process)_[a-zA-Z0-9_]+`)
	used := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				used++
				base := n
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if s, ok := strings.CutSuffix(n, suffix); ok && exist[s] {
						base = s
					}
				}
				if !exist[base] {
					t.Errorf("dashboard panel %q queries %s, which no backfill process exports", p.Title, n)
				}
			}
		}
	}
	if used < 20 {
		t.Errorf("dashboard queries only %d metric names", used)
	}
}

// describedMetrics are the names a dispatcher's and a supervisor's
// collectors describe.
func describedMetrics(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	set, err := etl.LoadFS(mappings.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), filepath.Join(dir, "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, err := dispatcher.New(dispatcher.Config{StateDir: dir, Listen: "tcp://127.0.0.1:*", Mappings: set, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s, err := supervisor.New(supervisor.Config{Dispatcher: d.Endpoint(), Mappings: set})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ch := make(chan *prometheus.Desc, 256)
	d.Collector().Describe(ch)
	s.Collector().Describe(ch)
	close(ch)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	var names []string
	for desc := range ch {
		if m := fq.FindStringSubmatch(desc.String()); m != nil {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", url, resp.Status, err, b)
	}
	return b
}

// scrape GETs a /metrics URL and parses the Prometheus text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fam, err := p.TextToMetricFamilies(strings.NewReader(string(get(t, url))))
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fam
}

// sum adds the counter or gauge values of name's series that carry
// labels.
func sum(fam map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	total := 0.0
	for _, m := range fam[name].GetMetric() {
		if hasLabels(m, labels) {
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}

func histCount(fam map[string]*dto.MetricFamily, name string) float64 {
	total := 0.0
	for _, m := range fam[name].GetMetric() {
		total += float64(m.GetHistogram().GetSampleCount())
	}
	return total
}

func hasLabels(m *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
