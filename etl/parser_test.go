package etl

import (
	"reflect"
	"testing"

	"backfill/mappings"
)

func TestParseHTMLParser(t *testing.T) {
	for _, p := range []HTMLParser{ParserFast, ParserStandard} {
		got, err := ParseHTMLParser(p.String())
		if err != nil || got != p {
			t.Errorf("ParseHTMLParser(%q) = %v, %v", p, got, err)
		}
	}
	if _, err := ParseHTMLParser("quick"); err == nil {
		t.Error("ParseHTMLParser accepts an unknown name")
	}
}

// TestStandardParserSkipsFastBuilder: with the switch on, no page goes
// through the fast builder (whose trees live in an arena), and the set
// the switch was taken from is unchanged.
func TestStandardParserSkipsFastBuilder(t *testing.T) {
	page := testwebLikePage()
	fast := newDocument("https://a.example/", string(page), page, "text/html", nil, ParserFast)
	defer fast.release()
	if fast.ar == nil {
		t.Fatal("the fast builder did not take a plain page; the test proves nothing")
	}
	std := newDocument("https://a.example/", string(page), page, "text/html", nil, ParserStandard)
	if std.ar != nil || std.Root == nil {
		t.Errorf("the standard parser built an arena tree (%v) or no tree (%v)", std.ar != nil, std.Root == nil)
	}
	set, err := LoadFS(mappings.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	std2 := set.WithHTMLParser(ParserStandard)
	if set.HTMLParser() != ParserFast || std2.HTMLParser() != ParserStandard || std2.Digest() != set.Digest() {
		t.Errorf("parsers %v and %v, digests %s and %s", set.HTMLParser(), std2.HTMLParser(), set.Digest(), std2.Digest())
	}
}

// TestParsersAgreeOnFixtures runs the bundled mappings on every fixture
// page with either parser: the extractions must be equal, and the bundled
// fixtures must pass with the switch on.
func TestParsersAgreeOnFixtures(t *testing.T) {
	set, err := LoadFS(mappings.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	std := set.WithHTMLParser(ParserStandard)
	pages := fixturePages(t)
	for name, page := range pages {
		for _, u := range []string{"https://people.example/p/ada", "http://staff.example.org/staff/erin.html", "https://shop.example/contact"} {
			a := set.ExtractWithFingerprint(u, page, "text/html")
			b := std.ExtractWithFingerprint(u, page, "text/html")
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s as %s:\nfast     %+v\nstandard %+v", name, u, a, b)
			}
		}
	}
	results := std.TestFixturesFS(mappings.FS)
	if len(results) < 5 {
		t.Fatalf("only %d bundled fixtures ran", len(results))
	}
	for _, r := range results {
		if !r.OK() {
			t.Errorf("with the standard parser: %s", r)
		}
	}
}
