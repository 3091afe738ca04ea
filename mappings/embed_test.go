package mappings_test

import (
	"strings"
	"testing"

	"backfill/etl"
	"backfill/mappings"
)

// own lists the mappings this package's authors maintain here; other
// bundled files (the fixture web's) are checked for loading only.
var own = []string{"gravatar", "schemaorg-person", "schemaorg-organization", "opengraph", "contact-page"}

func TestBundledMappingsLoad(t *testing.T) {
	set, err := etl.LoadFS(mappings.FS, ".")
	if err != nil {
		for _, e := range etl.Unjoin(err) {
			t.Error(e)
		}
		t.FailNow()
	}
	for _, name := range own {
		if set.Mapping(name) == nil {
			t.Errorf("bundled mapping %q missing", name)
		}
	}
}

func TestBundledFixtures(t *testing.T) {
	set, err := etl.LoadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, r := range set.TestFixtures() {
		if !contains(own, r.Mapping) {
			continue
		}
		ran++
		if !r.OK() {
			t.Error(r)
		}
	}
	if ran < 5 {
		t.Errorf("only %d fixtures ran", ran)
	}
}

// TestGravatarMatchesOnlyProfiles checks that the bundled mappings do not
// claim each other's pages.
func TestMappingsAreSpecific(t *testing.T) {
	set, err := etl.LoadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for u, want := range map[string]string{
		"https://en.gravatar.com/ada":        "gravatar",
		"https://shop.example/contact":       "contact-page",
		"https://shop.example/en/about-us/":  "contact-page",
		"https://shop.example/contact.html":  "contact-page",
		"https://shop.example/contacts-list": "",
		"https://shop.example/products/1":    "",
	} {
		var got []string
		for _, m := range set.Mappings() {
			if contains(own, m.Name) && !m.Generic() && m.MatchURL(u) {
				got = append(got, m.Name)
			}
		}
		if strings.Join(got, ",") != want {
			t.Errorf("%s matched %v, want %q", u, got, want)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestBundledFixturesFromFS runs the fixtures from the embedded files, as
// `backfill mappings test` does without a directory.
func TestBundledFixturesFromFS(t *testing.T) {
	set, err := etl.LoadFS(mappings.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, r := range set.TestFixturesFS(mappings.FS) {
		ran++
		if !r.OK() {
			t.Error(r)
		}
	}
	if ran < 5 {
		t.Errorf("only %d fixtures ran", ran)
	}
}
