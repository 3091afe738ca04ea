package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"backfill/store"
)

// A field a refresh changed shows what it held before in its provenance
// history; a field never changed has no history key at all.
func TestExportProvenanceHistory(t *testing.T) {
	ctx := context.Background()
	s := openSQLite(t, filepath.Join(t.TempDir(), "store.db"))
	defer s.Close()
	rec := store.Record{ID: "1", Seq: 1, Order: []string{"id", "email", "title"},
		Fields: map[string]string{"id": "1", "email": "", "title": ""}}
	if err := s.PutRecords(ctx, []store.Record{rec}); err != nil {
		t.Fatal(err)
	}
	found := exportAt.Add(-24 * time.Hour)
	vals := []store.Value{
		{Field: "email", Value: "new@one.example", Source: "https://one.example/", Mapping: "m", At: exportAt,
			History: []store.Prior{{Value: "old@one.example", Source: "https://one.example/old", Mapping: "m", Depth: 1, At: found, Replaced: exportAt}}},
		{Field: "title", Value: "Chief", Source: "https://one.example/", Mapping: "m", At: exportAt},
	}
	if err := s.SetFields(ctx, "1", vals); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := store.Export(ctx, s, &out, store.ExportOptions{Format: "jsonl", Provenance: true}); err != nil {
		t.Fatal(err)
	}
	var line struct {
		Provenance map[string]map[string]json.RawMessage `json:"provenance"`
	}
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("%s: %v", out.Bytes(), err)
	}
	var hist []map[string]any
	if err := json.Unmarshal(line.Provenance["email"]["history"], &hist); err != nil {
		t.Fatalf("email history in %s: %v", out.Bytes(), err)
	}
	want := []map[string]any{{"value": "old@one.example", "source": "https://one.example/old", "mapping": "m", "depth": float64(1),
		"at": found.Format(time.RFC3339Nano), "replaced": exportAt.Format(time.RFC3339Nano)}}
	if !reflect.DeepEqual(hist, want) {
		t.Errorf("email history %v, want %v", hist, want)
	}
	if _, ok := line.Provenance["title"]["history"]; ok {
		t.Errorf("title has a history key: %s", out.Bytes())
	}
}
