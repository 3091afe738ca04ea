package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// bareDurationKeys are names that carried a duration as nanoseconds or
// as text ("2m0s") before durations went to seconds under *_seconds
// names (package seconds).
var bareDurationKeys = map[string]bool{
	"elapsed": true, "waited": true, "crawl_delay": true, "pause": true, "after": true,
	"retry_for": true, "took": true, "tab": true, "idle": true, "timeout": true, "delay": true,
}

// logKeyProblems holds one JSON log line to the logging conventions: no
// key twice, and no duration under a bare name. A line that is not a JSON
// object (a panic, a tool's own output) is not a log line.
func logKeyProblems(line string) []string {
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var problems []string
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if seen[key] {
			problems = append(problems, "key "+key+" twice")
		}
		seen[key] = true
		if bareDurationKeys[key] && isDuration(v) {
			problems = append(problems, "duration "+key+"="+string(v)+": want "+key+"_seconds, a number of seconds")
		}
	}
	return problems
}

// isDuration: a number, or text such as "2m0s".
func isDuration(v json.RawMessage) bool {
	var s string
	if json.Unmarshal(v, &s) == nil {
		_, err := time.ParseDuration(s)
		return err == nil
	}
	return len(v) > 0 && (v[0] == '-' || '0' <= v[0] && v[0] <= '9')
}

// checkLogKeys reports every log line of process name that breaks the
// conventions (see logKeyProblems).
func checkLogKeys(t *testing.T, name, log string) {
	t.Helper()
	for _, line := range strings.Split(log, "\n") {
		for _, p := range logKeyProblems(line) {
			t.Errorf("%s log line: %s\n%s", name, p, line)
		}
	}
}

func TestLogKeyProblems(t *testing.T) {
	cases := []struct {
		line string
		want int
	}{
		{`{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"m","waited_seconds":0.014}`, 0},
		{`{"msg":"m","waited":14000000}`, 1},
		{`{"msg":"m","timeout":"2m0s"}`, 1},
		{`{"msg":"m","timeout":"none"}`, 0},
		{`{"msg":"m","supervisor":"local-1","supervisor":"local-1"}`, 1},
		{`{"msg":"m","delay":{"nested":1}}`, 0},
		{`not json`, 0},
		{``, 0},
	}
	for _, c := range cases {
		if got := logKeyProblems(c.line); len(got) != c.want {
			t.Errorf("logKeyProblems(%s) = %q, want %d problems", c.line, got, c.want)
		}
	}
}
