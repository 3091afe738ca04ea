package etl

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/html"
)

// benchPage builds a ~100 KB profile page: a header with meta and JSON-LD,
// a long list of posts and many links, the shape of a real profile.
func benchPage() []byte {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html><head><title>Ada Example</title>
<meta property="og:title" content="Ada Example"><meta name="description" content="Engineer in Lisbon">
<script type="application/ld+json">{"@context":"https://schema.org","@type":"Person","name":"Ada Example","jobTitle":"Engineer","address":{"@type":"PostalAddress","addressLocality":"Lisbon"}}</script>
</head><body><div class="profile"><h1 class="fn"> Ada Example </h1><p class="location">Lisbon, Portugal</p>
<p class="email">ada [at] ada [dot] example</p><p class="born">10 December 1815</p><p class="followers">12,345</p>
<ul class="sites"><li><a href="https://ada.example/">home</a></li><li><a href="https://code.example/ada">code</a></li></ul></div>`)
	for i := 0; b.Len() < 100_000; i++ {
		fmt.Fprintf(&b, `<div class="post"><h3><a href="/posts/%d">Post number %d</a></h3><p>Some text about engines, numbers and the weather, paragraph %d.</p></div>`+"\n", i, i, i)
	}
	b.WriteString(`</body></html>`)
	return []byte(b.String())
}

const benchMappings = `[
{"name": "profile", "url_patterns": [{"type": "regex", "pattern": "^https://people\\.example/\\w+$"}],
 "url_parsers": [{"processors": [{"type": "xpath", "parameters": {"expression": "//ul[@class='sites']//a/@href"}}]}],
 "fields": [
  {"name": "name", "match": true, "processors": [{"type": "xpath", "parameters": {"expression": "//h1[@class='fn']"}}, {"type": "trim"}]},
  {"name": "location", "processors": [{"type": "xpath", "parameters": {"expression": "//p[@class='location']/text()"}}, {"type": "trim"}]},
  {"name": "email", "type": "email", "processors": [{"type": "xpath", "parameters": {"expression": "//p[@class='email']"}}, {"type": "email"}]},
  {"name": "born", "processors": [{"type": "xpath", "parameters": {"expression": "//p[@class='born']"}}, {"type": "date"}]},
  {"name": "followers", "processors": [{"type": "xpath", "parameters": {"expression": "//p[@class='followers']"}}, {"type": "number"}]}
 ]},
{"name": "jsonld", "fields": [
  {"name": "name", "processors": [{"type": "jsonld", "parameters": {"type": "Person", "property": "name"}}]},
  {"name": "job", "processors": [{"type": "jsonld", "parameters": {"type": "Person", "property": "jobTitle"}}]},
  {"name": "city", "processors": [{"type": "jsonld", "parameters": {"type": "Person", "property": "address.addressLocality"}}]}
 ]},
{"name": "meta", "fields": [
  {"name": "title", "processors": [{"type": "meta", "parameters": {"name": "og:title"}}]},
  {"name": "description", "processors": [{"type": "meta", "parameters": {"name": "description"}}, {"type": "regex", "parameters": {"pattern": "in (\\w+)"}}]}
 ]}
]`

// BenchmarkExtract: one ~100 KB page, 3 mappings, 10 fields.
func BenchmarkExtract(b *testing.B) {
	set, err := Load(map[string][]byte{"bench.json": []byte(benchMappings)})
	if err != nil {
		b.Fatal(err)
	}
	body := benchPage()
	ex := set.Extract("https://people.example/ada", body, "text/html")
	if len(ex.Fields) != 10 || len(ex.Errors) != 0 {
		b.Fatalf("benchmark mappings are broken: %d fields, errors %v", len(ex.Fields), ex.Errors)
	}
	if _, ok := fastParse(body, string(body)); !ok {
		b.Fatal("the fast parser falls back to html.Parse on the benchmark page")
	}
	// parse-std is golang.org/x/net/html alone on the same page, parse-fast
	// the fast tree builder extraction uses (the same tree); extract is
	// everything: parse, 3 mappings, url_parsers and outbound links.
	b.Run("parse-std", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := html.Parse(bytes.NewReader(body)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse-fast", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			// As Extract parses: in the body's memory, with the arena
			// given back for the next page.
			_, ar, ok := fastParseArena(body, unsafe.String(&body[0], len(body)), set.plan)
			if !ok {
				b.Fatal("fell back")
			}
			releaseArena(ar)
		}
	})
	// jsonly is the JavaScript-shell check alone, which extract runs when
	// a mapping left a field empty (not on this page).
	b.Run("jsonly", func(b *testing.B) {
		root, err := html.Parse(bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if JSOnly(root) {
				b.Fatal("the benchmark page is no JavaScript shell")
			}
		}
	})
	b.Run("extract", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			set.Extract("https://people.example/ada", body, "text/html")
		}
	})
}
