package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backfill/dispatcher"
	"backfill/proctest"
	"backfill/testweb"
)

// TestUseLearnedKeepsUnlearnedFieldsTargets: learning was asked for
// location, email and website, and no teacher knew an email, so no
// learned mapping fills it. A crawl with the learned mappings alone and
// no --fields still counts email as a field to fill: no record is
// reported complete while its email stays empty, and the log says why.
func TestUseLearnedKeepsUnlearnedFieldsTargets(t *testing.T) {
	proctest.Short(t, "learns and crawls the templates web")
	dir := t.TempDir()
	teachers, targets, _, _ := splitTemplateRecords(5)
	rows, err := csv.NewReader(bytes.NewReader(teachers)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows[1:] {
		r[3] = "" // email
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.WriteAll(rows)
	report := learnTemplates(t, dir, b.Bytes())
	if !strings.Contains(report, "email") {
		t.Fatalf("the report does not mention email:\n%s", report)
	}

	web, err := testweb.StartTemplates(testweb.TemplatesOptions{PerTemplate: learnPerTemplate})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	path := filepath.Join(dir, "targets.csv")
	if err := os.WriteFile(path, targets, 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "no-mappings")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	summary := filepath.Join(dir, "summary.json")
	var stdout, stderr bytes.Buffer
	args := append([]string{"run", "--records", path, "--state-dir", filepath.Join(dir, "state"), "--depth", "0",
		"--mappings", empty, "--use-learned", filepath.Join(dir, "learned"), "--summary", summary}, webFlags(web)...)
	if code := mainExit(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	var sum dispatcher.Summary
	if data, err := os.ReadFile(summary); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Complete != 0 || sum.Partial == 0 {
		t.Errorf("complete %d, partial %d: want none complete while email stays empty, and partial ones\n%s", sum.Complete, sum.Partial, stdout.String())
	}
	if !strings.Contains(stderr.String(), "fields no learned mapping fills stay empty") || !strings.Contains(stderr.String(), "email") {
		t.Errorf("the log does not say email stays empty:\n%s", stderr.String())
	}
}
