package etl

import (
	"strings"
	"testing"

	"backfill/mappings"
)

func TestMerge(t *testing.T) {
	bundled, err := LoadFS(mappings.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	learned, err := Load(map[string][]byte{"learned.json": []byte(`{"name": "learned-a.example",
		"url_patterns": [{"pattern": "^https?://a\\.example/p/[^/]+$"}],
		"fields": [{"name": "shoe_size", "processors": [{"type": "xpath", "parameters": {"expression": "//p[@class='shoe']"}}, {"type": "trim"}]}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	set, err := Merge(bundled.WithHTMLParser(ParserStandard), learned)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Mappings()) != len(bundled.Mappings())+1 || set.Mapping("learned-a.example") == nil || set.Mapping("gravatar") == nil {
		t.Fatalf("merged set has %d mappings", len(set.Mappings()))
	}
	if d := set.Digest(); d == bundled.Digest() || d == learned.Digest() || d == "" {
		t.Errorf("merged digest %q equals a part's", d)
	}
	again, _ := Merge(bundled, learned)
	if again.Digest() != set.Digest() {
		t.Error("merging the same sets gives another digest")
	}
	if set.HTMLParser() != ParserStandard {
		t.Error("the merged set does not keep the first set's parser")
	}
	if !strings.Contains(strings.Join(set.FieldNames(), ","), "shoe_size") {
		t.Errorf("fields %v lack the learned one", set.FieldNames())
	}
	// The learned mapping's XPath plan is collected in the merged set.
	ex := set.Extract("https://a.example/p/ada", []byte(`<html><body><p class="shoe"> 38 </p></body></html>`), "text/html")
	found := false
	for _, f := range ex.Fields {
		found = found || f.Mapping == "learned-a.example" && f.Field == "shoe_size" && f.Values[0] == "38"
	}
	if !found {
		t.Errorf("the merged set does not run the learned mapping: %+v", ex)
	}
	if ok, _ := set.Matches("https://a.example/p/ada"); !ok {
		t.Error("the learned url_pattern does not count in Matches")
	}
	if _, err := Merge(bundled, bundled); err == nil || !strings.Contains(err.Error(), "duplicate mapping name") {
		t.Errorf("merging a set with itself: %v", err)
	}
}
