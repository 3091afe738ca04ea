package learn

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backfill/etl"
)

// contact is a person of the contact site: what the records know, and
// what the page writes of it.
type contact struct {
	name, phone, office, city, country, born, bornPage, since, sincePage string
}

func contacts() []contact {
	cities := [][2]string{{"Medellín", "Colombia"}, {"Lyon", "France"}, {"São Paulo", "Brazil"}, {"Kraków", "Poland"}, {"Osaka", "Japan"}}
	months := []string{"January", "March", "June", "September", "November"}
	var out []contact
	for i := 0; i < 12; i++ {
		c := contact{
			name:      fmt.Sprintf("%s %s", []string{"Ada", "Bruno", "Chloé", "Dmitri", "Elena", "Farid"}[i%6], []string{"Almeida", "Berger", "Costa", "Dubois"}[i%4]),
			office:    fmt.Sprintf("0161 496 %04d", 201+i*7),
			city:      cities[i%len(cities)][0],
			country:   cities[i%len(cities)][1],
			born:      fmt.Sprintf("%d %s 19%02d", 3+i, months[i%5], 70+i),
			bornPage:  fmt.Sprintf("19%02d-%02d-%02d", 70+i, []int{1, 3, 6, 9, 11}[i%5], 3+i),
			since:     fmt.Sprintf("20%02d-%02d", 5+i, 1+i%12),
			sincePage: fmt.Sprintf("%s 20%02d", []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}[i%12], 5+i),
		}
		c.name += fmt.Sprint(" ", i) // one person a name
		// Most numbers are international, written with their +.
		c.phone = fmt.Sprintf("+39 02 555 %04d", 102+i)
		if i%4 == 3 {
			c.phone = fmt.Sprintf("020 7946 %04d", 11+i)
		}
		out = append(out, c)
	}
	return out
}

// contactPage writes a contact's page: the name in a heading, the phone
// in a paragraph (its + kept, a decoy number without one beside it), the
// office number in a table cell, the location in pieces and the birth
// day in JSON-LD, the membership month as words.
func contactPage(c contact) string {
	ld, _ := json.Marshal(map[string]any{"@context": "https://schema.org", "@type": "Person", "name": c.name, "birthDate": c.bornPage,
		"address": map[string]string{"@type": "PostalAddress", "addressLocality": c.city, "addressCountry": c.country}})
	return fmt.Sprintf(`<!DOCTYPE html><html><head><title>%s</title><script type="application/ld+json">%s</script></head><body>
<h1 class="name">%s</h1><p class="tel">Tel: %s</p><p class="fax">Fax: 39 02 555 9999</p>
<table class="contact"><tr><th>Office</th><td>%s</td></tr><tr><th>Member since</th><td>%s</td></tr></table>
</body></html>`, c.name, ld, c.name, c.phone, c.office, c.sincePage)
}

// TestLearnValuesExactly is the contact site of issue 32: a phone with
// its +, a phone in a table cell, a location in two JSON-LD properties,
// a JSON-LD date and a month in words, each learned so that the rule
// takes what the page says (the + included); a field no page shows is
// reported and leaves the others learned; the fixtures hold the pages'
// own values, so `mappings test` fails once a rule alters one.
func TestLearnValuesExactly(t *testing.T) {
	cs := contacts()
	ps := pageSet{}
	var ts []Teacher
	for i, c := range cs {
		u := fmt.Sprintf("http://contacts.example/people/%d", i)
		ps[u] = &Page{URL: u, ContentType: "text/html", Body: []byte(contactPage(c))}
		if i < 8 {
			ts = append(ts, Teacher{ID: fmt.Sprint("c", i), Links: []string{u}, Values: map[string]string{"name": c.name, "phone": c.phone,
				"office": c.office, "location": c.city + ", " + c.country, "born": c.born, "since": c.since, "nickname": "the " + strings.Fields(c.name)[0]}})
		}
	}
	opts := Options{Fields: []string{"phone", "office", "location", "born", "since", "nickname"}, MatchKey: "name", Types: map[string]string{"since": "date"}}
	res, err := Learn(context.Background(), ts, ps, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Groups[0].Fields {
		t.Logf("%-8s %s: %s %s", f.Field, f.Status, f.Rule, f.Reason)
	}
	if f := fieldResult(t, res, "nickname"); f.Status != NeverFound {
		t.Errorf("nickname: %s, want %s", f.Status, NeverFound)
	}
	set, dir := writeLearned(t, res)
	for i := 8; i < len(cs); i++ {
		c := cs[i]
		got := fieldsOn(set, ps[fmt.Sprintf("http://contacts.example/people/%d", i)])
		want := map[string]string{"name": c.name, "phone": c.phone, "office": c.office, "location": c.city + ", " + c.country, "born": c.bornPage, "since": c.sincePage}
		for f, w := range want {
			if got[f] != w {
				t.Errorf("%s: %s = %q, want what the page says, %q (rule %s)", c.name, f, got[f], w, fieldResult(t, res, f).Rule)
			}
		}
	}
	alterFixture(t, dir, "phone")

	// A rule's value read as the same number is not enough: it must be
	// the page's text.
	d := parseDoc(ps["http://contacts.example/people/0"])
	fl := &field{name: "phone", kind: kindPhone, ex: []example{{doc: d, page: d.page, value: cs[0].phone}}}
	fl.ex[0].locate(kindPhone)
	for out, want := range map[string]bool{cs[0].phone: true, strings.TrimPrefix(cs[0].phone, "+"): false, strings.ReplaceAll(cs[0].phone, " ", ""): false} {
		if got := fl.right([]string{out}, 0); got != want {
			t.Errorf("a rule yielding %q for %q is right: %v, want %v", out, cs[0].phone, got, want)
		}
	}
}

// alterFixture checks that the fixtures of the learned mapping in dir
// expect the phone numbers as the pages write them, then makes the
// field's rule drop a leading + and checks that `mappings test` fails.
func alterFixture(t *testing.T, dir, field string) {
	t.Helper()
	path := filepath.Join(dir, "learned-contacts.example.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, fx := range m["fixtures"].([]any) {
		vals := fx.(map[string]any)["expect"].(map[string]any)["fields"].(map[string]any)[field].([]any)
		if len(vals) != 1 || !strings.HasPrefix(vals[0].(string), "+39 02 555 ") && !strings.HasPrefix(vals[0].(string), "020 7946 ") {
			t.Errorf("fixture %v expects %s %q, not what the page says", fx.(map[string]any)["url"], field, vals)
		}
	}
	for _, f := range m["fields"].([]any) {
		fm := f.(map[string]any)
		if fm["name"] == field {
			fm["processors"] = append(fm["processors"].([]any), map[string]any{"type": "replace", "parameters": map[string]any{"pattern": `^\+`, "replacement": ""}})
		}
	}
	altered, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(path, altered, 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := etl.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, r := range set.TestFixtures() {
		if !r.OK() {
			failed++
		}
	}
	if failed == 0 {
		t.Errorf("a rule that drops the + of %s passes the fixtures learn wrote", field)
	}
}
