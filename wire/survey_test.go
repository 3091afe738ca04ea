package wire

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSurveyMessagesRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		kind Kind
		v    any
	}{
		{KindSurveyTask, &SurveyTask{ID: "w1", Lease: 3, Job: SurveyWeb, IP: "127.0.3.4", Hosts: []string{"a.test", "b.test"},
			Spec: SurveySpec{Timeout: 5 * time.Second, Delay: time.Second, Rate: 100, Per24: 4, UserAgent: "backfill-survey/0.1 (+https://x.invalid)",
				Schemes: []string{"http", "https"}, Headers: []string{"X-Powered-By"}, MaxRedirects: 5}}},
		{KindSurveyTask, &SurveyTask{ID: "p1", Job: SurveyPorts, IP: "::1", Ports: []int{22, 80, 443}, Spec: SurveySpec{Timeout: 200 * time.Millisecond, Banner: 64}}},
		{KindSurveyResult, &SurveyResult{TaskID: "w1", Lease: 3, Supervisor: "s1", IP: "127.0.3.4", At: at,
			Web: []WebProbe{{Host: "a.test", Scheme: "https", Method: "HEAD", Status: 301, Server: "nginx/1.25.3",
				Headers: map[string]string{"X-Powered-By": "PHP/8.2"}, Redirects: []string{"https://a.test/en/"}, FinalURL: "https://a.test/en/",
				Elapsed: 12 * time.Millisecond, Remote: "127.0.3.4:443", TLSVersion: "TLS 1.3", CertSubject: "CN=a.test", CertIssuer: "CN=Test CA",
				CertExpiry: at.Add(90 * 24 * time.Hour), CertError: "x509: certificate signed by unknown authority"},
				{Host: "a.test", Scheme: "http", Class: "refused", Error: "connection refused"}}}},
		{KindSurveyResult, &SurveyResult{TaskID: "p1", IP: "::1", At: at, Ports: []PortProbe{{Port: 22, State: "open", Latency: time.Millisecond, Banner: "SSH-2.0-x"}, {Port: 80, State: "closed"}}}},
		{KindSurveyResult, &SurveyResult{TaskID: "p2", IP: "127.0.0.1", Error: "this supervisor does not run surveys"}},
	}
	for _, c := range cases {
		frame, err := Encode(c.kind, c.v)
		if err != nil {
			t.Fatal(err)
		}
		kind, got, err := Decode(frame)
		if err != nil {
			t.Fatal(err)
		}
		if kind != c.kind || !reflect.DeepEqual(got, c.v) {
			t.Fatalf("%s: got %#v\nwant %#v", c.kind, got, c.v)
		}
	}
}

// Empty lists decode like absent ones, so a message re-encodes to itself.
func TestSurveyEmptyListsAreNil(t *testing.T) {
	_, v, err := Decode([]byte("\x02\x07" + `{"task_id":"t","web":[{"host":"a","redirects":[],"headers":{}}],"ports":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	r := v.(*SurveyResult)
	if r.Ports != nil || r.Web[0].Redirects != nil || r.Web[0].Headers != nil {
		t.Fatalf("empty lists kept: %#v", r)
	}
}

func TestSurveyBadFrames(t *testing.T) {
	for _, frame := range []string{
		"\x02\x06" + `{"id":1}`,
		"\x02\x06" + `{"ports":["x"]}`,
		"\x02\x07" + `{"web":[{"elapsed":"1s"}]}`,
		"\x02\x07" + `{"task_id":"t"}{"task_id":"u"}`,
		"\x02\x06",
	} {
		if _, _, err := Decode([]byte(frame)); !errors.Is(err, ErrBadFrame) || !strings.Contains(err.Error(), "survey-") {
			t.Errorf("Decode(%q) = %v, want a bad survey frame", frame, err)
		}
	}
	if _, err := Encode(KindSurveyTask, SurveyResult{}); err == nil {
		t.Fatal("Encode(KindSurveyTask, SurveyResult) succeeded")
	}
}

// The fuzz corpus holds a frame of each survey kind, so FuzzDecode starts
// from real messages of every decoder.
func TestFuzzCorpusHasSurveyFrames(t *testing.T) {
	for _, name := range []string{"survey-task", "survey-result"} {
		b, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzDecode", name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), "go test fuzz v1\n[]byte(") {
			t.Fatalf("%s is not a fuzz corpus file", name)
		}
	}
}

// A probe's time is written in seconds as elapsed_seconds, and the
// nanoseconds "elapsed" of rows from earlier builds are still read.
func TestWebProbeElapsedSeconds(t *testing.T) {
	b, err := json.Marshal(WebProbe{Host: "a.test", Scheme: "http", Elapsed: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"elapsed_seconds":1.5`) || strings.Contains(string(b), `"elapsed":`) {
		t.Errorf("probe written as %s, want elapsed_seconds 1.5 and no elapsed", b)
	}
	for _, in := range []string{`{"host":"a.test","elapsed_seconds":1.5}`, `{"host":"a.test","elapsed":1500000000}`} {
		var p WebProbe
		if err := json.Unmarshal([]byte(in), &p); err != nil || p.Elapsed != 1500*time.Millisecond || p.Host != "a.test" {
			t.Errorf("%s read as %+v, %v", in, p, err)
		}
	}
}

// A host's pace is written with *_seconds names, and the names of an
// earlier build (a history file kept across an upgrade) still read.
func TestHostPaceSeconds(t *testing.T) {
	p := HostPace{Host: "a.test", Requests: 3, MinGap: 1.5, GapDelay: 1, Seconds: 0.75, MaxSeconds: 0.5}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"min_gap_seconds":1.5`, `"gap_delay_seconds":1`, `"total_seconds":0.75`, `"max_seconds":0.5`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("pace written as %s, lacks %s", b, k)
		}
	}
	old := `{"host":"a.test","requests":3,"first":"0001-01-01T00:00:00Z","last":"0001-01-01T00:00:00Z","peak_minute":0,"min_gap_s":1.5,"gap_delay_s":1,"seconds":0.75,"max_s":0.5}`
	for _, in := range []string{string(b), old} {
		var got HostPace
		if err := json.Unmarshal([]byte(in), &got); err != nil || !reflect.DeepEqual(got, p) {
			t.Errorf("%s read as %+v, %v", in, got, err)
		}
	}
}
