package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"backfill/dispatcher"
	"backfill/survey"
	"backfill/wire"
)

// TestWriteEscapes: what comes from the web (hosts, URLs, values, error
// classes) is text in the report, never markup, in its tables and in its
// SVG alike.
func TestWriteEscapes(t *testing.T) {
	evil := `<script>alert(1)</script>"'&`
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := &Data{
		Records:      1,
		History:      dispatcher.History{Timeline: []dispatcher.Sample{{At: at, Records: 1}, {At: at.Add(time.Minute), Records: 1, Complete: 1, Pages: 3}}},
		Failures:     []Count{{Name: evil, N: 2}},
		FailingHosts: []dispatcher.HostCount{{Host: evil, Count: 2}},
		Robots:       []Count{{Name: evil, N: 1}},
		Fields:       []FieldFill{{Field: evil, Needed: 1, Filled: 1}},
		Paces:        []HostPace{{Host: evil, Requests: 2, MinGap: 1, Delay: 1}},
	}
	var b bytes.Buffer
	if err := Write(&b, d); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<script>") {
		t.Errorf("report carries markup from the crawl:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "&lt;script&gt;") {
		t.Errorf("report lost the text")
	}
}

// TestPacesAdded: the politeness table adds up the supervisors' accounts
// of a host and flags a host whose requests came closer than its delay.
func TestPacesAdded(t *testing.T) {
	d := &Data{History: dispatcher.History{Paces: []dispatcher.HostPace{
		{HostPace: wire.HostPace{Host: "a.example", Requests: 5, PeakMinute: 3, MinGap: 2, GapDelay: 1, Seconds: 1}, By: "s1@1"},
		{HostPace: wire.HostPace{Host: "a.example", Requests: 3, PeakMinute: 4, MinGap: 1.5, GapDelay: 1, Seconds: 2}, By: "s2@1"},
		{HostPace: wire.HostPace{Host: "b.example", Requests: 2, PeakMinute: 2, MinGap: 0.5, GapDelay: 1}, By: "s1@1"},
		{HostPace: wire.HostPace{Host: "c.example", Requests: 1, PeakMinute: 1}, By: "s1@1"},
	}}}
	d.paces()
	if d.PaceHosts != 3 || d.Overruns != 1 || d.Tightest == nil || d.Tightest.Host != "b.example" {
		t.Fatalf("paces: %d hosts, %d overruns, tightest %+v", d.PaceHosts, d.Overruns, d.Tightest)
	}
	a := d.Paces[0]
	if a.Host != "a.example" || a.Requests != 8 || a.PeakMinute != 4 || a.MinGap != 1.5 || a.MeanSecs != 3.0/8 || !a.Held() {
		t.Errorf("a.example added up to %+v", a)
	}
}

// TestWriteSurveys: a web survey's outcomes and Server products, and a
// port survey's states and open ports, are charted.
func TestWriteSurveys(t *testing.T) {
	d := &Data{Surveys: []*survey.Summary{
		{Job: wire.SurveyWeb, Run: "web/1", Rows: 5, Finished: true,
			Outcomes: map[string]int{"answered": 3, "unresolved": 2}, Classes: map[string]int{"unresolved/nxdomain": 2},
			Servers: []survey.Count{{Name: "nginx", N: 2}, {Name: "Apache", N: 1}}},
		{Job: wire.SurveyPorts, Run: "ports/2", Rows: 4, States: map[string]int{"open": 1, "closed": 3},
			OpenPorts: []survey.Count{{Name: "443", N: 1}}},
	}}
	var b bytes.Buffer
	if err := Write(&b, d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`data-survey="web/1" data-rows="5"`, `data-name="answered" data-n="3"`,
		`data-name="unresolved/nxdomain" data-n="2"`, `data-name="nginx" data-n="2"`,
		`data-survey="ports/2"`, `data-name="closed" data-n="3"`, `data-name="443" data-n="1"`, "(unfinished)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %s", want)
		}
	}
}
