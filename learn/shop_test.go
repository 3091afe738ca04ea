package learn

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The shop: generated product pages of books, as online shops make
// them, for the benchmarks (pages of about 150 KB) and for tests (the
// same shape, smaller).

// shopBook is one product page of the shop.
type shopBook struct {
	title, isbn, publisher, date string
	authors                      []string
}

func shopBooks(n int) []shopBook {
	first := []string{"Ada", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas"}
	last := []string{"Almeida", "Berger", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Horvat"}
	pubs := []string{"Harbour Press", "Northwind Books", "Lantern House", "Meridian", "Quillfeather"}
	var out []shopBook
	for i := 0; i < n; i++ {
		out = append(out, shopBook{
			title:     fmt.Sprintf("The %s of %s, volume %d", []string{"Atlas", "Garden", "Voyage", "Archive"}[i%4], last[i%len(last)], i+1),
			authors:   []string{first[i%len(first)] + " " + last[(i/3)%len(last)]},
			isbn:      fmt.Sprintf("978-%d-%05d-%03d-%d", i%10, 10000+i*37, i%1000, i%10),
			publisher: pubs[i%len(pubs)],
			date:      fmt.Sprintf("%d %s %d", 1+i%28, []string{"January", "March", "May", "July", "October"}[i%5], 1990+i%30),
		})
		if i%3 == 0 {
			// A third of the books have two authors.
			out[i].authors = append(out[i].authors, first[(i+3)%len(first)]+" "+last[(i+5)%len(last)])
		}
	}
	return out
}

// shopShape sizes a product page and says what it holds besides the
// details table.
type shopShape struct {
	menu, paragraphs, reviews, cards, flags, footer int
	// button adds "Add TITLE to basket", a text a rule could cut a
	// title out of (and cut it short at a " to " of its own).
	button bool
	// ld adds a schema.org Book in JSON-LD, its authors a list of
	// Persons and its date as a month ("2010-06").
	ld bool
}

// fullShop is the benchmark's page, about 150 KB; testShop the same
// shape at a tenth of the size, with what the tests need.
var (
	fullShop = shopShape{menu: 400, paragraphs: 170, reviews: 420, cards: 150, flags: 600, footer: 200}
	testShop = shopShape{menu: 40, paragraphs: 10, reviews: 20, cards: 15, flags: 20, footer: 20, button: true, ld: true}
)

// shopPage is a product page, as shops make them: a navigation of many
// links, the details in a table, a long description, a JSON state
// script, reviews and a carousel of related books (other titles,
// authors and publishers: decoys).
func shopPage(b shopBook, i int, all []shopBook, sh shopShape) string {
	var s strings.Builder
	s.WriteString("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>")
	s.WriteString(b.title + " – Shop</title>")
	if sh.ld {
		var authors []map[string]string
		for _, a := range b.authors {
			authors = append(authors, map[string]string{"@type": "Person", "name": a})
		}
		ld, _ := json.Marshal(map[string]any{"@context": "https://schema.org", "@type": "Book", "name": b.title, "isbn": b.isbn,
			"author": authors, "publisher": map[string]string{"@type": "Organization", "name": b.publisher}})
		fmt.Fprintf(&s, `<script type="application/ld+json">%s</script>`, ld)
	}
	s.WriteString("</head><body><header><nav class=\"menu\"><ul>")
	for k := 0; k < sh.menu; k++ {
		fmt.Fprintf(&s, "<li class=\"menu-item\"><a href=\"/category/%d\">Category %d</a></li>", k, k)
	}
	s.WriteString("</ul></nav></header><main><div class=\"product\">")
	fmt.Fprintf(&s, "<h1 class=\"product-title\">%s</h1><p class=\"byline\">by %s</p>", b.title, byline(b.authors))
	if sh.button {
		fmt.Fprintf(&s, "<button class=\"buy\">Add %s to basket</button>", b.title)
	}
	fmt.Fprintf(&s, "<table class=\"details\"><tr><th>Authors</th><td>%s</td></tr>", strings.Join(b.authors, "; "))
	fmt.Fprintf(&s, "<tr><th>ISBN</th><td>%s</td></tr><tr><th>Publisher</th><td>%s</td></tr><tr><th>Published</th><td>%s</td></tr><tr><th>Pages</th><td>%d</td></tr><tr><th>Language</th><td>English</td></tr></table>",
		b.isbn, b.publisher, b.date, 200+i)
	s.WriteString("<div class=\"description\">")
	for k := 0; k < sh.paragraphs; k++ {
		fmt.Fprintf(&s, "<p>Paragraph %d of a long description that tells the story of the book, its themes and its many characters, and why readers love it so.</p>", k)
	}
	s.WriteString("</div></div><section class=\"reviews\">")
	for k := 0; k < sh.reviews; k++ {
		fmt.Fprintf(&s, "<div class=\"review\"><span class=\"stars\">%d</span><p>Review %d: a fine read, recommended to every reader of the genre.</p></div>", 1+k%5, k)
	}
	s.WriteString("</section><section class=\"related\"><ul>")
	for k := 1; k <= sh.cards; k++ {
		o := all[(i+k)%len(all)]
		fmt.Fprintf(&s, "<li class=\"card\"><a href=\"/book/%d\">%s</a><span class=\"card-author\">%s</span><span class=\"card-publisher\">%s</span><span class=\"price\">%d.99</span></li>", (i+k)%len(all), o.title, strings.Join(o.authors, ", "), o.publisher, 5+k%20)
	}
	s.WriteString("</ul></section></main><script>window.__STATE__ = {\"cart\":[],\"flags\":{")
	for k := 0; k < sh.flags; k++ {
		fmt.Fprintf(&s, "\"flag%d\":%t,", k, k%2 == 0)
	}
	s.WriteString("\"end\":true}};</script><footer>")
	for k := 0; k < sh.footer; k++ {
		fmt.Fprintf(&s, "<a class=\"footer-link\" href=\"/page/%d\">Page %d</a> ", k, k)
	}
	s.WriteString("</footer></body></html>")
	return s.String()
}

// byline joins authors as a byline does: "A", "A and B", "A, B and C".
func byline(authors []string) string {
	if n := len(authors); n > 1 {
		return strings.Join(authors[:n-1], ", ") + " and " + authors[n-1]
	}
	return strings.Join(authors, "")
}
