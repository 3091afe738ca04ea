package linkscore

import (
	"slices"
	"testing"
)

func TestWords(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want []string
	}{
		{[]string{"Ada Lovelace"}, []string{"ada", "lovelace"}},
		{[]string{"  Łukasz   SØRENSEN-Kamiro "}, []string{"lukasz", "sorensen", "kamiro"}},
		{[]string{"Inès Kamiro", "inès  kamiro"}, []string{"ines", "kamiro"}}, // each once
		{[]string{"Li Bo", "de la Cruz"}, []string{"cruz"}},                   // shorter than MinWord
		{[]string{"Straße 5, Zürich"}, []string{"strasse", "zurich"}},
		{nil, nil},
	} {
		if got := Words(c.in...); !slices.Equal(got, c.want) {
			t.Errorf("Words(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	many := Words("one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen")
	if len(many) != maxWords {
		t.Errorf("%d words, want at most %d", len(many), maxWords)
	}
}

func TestAddress(t *testing.T) {
	for in, want := range map[string]string{
		"http://folk-0001.example/people/ines-kamiro":        "/people/ines-kamiro",
		"https://Site.example/P%C5%81/%C5%81ukasz?q=Ada#top": "/pl/lukasz?q=ada",
		"http://site.example":                                "",
		"http://site.example/%zz":                            "/%zz", // not unescaped: kept as it is
		"not a url":                                          "",
	} {
		if got := Address(in); got != want {
			t.Errorf("Address(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestName(t *testing.T) {
	words := Words("Łukasz Kamiro")
	for _, c := range []struct {
		url, anchor string
		want        Naming
	}{
		{"http://h.example/people/lukasz-kamiro", "profile", NameFull},
		{"http://h.example/p/1234", "Łukasz Kamiro", NameFull},
		{"http://h.example/people/lukaszkamiro", "", NameFull}, // a word inside a slug
		{"http://h.example/people/lukasz-tervi", "About me", NamePart},
		{"http://h.example/", "All people", NameNone},
		{"http://kamiro.example/", "", NameNone}, // the host is the site's, not the page's
	} {
		if got := Name(words, Address(c.url), Fold(c.anchor)); got != c.want {
			t.Errorf("Name(%q, %q) = %s, want %s", c.url, c.anchor, got, c.want)
		}
	}
	if got := Name(nil, "/people/x", ""); got != NameUnknown {
		t.Errorf("Name without words = %s, want unknown", got)
	}
	if !Holds(Words("Lisbon, Portugal"), Address("http://h.example/office/lisbon"), "") || Holds(Words("Lisbon"), "/x", "y") {
		t.Error("Holds does not find a word of a value in an address, or finds one where there is none")
	}
}

func TestFanoutOf(t *testing.T) {
	for n, want := range map[int]uint8{0: FanoutNone, 1: FanoutOne, 2: FanoutFew, 4: FanoutFew, 5: FanoutSome, 19: FanoutSome, 20: FanoutMany, 99: FanoutMany, 100: FanoutHuge, 5000: FanoutHuge} {
		if got := FanoutOf(n); got != want {
			t.Errorf("FanoutOf(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestCueString(t *testing.T) {
	c := Cue{Match: true, Naming: NameFull, Values: true, Source: SourceRefused, Fanout: FanoutSome, Last: true, Barren: true}
	if got, want := c.String(), "match naming=full values source=refused fanout=5-19 last barren"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := (Cue{}).String(), "no-match naming=unknown source=own fanout=none"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
