package records

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadFile reads a records file as Load does, without a state.
func TestReadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "people.csv")
	data := "id,name,location,homepage\nr1,Ada,Lisbon,http://ada.example/\nr2,Bob\nr3,Cy,,https://cy.example/p\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []Record
	rep, err := ReadFile(path, DefaultID, func(r Record) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 2 || rep.Bad != 1 || len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0].Error(), "people.csv:3:") {
		t.Errorf("report %+v", rep)
	}
	if len(got) != 2 || got[0].ID != "r1" || got[0].Fields["location"] != "Lisbon" || strings.Join(got[1].Links, " ") != "https://cy.example/p" {
		t.Errorf("records %+v", got)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "none.csv"), DefaultID, func(Record) error { return nil }); err == nil {
		t.Error("a missing file reads")
	}
}
