package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"backfill/etl"
)

// A shop of books by one to three authors, served over HTTP on a
// loopback address, as `mappings learn` meets real author lists: the
// byline joins them "A, B and C" (each a link), the details table "A; B;
// C", and a carousel of related books lists other books' authors "X, Y"
// (decoys); a button says "Add TITLE to basket", and some titles have a
// " to " of their own.

var (
	shopFirst = []string{"Ada", "Bruno", "Chloé", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Inès", "Jonas", "Keiko"}
	shopLast  = []string{"Almeida", "Berger", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Horvat", "Ivanova"}
)

type shopBook struct {
	title   string
	authors []string
}

func shopBooks(n int) []shopBook {
	var out []shopBook
	for i := 0; i < n; i++ {
		b := shopBook{title: fmt.Sprintf("The %s of the %s, book %d", []string{"Atlas", "Garden", "Voyage", "Archive"}[i%4], []string{"North", "Sea", "Hills"}[i%3], i+1)}
		if i%4 == 1 {
			b.title = fmt.Sprintf("A Guide to the %s, book %d", []string{"North", "Sea", "Hills"}[i%3], i+1)
		}
		for k := 0; k <= i%3; k++ {
			b.authors = append(b.authors, shopFirst[(i+k*4)%len(shopFirst)]+" "+shopLast[(i*2+k)%len(shopLast)])
		}
		out = append(out, b)
	}
	return out
}

// bookPage is book i's page; layout 1 is another shop's, the authors an
// HTML list and the details in a definition list.
func bookPage(books []shopBook, i, layout int) string {
	b := books[i]
	var s strings.Builder
	fmt.Fprintf(&s, "<!DOCTYPE html><html><head><title>%s – Shop</title></head><body><nav><a href=\"/\">Home</a></nav><main>", b.title)
	if layout == 0 {
		links := make([]string, len(b.authors))
		for k, a := range b.authors {
			links[k] = fmt.Sprintf("<a href=\"/author/%d\">%s</a>", len(a), a)
		}
		by := links[0]
		if n := len(links); n > 1 {
			by = strings.Join(links[:n-1], ", ") + " and " + links[n-1]
		}
		fmt.Fprintf(&s, "<h1 class=\"title\">%s</h1><p class=\"byline\">by %s</p><button>Add %s to basket</button><table class=\"details\"><tr><th>Authors</th><td>%s</td></tr><tr><th>Pages</th><td>%d</td></tr></table>",
			b.title, by, b.title, strings.Join(b.authors, "; "), 120+i)
	} else {
		fmt.Fprintf(&s, "<div class=\"book\"><h2>%s</h2><ul class=\"writers\"><li>%s</li></ul><dl><dt>Pages</dt><dd>%d</dd></dl></div>", b.title, strings.Join(b.authors, "</li><li>"), 120+i)
	}
	s.WriteString("<section class=\"related\"><ul>")
	for k := 1; k <= 3; k++ {
		o := books[(i+k)%len(books)]
		fmt.Fprintf(&s, "<li><a href=\"/book/%d\">%s</a> <span class=\"card-authors\">%s</span></li>", (i+k)%len(books), o.title, strings.Join(o.authors, ", "))
	}
	s.WriteString("</ul></section></main></body></html>")
	return s.String()
}

// startShop serves the books at addr (a loopback address) in a layout.
func startShop(t *testing.T, addr string, books []shopBook, layout int) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nAllow: /\n")
			return
		}
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/book/"))
		if err != nil || i < 0 || i >= len(books) {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, bookPage(books, i, layout))
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// shopRecords writes the records of the books at base: the first teach,
// their authors joined with sep; the others know their title alone.
func shopRecords(t *testing.T, path string, books []shopBook, teach int, sep string, bases ...string) {
	t.Helper()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"id", "title", "author", "link"})
	for _, base := range bases {
		for i, bk := range books {
			author := ""
			if i < teach {
				author = strings.Join(bk.authors, sep)
			}
			w.Write([]string{fmt.Sprintf("%s-%d", base, i), bk.title, author, fmt.Sprintf("%s/book/%d", base, i)})
		}
	}
	w.Flush()
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// loopbackFlags point learning at loopback servers, politely and at once.
var loopbackFlags = []string{"--allow-loopback", "--delay", "0", "--contact", "https://backfill.invalid/learn-test"}

