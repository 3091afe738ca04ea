package learn

import (
	"fmt"
	"strings"
	"testing"
)

func TestSplits(t *testing.T) {
	var got []string
	for _, s := range splits("São Paulo, Brazil") {
		got = append(got, strings.Join(s.parts, "|")+" / "+strings.Join(s.seps, "|"))
	}
	want := []string{"São|Paulo, Brazil /  ", "São Paulo|Brazil / , ", "São|Paulo|Brazil /  |, "}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("splits:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s := splits("Lisbon"); s != nil {
		t.Errorf("a word has no pieces: %v", s)
	}
}

// TestLocateInPieces: a value the page holds nowhere whole is found in
// the pieces of one source, and the rules proposed take it whole.
func TestLocateInPieces(t *testing.T) {
	for _, c := range []struct {
		name, body, value, rule string
	}{
		{"JSON-LD", `<script type="application/ld+json">{"@type": "Person", "name": "Ada", "address": {"@type": "PostalAddress", "addressLocality": "Medellín", "addressCountry": "Colombia"}}</script>`,
			"Medellín, Colombia", `jsonld PostalAddress → concat(jsonpath $.addressLocality + ", " + jsonpath $.addressCountry)`},
		{"a script blob", `<script id="__NEXT_DATA__" type="application/json">{"props": {"user": {"first": "Ada", "last": "Lovelace", "city": "Lyon"}}}</script>`,
			"Ada Lovelace", `xpath //script[@id='__NEXT_DATA__'] → jsonpath $.props.user → concat(jsonpath $.first + " " + jsonpath $.last)`},
		{"labelled cells", `<table><tr><th>City</th><td>Osaka</td></tr><tr><th>Country</th><td>Japan</td></tr></table>`,
			"Osaka, Japan", `concat(xpath //th[normalize-space()='City']/following-sibling::td[1] → trim + ", " + xpath //th[normalize-space()='Country']/following-sibling::td[1] → trim)`},
		{"pieces of two blocks", `<script type="application/ld+json">{"@type": "Place", "name": "Osaka"}</script><script type="application/ld+json">{"@type": "Country", "name": "Japan"}</script>`,
			"Osaka, Japan", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := parseDoc(&Page{URL: "http://a.example/p", ContentType: "text/html", Body: []byte("<html><head></head><body>" + c.body + "</body></html>")})
			occs := d.locate(kindString, c.value)
			var rules []string
			for _, o := range occs {
				if o.kind != occComposite {
					t.Errorf("found %q whole: %+v", c.value, o)
				}
				for _, r := range d.candidates(o, kindString, words{}) {
					rules = append(rules, r.String())
				}
			}
			if c.rule == "" {
				if len(occs) > 0 {
					t.Errorf("found %q in pieces of unrelated places: %q", c.value, rules)
				}
				return
			}
			if !strings.Contains(strings.Join(rules, "\n"), c.rule) {
				t.Errorf("rules for %q:\n%s\nwant %s", c.value, strings.Join(rules, "\n"), c.rule)
			}
		})
	}
}

// TestLearnComposite: a location held in pieces, on pages of two
// layouts, is learned as the concat of its pieces on both, and a page
// of the other layout yields nothing of the first's rule.
func TestLearnComposite(t *testing.T) {
	s := site{host: "pieces.example", page: func(p person, i int) string {
		city, country, _ := strings.Cut(p.location, ", ")
		if i%2 == 0 {
			return pageHTML(fmt.Sprintf(`<script type="application/ld+json">{"@type": "Person", "name": %q, "homeLocation": {"@type": "Place", "address": {"@type": "PostalAddress", "addressLocality": %q, "addressCountry": %q}}}</script><h1>%s</h1>`,
				p.name, city, country, p.name))
		}
		return pageHTML(fmt.Sprintf(`<h1>%s</h1><dl><dt>City</dt><dd>%s</dd><dt>Country</dt><dd>%s</dd></dl>`, p.name, city, country))
	}}
	res, set, ps := learnSite(t, s, 6, all, Options{Fields: []string{"location"}, MatchKey: "name"})
	f := fieldResult(t, res, "location")
	if f.Status != Learned || len(f.Rules) != 2 {
		t.Fatalf("location: %s %q (%s), want two rules", f.Status, f.Rule, f.Reason)
	}
	for i := 6; i < len(people); i++ {
		if got := fieldsOn(set, ps[s.url(i)])["location"]; got != people[i].location {
			t.Errorf("%s: location %q, want %q", people[i].name, got, people[i].location)
		}
	}
}
