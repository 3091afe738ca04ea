package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backfill/proctest"
	"backfill/testweb"
)

// sampleRow is one record of testweb's sample, by column.
type sampleRow map[string]string

func sampleRows(t *testing.T) ([]string, []sampleRow, map[string]map[string]string) {
	t.Helper()
	data, truth := testweb.Sample()
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []sampleRow
	for _, r := range rows[1:] {
		row := sampleRow{}
		for i, h := range rows[0] {
			row[h] = r[i]
		}
		out = append(out, row)
	}
	return rows[0], out, truth
}

func jsonText(t *testing.T, v string) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRoundTripJSONL is the user's data coming back as given: JSON Lines
// with big integers, floats written as 1e3 and 0.10, lists, nested
// objects, nulls, odd spacing and a malformed line go through a crawl of
// the fixture web, and the export gives back every input line, in order,
// byte for byte, with only the filled fields changed (each filled value
// where the input had "" or null); the malformed line comes back as it
// was, marked.
func TestRoundTripJSONL(t *testing.T) {
	proctest.Short(t, "crawls the fixture web")
	web := startWeb(t, 0)
	_, rows, truth := sampleRows(t)

	// Each line is written twice: as given, and as the export must give
	// it back. A missing target is "" in odd records and null in even
	// ones.
	var in, want []string
	const badLine = `{"id": "broken", "name": "Half a record",`
	for i, r := range rows {
		extra := fmt.Sprintf(`"age": 12345678901234567890, "score": 1e3, "ratio": 0.10, "neg": -0.0e-5, "ok": true, "nothing": null, `+
			`"tags": ["a", {"b": [1, null, 2.50]}], "meta": {"nested": {"x": false, "n": null, "s": "\u00e9\n"}}, "n%d": %d`, i, i)
		var gave, got strings.Builder
		fmt.Fprintf(&gave, `{"id" : %s,`, jsonText(t, r["id"]))
		fmt.Fprintf(&got, `{"id" : %s,`, jsonText(t, r["id"]))
		for _, f := range []string{"name", "location", "email"} {
			v := jsonText(t, r[f])
			missing := r[f] == ""
			if missing && i%2 == 1 {
				v = "null"
			}
			fmt.Fprintf(&gave, ` %q:%s,`, f, v)
			if filled := truth[r["id"]][f]; missing && filled != "" {
				v = jsonText(t, filled)
			}
			fmt.Fprintf(&got, ` %q:%s,`, f, v)
		}
		links := []string{}
		for _, f := range []string{"homepage", "profile"} {
			if r[f] != "" {
				links = append(links, jsonText(t, r[f]))
			}
		}
		tail := fmt.Sprintf(` "links": [%s],  %s }`, strings.Join(links, ", "), extra)
		lead := ""
		if i%3 == 0 { // white space around the object is the user's too
			lead, tail = "  ", tail+"\t "
		}
		in = append(in, lead+gave.String()+tail)
		want = append(want, lead+got.String()+tail)
		if i == 4 {
			in = append(in, badLine)
			want = append(want, badLine)
		}
	}
	dir := t.TempDir()
	records := filepath.Join(dir, "people.jsonl")
	if err := os.WriteFile(records, []byte(strings.Join(in, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(dir, "state")
	args := append([]string{"run", "--records", records, "--state-dir", stateDir, "--delay", "0", "--workers", "4"},
		crawlArgs(web, "roundtrip")...)
	var stdout, stderr bytes.Buffer
	if code := mainExit(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("run exit %d:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "people.jsonl:6: bad JSON") {
		t.Errorf("the malformed line is not reported with file:line:\n%s", stderr.String())
	}

	// By default each line comes back as the user's own, byte for byte
	// but for the filled values: the export replaces the input file.
	stdout.Reset()
	if code := mainExit([]string{"export", "--state-dir", stateDir, "--format", "jsonl"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("export exit %d:\n%s", code, stderr.String())
	}
	got := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("export has %d lines, the input %d:\n%s", len(got), len(want), stdout.String())
	}
	for i := range want {
		if want[i] == badLine {
			var line struct {
				ID     *string         `json:"id"`
				Fields json.RawMessage `json:"fields"`
				Error  string          `json:"_backfill_error"`
				Input  *string         `json:"_backfill_input"`
			}
			if err := json.Unmarshal([]byte(got[i]), &line); err != nil {
				t.Fatalf("export line %d is not JSON: %v\n%s", i+1, err, got[i])
			}
			if line.Input == nil || *line.Input != badLine || !strings.HasPrefix(line.Error, records+":6: bad JSON") || line.ID != nil || line.Fields != nil {
				t.Errorf("malformed line exported as %s", got[i])
			}
			continue
		}
		if got[i] != want[i] {
			t.Errorf("export line %d:\ngot  %s\nwant %s", i+1, got[i], want[i])
		}
	}

	// --wrap puts each record's object under "fields", beside its id.
	stdout.Reset()
	if code := mainExit([]string{"export", "--state-dir", stateDir, "--format", "jsonl", "--wrap"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("export --wrap exit %d:\n%s", code, stderr.String())
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	i := 0
	for ; sc.Scan(); i++ {
		var line struct {
			ID     string          `json:"id"`
			Fields json.RawMessage `json:"fields"`
			Error  string          `json:"_backfill_error"`
			Input  *string         `json:"_backfill_input"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("export line %d is not JSON: %v\n%s", i+1, err, sc.Text())
		}
		if i >= len(want) {
			t.Fatalf("export has more lines than the input's %d", len(want))
		}
		if want[i] == badLine {
			if line.Input == nil || *line.Input != badLine || !strings.HasPrefix(line.Error, records+":6: bad JSON") || string(line.Fields) != "null" || line.ID != "line 6" {
				t.Errorf("malformed line exported as %s", sc.Text())
			}
			continue
		}
		if got := string(line.Fields); got != strings.TrimSpace(want[i]) {
			t.Errorf("export line %d:\ngot  %s\nwant %s", i+1, got, want[i])
		}
	}
	if i != len(want) {
		t.Errorf("export has %d lines, the input %d", i, len(want))
	}

	// The CSV export keeps the values as written too.
	stdout.Reset()
	if code := mainExit([]string{"export", "--state-dir", stateDir, "--format", "csv"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("export exit %d:\n%s", code, stderr.String())
	}
	table, err := csv.NewReader(&stdout).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range table[0] {
		col[h] = i
	}
	first := table[1]
	for f, v := range map[string]string{"age": "12345678901234567890", "score": "1e3", "ratio": "0.10", "neg": "-0.0e-5",
		"ok": "true", "nothing": "", "tags": `["a", {"b": [1, null, 2.50]}]`, "email": truth["r1"]["email"]} {
		if got := first[col[f]]; got != v {
			t.Errorf("CSV export of r1: %s = %q, want %q", f, got, v)
		}
	}
	bad := table[6]
	if bad[col["_backfill_input"]] != badLine || !strings.Contains(bad[col["_backfill_error"]], "bad JSON") {
		t.Errorf("CSV export of the malformed line: %q", bad)
	}
}