// TestLearnListsOfAuthors: five teachers whose records join a book's
// authors with " and ", ", " or "; ", pages that join them otherwise (the byline "A, B and
// C", the details "A; B; C"): `mappings learn --list author` learns a
// list field whose items are the authors, and `--join "author=, "` one
// value joined as asked; on the books no teacher knew, the learned
// mapping takes every author, compared as sets, and `mappings test`
// passes the fixtures learning wrote.
func TestLearnListsOfAuthors(t *testing.T) {
	books := shopBooks(30)
	srv := startShop(t, "127.0.0.1", books, 0)
	for _, c := range []struct {
		name, sep string
		flags     []string
		join      string // the separator of a joined value, "" for a list
	}{
		{"and, a list", " and ", []string{"--list", "author"}, ""},
		{"commas, a list", ", ", []string{"--list", "author"}, ""},
		{"semicolons, joined", "; ", []string{"--join", "author=, "}, ", "},
		{"and, joined", " and ", []string{"--join", "author= / "}, " / "},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			records := filepath.Join(dir, "books.csv")
			shopRecords(t, records, books, 5, c.sep, srv.URL)
			out := filepath.Join(dir, "learned")
			report := runBackfill(t, append(append([]string{"mappings", "learn", "--records", records, "--fields", "author", "--match", "title", "--depth", "0", "-o", out}, c.flags...), loopbackFlags...)...)
			if !strings.Contains(report, "author  learned") {
				t.Fatalf("author not learned:\n%s", report)
			}
			if got := runBackfill(t, "mappings", "test", out); !strings.Contains(got, "0 failed") {
				t.Errorf("mappings test: %s", got)
			}
			set, err := etl.LoadDir(out)
			if err != nil {
				t.Fatal(err)
			}
			for i := 5; i < len(books); i++ {
				u := fmt.Sprintf("%s/book/%d", srv.URL, i)
				var got []string
				for _, f := range set.Extract(u, []byte(bookPage(books, i, 0)), "text/html").Fields {
					if f.Field == "author" {
						got = f.Values
					}
				}
				want := books[i].authors
				if c.join != "" {
					if len(got) != 1 || got[0] != strings.Join(want, c.join) {
						t.Errorf("%s: author %q, want %q", u, got, strings.Join(want, c.join))
					}
					continue
				}
				if !sameSet(got, want) {
					t.Errorf("%s: authors %q, want %q as a set", u, got, want)
				}
			}
		})
	}
}

func sameSet(a, b []string) bool {
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}

// TestLearnKeepsAddressedHostsApart: two shops reached by address,
// 127.0.0.1 and 127.0.0.2, in one records file, are two sites with a
// mapping each for its own layout, never one site of numbered hosts.
func TestLearnKeepsAddressedHostsApart(t *testing.T) {
	books := shopBooks(12)
	a := startShop(t, "127.0.0.1", books, 0)
	b := startShop(t, "127.0.0.2", books, 1)
	dir := t.TempDir()
	records := filepath.Join(dir, "books.csv")
	shopRecords(t, records, books, 8, ", ", a.URL, b.URL)
	out := filepath.Join(dir, "learned")
	report := runBackfill(t, append([]string{"mappings", "learn", "--records", records, "--fields", "author", "--match", "title", "--list", "author", "--depth", "0", "-o", out}, loopbackFlags...)...)
	for _, srv := range []*httptest.Server{a, b} {
		host := strings.TrimPrefix(srv.URL, "http://")
		name := "learned-" + strings.ReplaceAll(host, ":", "-")
		pattern := `^https?://` + strings.ReplaceAll(host, ".", `\.`) + `/book/[^/?#]+$`
		if !strings.Contains(report, name+"  "+pattern) || !strings.Contains(report, "→ "+name+".json") {
			t.Errorf("no mapping %s for %s alone:\n%s", name, pattern, report)
		}
	}
	if strings.Contains(report, "[0-9]+") {
		t.Errorf("hosts merged by their numbers:\n%s", report)
	}
	if got := runBackfill(t, "mappings", "test", out); !strings.Contains(got, "0 failed") {
		t.Errorf("mappings test: %s", got)
	}
}
