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
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("provisioning: %w", err)
	}
	_, err = f.Write(example)
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err != nil {
		return fmt.Errorf("provisioning: %w", err)
	}
	return nil
}
