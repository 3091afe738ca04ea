package etl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzLoad feeds arbitrary bytes to the mapping loader: it must return a
// set or errors, never panic, and never both.
func FuzzLoad(f *testing.F) {
	for _, dir := range []string{"testdata/load", "testdata/mappings", "../mappings"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	f.Add([]byte(`{"name":"x","fields":[{"name":"y","processors":[{"type":"regex","parameters":{"pattern":"(?!a)b","group":"0"}}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := Load(map[string][]byte{"fuzz.json": data})
		if (set == nil) == (err == nil) {
			t.Fatalf("set %v and error %v", set, err)
		}
		if set != nil {
			set.Extract("https://a.example/", []byte("<p>x</p>"), "text/html")
		}
	})
}

// fuzzSet has every processor at least once, in chains that start on the
// document and chains that feed processors each other's output.
const fuzzSet = `[{
 "name": "all",
 "url_parsers": [
  {"processors": [{"type": "xpath", "parameters": {"expression": "//a/@href"}}]},
  {"processors": [{"type": "jsonpath", "parameters": {"expression": "$..url"}}]},
  {"processors": [{"type": "jsonld", "parameters": {"property": "sameAs"}}]}
 ],
 "fields": [
  {"name": "a", "all": true, "processors": [{"type": "xpath", "parameters": {"expression": "//*", "html": "outer"}}, {"type": "xpath", "parameters": {"expression": "./text()"}}, {"type": "trim"}, {"type": "lower"}, {"type": "upper"}, {"type": "unique"}]},
  {"name": "b", "all": true, "processors": [{"type": "regex", "parameters": {"pattern": "(\\w+)@(\\w+)", "all": true}}, {"type": "replace", "parameters": {"pattern": "(?!x)a", "replacement": "$1"}}, {"type": "split", "parameters": {"pattern": "[,;]"}}, {"type": "join"}]},
  {"name": "c", "type": "email", "processors": [{"type": "email"}]},
  {"name": "d", "type": "number", "processors": [{"type": "xpath", "parameters": {"expression": "//text()"}}, {"type": "number"}]},
  {"name": "e", "type": "date", "processors": [{"type": "xpath", "parameters": {"expression": "//text()"}}, {"type": "date"}, {"type": "last"}]},
  {"name": "f", "type": "url", "processors": [{"type": "xpath", "parameters": {"expression": "//@src"}}, {"type": "url"}, {"type": "nth", "parameters": {"index": -1}}]},
  {"name": "g", "type": "list", "processors": [{"type": "jsonld", "parameters": {"type": "Person"}}, {"type": "jsonpath", "parameters": {"expression": "$..name"}}, {"type": "first"}]},
  {"name": "h", "processors": [{"type": "jsonpath", "parameters": {"expression": "$..*"}}, {"type": "html-unescape"}, {"type": "default", "parameters": {"value": "none"}}]},
  {"name": "i", "all": true, "processors": [{"type": "meta", "parameters": {"name": "og:title"}}, {"type": "xpath", "parameters": {"expression": "//b"}}]},
  {"name": "j", "validate": "^[a-z]+$", "processors": [{"type": "xpath", "parameters": {"expression": "//script"}}, {"type": "jsonpath", "parameters": {"expression": "$.a"}}]}
 ]}]`

// FuzzExtract runs every processor on arbitrary HTML and JSON bodies.
func FuzzExtract(f *testing.F) {
	set, err := Load(map[string][]byte{"all.json": []byte(fuzzSet)})
	if err != nil {
		f.Fatal(err)
	}
	pages, _ := filepath.Glob("testdata/pages/*")
	for _, p := range pages {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data, "text/html")
		}
	}
	f.Add([]byte(page), "")
	f.Add([]byte(`{"url":"/x","a":[1,2,{"name":"n"}]}`), "application/json")
	f.Add([]byte(`<script type="application/ld+json">[{"@type":"Person","name":"A","sameAs":"//x.example"}]</script>`), "text/html")
	f.Add([]byte("<a href='\x00'>\xff\xfe</a><img src=x>"), "text/html")
	f.Fuzz(func(t *testing.T, body []byte, ctype string) {
		ex := set.Extract("https://fuzz.example/dir/page?q=1", body, ctype)
		if ex == nil {
			t.Fatal("nil extraction")
		}
		// The extraction owns what it returns: the caller may reuse body.
		before := fmt.Sprintf("%#v", *ex)
		scribble(body)
		if after := fmt.Sprintf("%#v", *ex); after != before {
			t.Fatalf("the extraction changed with its body:\n%s\nwas\n%s", after, before)
		}
		for _, e := range ex.Errors {
			if strings.Contains(e.Err, "internal error") {
				t.Fatalf("internal error: %v", e)
			}
		}
		for _, l := range append(append([]string{}, ex.Links...), ex.OutLinks...) {
			if n, err := NormalizeURL(l); err != nil || n != l {
				t.Fatalf("link %q is not normalized (%q, %v)", l, n, err)
			}
		}
		if ex.OutLinks != nil && len(ex.Anchors) != len(ex.OutLinks) {
			t.Fatalf("%d anchor texts for %d links", len(ex.Anchors), len(ex.OutLinks))
		}
		for _, a := range ex.Anchors {
			if len(a) > MaxAnchorText || !utf8.ValidString(a) || strings.TrimSpace(a) != a {
				t.Fatalf("anchor text %q: over %d bytes, not UTF-8 or not trimmed", a, MaxAnchorText)
			}
		}
	})
}

// FuzzNormalizeURL checks that normalization is idempotent.
func FuzzNormalizeURL(f *testing.F) {
	for _, s := range []string{"HTTP://A.example:80/a/../b?x#y", "https://[::1]:443/", "http://a.example/%zz", "https://a.example/./."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		n, err := NormalizeURL(raw)
		if err != nil {
			return
		}
		again, err := NormalizeURL(n)
		if err != nil || again != n {
			t.Fatalf("NormalizeURL(%q) = %q, then %q, %v", raw, n, again, err)
		}
	})
}

// FuzzMayBeObfuscated holds the email processor's shortcut to its regular
// expression: whatever it lets pass must have no obfuscated address.
func FuzzMayBeObfuscated(f *testing.F) {
	for _, s := range []string{"ada [at] ada [dot] example", "ada@ada.example", "ada (AT) x.example", "a @ b.example", "a[@]b.example",
		"a\t@\tb.example", "a{at}b.example", "a<at>b.example", "a At b Dot example", "plain text", "caf\u00e9 AT b.c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !mayBeObfuscated(s) && obfWhole.MatchString(s) {
			t.Fatalf("%q has an obfuscated address %q, and the shortcut skips it", s, obfWhole.FindString(s))
		}
	})
}

// FuzzDateShapes holds parseDate's shortcut: a layout it skips for a value
// of another shape must be one time.Parse cannot read the value with.
func FuzzDateShapes(f *testing.F) {
	for _, s := range []string{"10 December 1815", "2024-05-06T07:08:09Z", "Mon, 02 Jan 2006 15:04:05 MST", "2006", "20060102",
		"January 2006", "2024-05-06 07:08:09 UTC", "2024-05-06t07:08:09z", "Tue 3 Feb 2009", "3 févr. 2009"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := shapeOf(s)
		for k, l := range dateLayouts {
			if v.digitFirst == layoutShapes[k].digitFirst && !(v.named && !layoutShapes[k].named) {
				continue // tried
			}
			if _, err := time.Parse(l.layout, s); err == nil {
				t.Fatalf("layout %q reads %q, and the shortcut skips it", l.layout, s)
			}
		}
	})
}
