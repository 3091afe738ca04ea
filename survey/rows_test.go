package survey

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"backfill/wire"
)

// TestRowDurationsInSeconds: every time a survey row carries, in JSON
// Lines and CSV alike, is a number of seconds under a *_seconds name.
func TestRowDurationsInSeconds(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	web := WebRow{Domain: "a.test", Outcome: Answered, At: at,
		Probes: []wire.WebProbe{{Host: "a.test", Scheme: "http", Status: 200, Elapsed: 250 * time.Millisecond}}}
	port := PortRow{IP: "127.0.0.1", Port: 22, State: "open", Latency: 0.0175, At: at}
	for _, c := range []struct {
		job    string
		row    any
		json   string
		column string
		value  string
	}{
		{wire.SurveyWeb, web, `"elapsed_seconds":0.25`, "elapsed_seconds", "0.25"},
		{wire.SurveyPorts, port, `"latency_seconds":0.0175`, "latency_seconds", "0.0175"},
	} {
		doc, err := json.Marshal(c.row)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), c.json) || strings.Contains(string(doc), `_ms"`) || strings.Contains(string(doc), `"elapsed":`) {
			t.Errorf("%s row %s, want %s and no other time", c.job, doc, c.json)
		}
		cols, err := csvRow(c.job, doc)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.Index(csvHeader(c.job), c.column)
		if i < 0 || cols[i] != c.value {
			t.Errorf("%s CSV header %v, row %v: want %s = %s", c.job, csvHeader(c.job), cols, c.column, c.value)
		}
	}
}
