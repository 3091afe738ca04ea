package learn

import (
	"strings"
	"testing"
)

// FuzzCandidates feeds arbitrary pages and values (texts, lists, days,
// numbers) to the locator and the candidate generator: nothing panics, and every rule proposed is one the
// mapping loader accepts (a refused candidate would be a bug of the
// generator, silently dropped by evaluate).
func FuzzCandidates(f *testing.F) {
	for i, l := range layouts {
		p := people[i%len(people)]
		f.Add(l.site.page(p, i), p.location, l.site.ctype)
		f.Add(l.site.page(p, i), p.email, l.site.ctype)
	}
	f.Add(`<p>a'b"c: x</p><script>var s = {"k": "x"};</script>`, "x", "")
	f.Add(`<dl><dt>It's "here"</dt><dd>v.1 (x)</dd></dl>`, "v.1 (x)", "text/html")
	f.Add(bookPage(books[0]), strings.Join(books[0].authors, ", "), "text/html")
	f.Add(`<p>Released on <b>4 May 1995</b>, $1,234.50</p>`, "1995-05-04", "")
	f.Add(`<p>Price: 1.234,50 €</p>`, "1234.5", "")
	f.Add(contactPage(contacts()[0]), "Medellín, Colombia", "text/html")
	f.Add(contactPage(contacts()[0]), "+39 02 555 0102", "text/html")
	f.Add(`<script type="application/json">{"a": {"b": "x", "c": "y z"}}</script>`, "x, y z", "")
	f.Fuzz(func(t *testing.T, body, value, ctype string) {
		if len(body) > 1<<16 || len(value) > 200 {
			return
		}
		d := parseDoc(&Page{URL: "http://fuzz.example/p/x", ContentType: ctype, Body: []byte(body)})
		for _, k := range []kind{kindString, kindEmail, kindURL, kindList, kindDate, kindNumber, kindPhone, kindKey} {
			if collapse(value) == "" {
				return
			}
			fl := &field{name: "f", kind: k, ex: []example{{doc: d, page: d.page, value: value, own: wordsOf("Fuzz Person")}}}
			fl.ex[0].locate(k)
			for _, o := range fl.ex[0].occs {
				propose := d.candidates
				if k == kindList {
					propose = func(o occurrence, _ kind, own words) []*rule { return d.listCandidates(o, own) }
				}
				for _, r := range propose(o, k, fl.ex[0].own) {
					fl.cands = append(fl.cands, &candidate{rule: r, from: []bool{true}})
				}
			}
			if len(fl.cands) > maxCandidates {
				fl.cands = fl.cands[:maxCandidates]
			}
			if len(fl.cands) > 0 {
				if err := fl.run(fl.cands); err != nil {
					t.Fatalf("a candidate the loader refuses, for %q on %q: %v", value, body, err)
				}
			}
		}
	})
}
