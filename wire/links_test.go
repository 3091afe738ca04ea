package wire

import (
	"fmt"
	"testing"
)

func TestMergeLinks(t *testing.T) {
	parsed := []string{"http://a.test/1", "http://a.test/2", "http://a.test/1"}
	out := []string{"http://a.test/2", "http://b.test/", "", "http://c.test/"}
	texts := []string{"Two", "", "", "Sea"}
	got := MergeLinks(parsed, out, texts, 10)
	want := []Link{
		{URL: "http://a.test/1", Parsed: true},
		{URL: "http://a.test/2", Parsed: true, Text: "Two"}, // its anchor's text, found among the page's links
		{URL: "http://b.test/"},
		{URL: "http://c.test/", Text: "Sea"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("MergeLinks = %v, want %v", got, want)
	}
	if got := MergeLinks(parsed, out, texts, 3); len(got) != 3 || got[2].URL != "http://b.test/" {
		t.Errorf("MergeLinks limited to 3 = %v", got)
	}
	if got := MergeLinks(nil, nil, nil, 10); got != nil {
		t.Errorf("MergeLinks of nothing = %v", got)
	}
}
