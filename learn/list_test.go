package learn

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"backfill/etl"
)

type book struct {
	title   string
	authors []string
}

var books = []book{
	{"A Theory of Tides", []string{"Ada Almeida", "Bruno Berger"}},
	{"Counting Stars", []string{"Chloe Costa"}},
	{"Deep Water", []string{"Dmitri Dubois", "Elena Eriksen", "Farid Fischer"}},
	{"Engines", []string{"Greta Garcia"}},
	{"Forests and Fields", []string{"Hugo Horvat", "Ines Ivanova"}},
	{"Glass", []string{"Jonas Jensen", "Keiko Kato"}},
	{"Harbours", []string{"Luca Larsen"}},
	{"Islands", []string{"Maya Moreno", "Nils Nowak", "Olga Olsen"}},
	{"Journeys", []string{"Pablo Petrov", "Quinn Quist"}},
	{"Kites", []string{"Rosa Rossi"}},
	{"Lanterns", []string{"Soren Smith", "Tomas Tanaka"}},
	{"Mirrors", []string{"Uma Urban", "Viktor Vega"}},
}

// bookPage prints the authors twice, joined differently: "A and B" in
// the byline, "A; B" in the details, never as the records join them.
func bookPage(b book) string {
	byline := strings.Join(b.authors, ", ")
	if n := len(b.authors); n > 1 {
		byline = strings.Join(b.authors[:n-1], ", ") + " and " + b.authors[n-1]
	}
	return pageHTML(fmt.Sprintf(`<h1 class="title">%s</h1><p class="byline">by %s</p>
<table class="details"><tr><th>Title</th><td>%s</td></tr><tr><th>Authors</th><td>%s</td></tr><tr><th>Pages</th><td>%d</td></tr></table>`,
		b.title, byline, b.title, strings.Join(b.authors, "; "), 100+len(b.title)))
}

func bookSite(n int, join string) (pageSet, []Teacher) {
	ps := pageSet{}
	var ts []Teacher
	for i, b := range books {
		u := fmt.Sprintf("http://books.example/book/%d", i+1)
		ps[u] = &Page{URL: u, ContentType: "text/html", Body: []byte(bookPage(b))}
		if i < n {
			ts = append(ts, Teacher{ID: fmt.Sprint("b", i+1), Links: []string{u},
				Values: map[string]string{"title": b.title, "authors": strings.Join(b.authors, join)}})
		}
	}
	return ps, ts
}

// TestLearnListField learns a field whose values are lists, joined one
// way in the records and two other ways on the pages: as a list of
// items (type list), or joined as asked, and the learned mapping takes
// every author of the books no teacher knew.
func TestLearnListField(t *testing.T) {
	for _, c := range []struct {
		name, join string
		opts       Options
		typ        string
	}{
		{"records joined by commas, a list", ", ", Options{}, etl.TypeList},
		{"records joined by slashes, joined as asked", " / ", Options{Join: map[string]string{"authors": ", "}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ps, ts := bookSite(6, c.join)
			opts := c.opts
			opts.Fields, opts.MatchKey = []string{"authors"}, "title"
			res, err := Learn(context.Background(), ts, ps, opts)
			if err != nil {
				t.Fatal(err)
			}
			f := fieldResult(t, res, "authors")
			if f.Status != Learned || f.Type != c.typ {
				t.Fatalf("authors: %s (%s), type %q; want learned, type %q", f.Status, f.Reason, f.Type, c.typ)
			}
			t.Logf("authors: %s", f.Rule)
			set, _ := writeLearned(t, res)
			for i, b := range books[6:] {
				u := fmt.Sprintf("http://books.example/book/%d", i+7)
				p := ps[u]
				var got []string
				for _, fv := range set.Extract(p.URL, p.Body, p.ContentType).Fields {
					if fv.Field == "authors" {
						got = fv.Values
					}
				}
				if c.typ == "" {
					if len(got) != 1 || got[0] != strings.Join(b.authors, ", ") {
						t.Errorf("%s: authors %q, want %q", u, got, strings.Join(b.authors, ", "))
					}
					continue
				}
				if listKey(got) != listKey(b.authors) || len(got) != len(b.authors) {
					t.Errorf("%s: authors %q, want %q (rule %s)", u, got, b.authors, f.Rule)
				}
			}
		})
	}
}

func TestListItems(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"A, B and C", []string{"A", "B", "C"}},
		{"A; B", []string{"A", "B"}},
		{"A, and B", []string{"A", "B"}},
		{"A & B | C", []string{"A", "B", "C"}},
		{"Andrea Anderson", []string{"Andrea Anderson"}},
		{"", nil},
	} {
		if got := listItems(c.in); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("listItems(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if !kindList.same("Ada, Bruno", "Bruno and  Ada") || kindList.same("Ada, Bruno", "Ada") || kindList.same("Ada, Bruno", "Bruno and ada") {
		t.Error("lists compare as sets of items, each as it is written")
	}
	if sep := separators("A and B", "C; D"); sep != `\s*(?:\band\b|;)\s*` {
		t.Errorf("separators: %s", sep)
	}
}

// TestProgressSaysKept: progress over kept pages says they were read
// from there, not fetched.
func TestProgressSaysKept(t *testing.T) {
	k := &KeptSource{}
	k.counts = KeptCounts{Kept: 3, Fetched: 1}
	if got, want := progress(k, 4, 10), "had 4 of 10 pages: 3 read from kept pages, 1 fetched, 0 failed"; got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
	if got := progress(pageSet{}, 4, 10); got != "fetched 4 of 10 pages" {
		t.Errorf("progress %q", got)
	}
}
