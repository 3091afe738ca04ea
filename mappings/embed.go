// Package mappings holds the site mappings bundled with backfill: JSON
// files in the format the etl package loads (see docs/mappings.md), embedded
// into the binary so that `backfill run` and `backfill demo` work without a
// mappings directory. Load them with etl.LoadFS(mappings.FS, ".").
//
// Each file holds one mapping object or an array of them; files named
// schema.json are the format's JSON Schema and are not mappings. Saved pages
// used by the mappings' fixtures live under testdata/.
package mappings

import "embed"

// FS holds every bundled mapping file at its root, and under testdata/ the
// saved pages their fixtures use, so that the bundled fixtures run from the
// binary (etl.Set.TestFixturesFS).
//
//go:embed *.json testdata
var FS embed.FS

// Schema is the JSON Schema (draft 2020-12) of the mapping format. Loading
// validates every mapping file against it, and editors offer completion
// from it when a mapping file names it in its "$schema" key.
//
//go:embed schema.json
var Schema []byte
