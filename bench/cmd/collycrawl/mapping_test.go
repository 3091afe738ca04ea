package main

import (
	"os"
	"reflect"
	"testing"

	"github.com/antchfx/htmlquery"
)

// The contender must extract what backfill's mapping extracts, or the
// benchmark compares different work.
func TestExtract(t *testing.T) {
	set, err := loadMappings("../../../mappings", "testweb-*.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("testdata/profile.html")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := htmlquery.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url       string
		wantField map[string]string
		wantLinks []string
	}{
		{
			url: "http://people-0001.example/p/0001",
			wantField: map[string]string{
				"testweb-people/name":     "Ada Berger",
				"testweb-people/location": "Lisbon, Portugal",
				"testweb-people/email":    "ada.berger.0001@people-0001.example",
			},
			wantLinks: []string{"/p/0002"},
		},
		{url: "http://people-0001.example/"}, // the index matches no mapping
	}
	for _, tt := range tests {
		fields, links := set.extract(tt.url, doc)
		if !reflect.DeepEqual(fields, tt.wantField) {
			t.Errorf("%s: fields = %v, want %v", tt.url, fields, tt.wantField)
		}
		if !reflect.DeepEqual(links, tt.wantLinks) {
			t.Errorf("%s: links = %v, want %v", tt.url, links, tt.wantLinks)
		}
	}
}

func TestLoadMappingsRefusesUnknownProcessor(t *testing.T) {
	dir := t.TempDir()
	bad := `{"name":"m","url_patterns":[{"type":"regex","pattern":"x"}],"fields":[{"name":"f","processors":[{"type":"jsonpath","parameters":{}}]}]}`
	if err := os.WriteFile(dir+"/m.json", []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadMappings(dir, "*.json"); err == nil {
		t.Fatal("loaded a mapping with a processor the contender cannot run")
	}
}
