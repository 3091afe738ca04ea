package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInputs runs the table in testdata/badinputs/cases.json: each case
// is a command line over the fixture files beside it, the exit code it
// must end with, what its error must say (and, for a command that lists
// problems, what its listing must say). Wrong input never passes
// silently: every case exits non-zero with a message naming the problem.
func TestBadInputs(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "badinputs"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name    string   `json:"name"`
		Args    []string `json:"args"`
		Code    int      `json:"code"`
		Message string   `json:"message"`
		Stdout  string   `json:"stdout"` // what a listing command (mappings check) prints, when set
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatalf("cases.json: %v", err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "state")
			expand := strings.NewReplacer("{dir}", dir, "{state}", state)
			args := make([]string, len(c.Args))
			for i, a := range c.Args {
				args[i] = expand.Replace(a)
			}
			var stdout, stderr bytes.Buffer
			code := mainExit(args, &stdout, &stderr)
			if code != c.Code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, c.Code, stderr.String())
			}
			if want := expand.Replace(c.Message); !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
			}
			if want := expand.Replace(c.Stdout); !strings.Contains(stdout.String(), want) {
				t.Errorf("stdout does not say %q:\n%s", want, stdout.String())
			}
		})
	}
}
