package provisioning

import (
	_ "embed"
	"fmt"
	"os"
)

// example is the commented inventory `backfill provision init` writes.
//
//go:embed example.toml
var example []byte

// WriteExample writes the commented example inventory to path, which must
// not exist yet.
func WriteExample(path string) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("provisioning: %s exists: init writes a new file only", path)
	}
	return writeOpen(path, example, os.O_EXCL, 0o644)
}
