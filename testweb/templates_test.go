package testweb

import (
	"html"
	"strings"
	"testing"
)

// TestTemplateProfiles: the profiles are many, distinct, stable, spread
// over the five templates, and leave details out as documented.
func TestTemplateProfiles(t *testing.T) {
	ps := TemplateProfiles(0)
	if len(ps) != len(Templates())*DefaultTemplateProfiles {
		t.Fatalf("%d profiles, want %d", len(ps), len(Templates())*DefaultTemplateProfiles)
	}
	again := TemplateProfiles(DefaultTemplateProfiles)
	urls, names := map[string]bool{}, map[string]bool{}
	perTemplate := map[string]int{}
	missing := map[string]int{}
	for i, p := range ps {
		if p != again[i] {
			t.Fatalf("profile %d differs between calls: %+v, %+v", i, p, again[i])
		}
		if urls[p.URL] {
			t.Errorf("URL %s twice", p.URL)
		}
		urls[p.URL] = true
		names[p.Name] = true
		perTemplate[p.Template]++
		for f, v := range map[string]string{"location": p.Location, "email": p.Email, "website": p.Website} {
			if v == "" {
				missing[f]++
			}
		}
		if p.Name == "" {
			t.Errorf("%s has no name", p.URL)
		}
	}
	for _, tpl := range Templates() {
		if perTemplate[tpl] != DefaultTemplateProfiles {
			t.Errorf("template %s has %d profiles", tpl, perTemplate[tpl])
		}
	}
	if len(names) < len(ps)/2 {
		t.Errorf("only %d distinct names in %d profiles", len(names), len(ps))
	}
	for _, f := range []string{"location", "email", "website"} {
		if missing[f] == 0 || missing[f] > len(ps)/4 {
			t.Errorf("%d profiles lack %s, want some but few", missing[f], f)
		}
	}
}

// TestTemplatesServe fetches every profile: each shows the details it has
// (in the template's own way) and none it lacks, the office decoys are
// there, robots.txt disallows /private/ without a Crawl-delay, and an
// unknown path is 404.
func TestTemplatesServe(t *testing.T) {
	const n = 12
	w, err := StartTemplates(TemplatesOptions{PerTemplate: n})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if len(w.Hosts()) != len(Templates()) {
		t.Errorf("hosts %v", w.Hosts())
	}
	c := newClient(t, w)
	decoy := map[string]string{
		TemplateList:   "Geneva, Switzerland",
		TemplateTable:  "registrar@registry.example.org",
		TemplateProse:  "webmaster [at] club [dot] example [dot] net",
		TemplateJSBlob: "help@spa.example",
		TemplateJSONLD: "desk@press.example",
	}
	for _, p := range TemplateProfiles(n) {
		g := get(t, c, "GET", p.URL, "", "")
		if g.status != 200 || !strings.HasPrefix(g.ctype, "text/html") {
			t.Fatalf("%s: status %d, %s", p.URL, g.status, g.ctype)
		}
		body := html.UnescapeString(g.body)
		shown := func(v string) bool {
			switch {
			case p.Template == TemplateProse && strings.Contains(v, "@"):
				return strings.Contains(body, obfuscate(v)) && !strings.Contains(body, v)
			case p.Template == TemplateJSBlob:
				return strings.Contains(body, `"`+v+`"`)
			}
			return strings.Contains(body, v)
		}
		for f, v := range map[string]string{"name": p.Name, "location": p.Location, "email": p.Email, "website": p.Website} {
			if v != "" && !shown(v) {
				t.Errorf("%s does not show its %s %q:\n%s", p.URL, f, v, g.body)
			}
		}
		if p.Location == "" && strings.Contains(body, "based in") {
			t.Errorf("%s has no location but says where its owner is based", p.URL)
		}
		if p.Email == "" && strings.Contains(body, "@mail.example") || p.Email == "" && strings.Contains(body, "[at] mail") {
			t.Errorf("%s has no email but shows one", p.URL)
		}
		if !strings.Contains(body, decoy[p.Template]) {
			t.Errorf("%s lacks its decoy %q", p.URL, decoy[p.Template])
		}
	}
	for _, h := range w.Hosts() {
		g := get(t, c, "GET", "http://"+h+"/robots.txt", "", "")
		if g.status != 200 || !strings.Contains(g.body, "Disallow: /private/") || strings.Contains(g.body, "Crawl-delay") {
			t.Errorf("%s robots.txt: %d %q", h, g.status, g.body)
		}
		if g := get(t, c, "GET", "http://"+h+"/people/nobody", "", ""); g.status != 404 {
			t.Errorf("%s: unknown path gave %d", h, g.status)
		}
	}
	if _, err := StartTemplates(TemplatesOptions{PerTemplate: 1000}); err == nil {
		t.Error("StartTemplates accepted 1000 profiles per template")
	}
}
