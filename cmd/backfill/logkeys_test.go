package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// errorKey is the one key an error goes under in a log line, so that one
// query finds them all; misnamedErrorKeys are the names it must not take.
const errorKey = "error"

var misnamedErrorKeys = map[string]bool{"err": true, "e": true, "failure": true}

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
		if misnamedErrorKeys[key] {
			problems = append(problems, "key "+key+": an error goes under "+errorKey)
		}
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
		{`{"msg":"m","err":"dial tcp: refused"}`, 1},
		{`{"msg":"m","error":"dial tcp: refused"}`, 0},
		{`not json`, 0},
		{``, 0},
	}
	for _, c := range cases {
		if got := logKeyProblems(c.line); len(got) != c.want {
			t.Errorf("logKeyProblems(%s) = %q, want %d problems", c.line, got, c.want)
		}
	}
}

// logMethods are the slog calls whose arguments are key-value pairs.
var logMethods = map[string]bool{"Debug": true, "Info": true, "Warn": true, "Error": true, "Log": true, "With": true}

// TestErrorKeyInSource reads every Go file of the module for a log call
// that names a key the way misnamedErrorKeys forbids: the e2e tests see
// only the lines their runs happen to log, this sees every call.
func TestErrorKeyInSource(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !logMethods[sel.Sel.Name] {
				return true
			}
			for _, a := range call.Args {
				lit, ok := a.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				if key, err := strconv.Unquote(lit.Value); err == nil && misnamedErrorKeys[key] {
					t.Errorf("%s: log key %q: an error goes under %q", fset.Position(lit.Pos()), key, errorKey)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files under %s: not the module", files, root)
	}
}
