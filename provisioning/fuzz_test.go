package provisioning_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backfill/provisioning"
)

// FuzzParse feeds inventories to the parser: it never panics, and what it
// refuses it refuses with errors that name the file.
func FuzzParse(f *testing.F) {
	f.Add([]byte(validInventory))
	for _, c := range goldenCases {
		if b, err := os.ReadFile(filepath.Join("testdata", "golden", c, "cluster.toml")); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("[[hosts]]\nname = 1\n[[hosts]]\nroles = [\"a\", [\"b\"]]\nx = {y = {z = 2}}\n"))
	dir := f.TempDir()
	path := filepath.Join(dir, "cluster.toml")
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := provisioning.Parse(path, data)
		if err == nil {
			if inv == nil {
				t.Fatal("no inventory and no error")
			}
			return
		}
		for _, e := range unjoin(err) {
			var ie *provisioning.Error
			if !errors.As(e, &ie) || !strings.HasPrefix(e.Error(), path) {
				t.Fatalf("error %q (%T) does not name the file", e, e)
			}
		}
	})
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
