package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMELayout: README's layout table names every top-level package
// of the module (each folder holding Go files), so a newcomer finds
// where each thing lives.
func TestREADMELayout(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "## Layout")
	if !ok {
		t.Fatal("README has no Layout section")
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		name := e.Name()
		hasGo := false
		filepath.WalkDir(filepath.Join(root, name), func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") {
				hasGo = true
				return filepath.SkipAll
			}
			return nil
		})
		if !hasGo {
			continue
		}
		row := "| `" + name + "` |"
		if name == "cmd" {
			row = "| `cmd/backfill` |"
		}
		if !strings.Contains(table, row) {
			t.Errorf("README's layout table has no row for %s", name)
		}
	}
}
