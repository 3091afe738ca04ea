package learn

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"backfill/etl"
)

// pageSet serves saved pages by URL: the learner's input, as a Source.
type pageSet map[string]*Page

func (ps pageSet) Fetch(_ context.Context, rawURL string) (*Page, error) {
	if p, ok := ps[rawURL]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("fetch %s: 404", rawURL)
}

type person struct{ name, location, email, website string }

var people = []person{
	{"Ada Almeida", "Lisbon, Portugal", "ada.almeida@mail.example", "https://ada.example/"},
	{"Bruno Berger", "Vienna, Austria", "bruno.berger@mail.example", "https://bruno.example/"},
	{"Chloe Costa", "Porto, Portugal", "chloe.costa@mail.example", "https://chloe.example/"},
	{"Dmitri Dubois", "Lille, France", "dmitri.dubois@mail.example", "https://dmitri.example/"},
	{"Elena Eriksen", "Aarhus, Denmark", "elena.eriksen@mail.example", "https://elena.example/"},
	{"Farid Fischer", "Graz, Austria", "farid.fischer@mail.example", "https://farid.example/"},
	{"Greta Garcia", "Seville, Spain", "greta.garcia@mail.example", "https://greta.example/"},
	{"Hugo Horvat", "Zagreb, Croatia", "hugo.horvat@mail.example", "https://hugo.example/"},
	{"Ines Ivanova", "Sofia, Bulgaria", "ines.ivanova@mail.example", "https://ines.example/"},
}

// site is a layout: its pages for people, the first teachers of which
// teach.
type site struct {
	host, ctype string
	page        func(p person, i int) string
}

func (s site) url(i int) string {
	return fmt.Sprintf("http://%s/people/%s", s.host, strings.ToLower(strings.Fields(people[i].name)[0]))
}

// build returns the pages of every person and the teachers among them
// (the first n), knowing the values teach gives for a person.
func (s site) build(n int, teach func(p person) map[string]string) (pageSet, []Teacher) {
	ps := pageSet{}
	var ts []Teacher
	for i, p := range people {
		ct := s.ctype
		if ct == "" {
			ct = "text/html"
		}
		ps[s.url(i)] = &Page{URL: s.url(i), ContentType: ct, Body: []byte(s.page(p, i))}
		if i < n {
			ts = append(ts, Teacher{ID: fmt.Sprint("r", i+1), Values: teach(p), Links: []string{s.url(i)}})
		}
	}
	return ps, ts
}

func all(p person) map[string]string {
	return map[string]string{"name": p.name, "location": p.location, "email": p.email, "website": p.website}
}

func pageHTML(body string) string {
	return "<!DOCTYPE html><html><head><title>Profile</title></head><body>" + body + "</body></html>"
}

// learnSite learns the site from its first n people and writes the result
// into a temporary directory, which it loads back.
func learnSite(t *testing.T, s site, n int, teach func(person) map[string]string, opts Options) (*Result, *etl.Set, pageSet) {
	t.Helper()
	ps, ts := s.build(n, teach)
	if opts.Fields == nil {
		opts.Fields = []string{"location", "email", "website"}
		opts.MatchKey = "name"
	}
	res, err := Learn(context.Background(), ts, ps, opts)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := writeLearned(t, res)
	return res, set, ps
}

// writeLearned writes what was learned into a temporary directory and
// loads it back, its fixtures passing: the set and the directory.
func writeLearned(t *testing.T, res *Result) (*etl.Set, string) {
	t.Helper()
	dir := t.TempDir()
	if _, err := res.Write(dir); err != nil {
		t.Fatal(err)
	}
	set, err := etl.LoadDir(dir)
	if err != nil {
		t.Fatalf("learned mappings do not load: %v", err)
	}
	for _, r := range set.TestFixtures() {
		if !r.OK() {
			t.Errorf("learned fixture fails: %s", r)
		}
	}
	return set, dir
}

// fieldsOn runs the learned set on a page: field → first value.
func fieldsOn(set *etl.Set, p *Page) map[string]string {
	out := map[string]string{}
	for _, f := range set.Extract(p.URL, p.Body, p.ContentType).Fields {
		out[f.Field] = f.Values[0]
	}
	return out
}

func fieldResult(t *testing.T, res *Result, name string) *FieldResult {
	t.Helper()
	if len(res.Groups) != 1 {
		t.Fatalf("%d groups, want 1", len(res.Groups))
	}
	for _, f := range res.Groups[0].Fields {
		if f.Field == name {
			return f
		}
	}
	t.Fatalf("no field %s", name)
	return nil
}

var layouts = []struct {
	name string
	site site
	// what the rule of each field must look like (a regexp on its chain)
	// and its kind
	rules map[string]string
	kinds map[string]rank
}{
	{"labelled list beside a decoy list", site{host: "dl.example", page: func(p person, i int) string {
		return pageHTML(fmt.Sprintf(`<dl class="person"><dt>Name</dt><dd>%s</dd><dt>Location</dt><dd>%s</dd><dt>Email</dt><dd>%s</dd><dt>Web</dt><dd><a href="%s">home</a></dd></dl>
<dl class="office"><dt>Location</dt><dd>Geneva</dd><dt>Email</dt><dd>office@dl.example</dd></dl>`, p.name, p.location, p.email, p.website))
	}}, map[string]string{"location": `dl\[@class='person'\]//dt\[normalize-space\(\)='Location'\]`, "website": `dt\[normalize-space\(\)='Web'\].*/a/@href`},
		map[string]rank{"name": rankLabel, "location": rankLabel, "email": rankLabel, "website": rankLabel}},
	{"inline labels and an obfuscated address", site{host: "inline.example", page: func(p person, i int) string {
		local, domain, _ := strings.Cut(p.email, "@")
		return pageHTML(fmt.Sprintf(`<h1>%s</h1><p>Location: %s</p><p>Email: %s [at] %s</p><p>Site: <a class="www" href="%s">%s</a></p><p>Webmaster: web [at] inline [dot] example</p>`,
			p.name, p.location, local, strings.ReplaceAll(domain, ".", " [dot] "), p.website, p.website))
	}}, map[string]string{"location": `starts-with\(normalize-space\(\), 'Location:'\).*regex`, "email": `→ email$`},
		map[string]rank{"location": rankLabel, "email": rankLabel}},
	{"a bold label before a text node", site{host: "bold.example", page: func(p person, i int) string {
		return pageHTML(fmt.Sprintf(`<div class="card"><h2>%s</h2><p><b>City:</b> %s</p><p><b>Mail:</b> %s</p></div>`, p.name, p.location, p.email))
	}}, map[string]string{"location": `b\[normalize-space\(\)='City:'\]/following-sibling::text\(\)\[1\]`},
		map[string]rank{"location": rankLabel}},
	{"classes only", site{host: "class.example", page: func(p person, i int) string {
		return pageHTML(fmt.Sprintf(`<div class="profile"><h1 class="fn">%s</h1><p class="location">%s</p><a class="email" href="mailto:%s">write</a></div>`, p.name, p.location, p.email))
	}}, map[string]string{"location": `@class='location'`, "email": `@href`},
		map[string]rank{"name": rankAttr, "location": rankAttr, "email": rankAttr}},
	{"meta tags only", site{host: "meta.example", page: func(p person, i int) string {
		return fmt.Sprintf(`<html><head><meta property="og:title" content="%s"><meta name="geo.placename" content="%s"></head><body><p>Hello</p></body></html>`, p.name, p.location)
	}}, map[string]string{"location": `^meta geo.placename → trim$`}, map[string]rank{"name": rankMeta, "location": rankMeta}},
	{"a JSON API", site{host: "api.example", ctype: "application/json", page: func(p person, i int) string {
		return fmt.Sprintf(`{"data": {"person": {"full_name": %q, "home": {"city": %q}, "contact": [%q]}}}`, p.name, p.location, p.email)
	}}, map[string]string{"location": `^jsonpath \$\.data\.person\.home\.city`, "email": `contact\[0\]`},
		map[string]rank{"location": rankBlob, "email": rankBlob}},
	{"JSON in a script with an id", site{host: "blob.example", page: func(p person, i int) string {
		return pageHTML(fmt.Sprintf(`<div id="root"></div><script id="__DATA__" type="application/json">{"props": {"user": {"name": %q, "where": %q, "mail": %q}}}</script>`, p.name, p.location, p.email))
	}}, map[string]string{"location": `script\[@id='__DATA__'\] → jsonpath \$\.props\.user\.where`},
		map[string]rank{"name": rankBlob, "location": rankBlob, "email": rankBlob}},
}

// TestLearnLayouts learns each layout from five people and checks the
// kind of rule, then runs the written mappings on the four people it did
// not learn from.
func TestLearnLayouts(t *testing.T) {
	for _, c := range layouts {
		t.Run(c.name, func(t *testing.T) {
			res, set, ps := learnSite(t, c.site, 5, all, Options{})
			for field, want := range c.rules {
				f := fieldResult(t, res, field)
				if f.Status != Learned || !regexp.MustCompile(want).MatchString(f.Rule) {
					t.Errorf("%s: %s %q, want a rule like %s (%s)", field, f.Status, f.Rule, want, f.Reason)
				}
			}
			for field, want := range c.kinds {
				if f := fieldResult(t, res, field); f.rule == nil || f.rule.rank != want {
					t.Errorf("%s: rule %q is a %s, want a %s (%s)", field, f.Rule, f.Kind, want, f.Reason)
				}
			}
			for i := 5; i < len(people); i++ {
				got := fieldsOn(set, ps[c.site.url(i)])
				for field, want := range all(people[i]) {
					if f := fieldResult(t, res, field); f.Status == Learned && got[field] != want {
						t.Errorf("unseen %s: %s = %q, want %q", people[i].name, field, got[field], want)
					}
				}
			}
		})
	}
}

// TestLearnDegrades: what cannot be learned is reported per field with
// the reason, and not written.
func TestLearnDegrades(t *testing.T) {
	cities := []string{"Paris, France", "Rome, Italy", "Oslo, Norway"}
	s := site{host: "hard.example", page: func(p person, i int) string {
		// The location hides among other cities in an unlabelled list,
		// at a place that changes; no email is shown at all; the
		// website is shown on all pages but one teacher's, whose
		// record says otherwise.
		list := append([]string{}, cities...)
		k := i % 4
		list = append(list[:k%3], append([]string{p.location}, list[k%3:]...)...)
		web := p.website
		if i == 2 {
			web = "https://elsewhere.example/"
		}
		return pageHTML(fmt.Sprintf(`<h1 class="name">%s</h1><ul><li>%s</li></ul><a class="web" href="%s">web</a>`, p.name, strings.Join(list, "</li><li>"), web))
	}}
	teach := func(p person) map[string]string {
		v := all(p)
		if p.name != people[0].name && p.name != people[1].name {
			delete(v, "name") // the match key is known for two teachers only
		}
		return v
	}
	res, _, _ := learnSite(t, s, 6, teach, Options{})
	checks := []struct {
		field  string
		status Status
		reason string
	}{
		{"name", TooFewTeachers, "2 teacher page(s), need 3"},
		{"location", Ambiguous, "no rule yields exactly the teachers' values"},
		{"email", NeverFound, "no teacher's value appears on its page"},
		{"website", Contradicted, `yields "https://elsewhere.example/" on http://hard.example/people/chloe, whose record says "https://chloe.example/"`},
	}
	for _, c := range checks {
		f := fieldResult(t, res, c.field)
		if f.Status != c.status || !strings.Contains(f.Reason, c.reason) {
			t.Errorf("%s: %s (%s), want %s (%s)", c.field, f.Status, f.Reason, c.status, c.reason)
		}
	}
	var report strings.Builder
	res.Report(&report)
	for _, want := range []string{"too few teachers", "ambiguous", "never found", "the closest, right on", "contradicted by its pages"} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, report.String())
		}
	}
}

// TestLearnRejectsWhatFailsHeldOut: one page of five is of another make,
// its class naming a decoy. Where its value keeps its position, the
// class rule, learned without that page, is wrong on it held out, and
// the rule by position, whose family holds on every held-out page, is
// learned instead. Where it does not, no rule holds held out: the field
// is reported with the miss, and not written.
func TestLearnRejectsWhatFailsHeldOut(t *testing.T) {
	for _, c := range []struct {
		name, odd string
		status    Status
		rule      string
	}{
		{"the position holds", `<h1 class="name">%s</h1><div><p>%s</p></div><footer><p class="city">Geneva</p></footer>`, Learned, "xpath /html/body/div/p → trim"},
		{"nothing holds", `<h1 class="name">%s</h1><section><p>%s</p></section><footer><p class="city">Geneva</p></footer>`, FailedHoldOut, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := site{host: "odd.example", page: func(p person, i int) string {
				if i == 3 {
					return pageHTML(fmt.Sprintf(c.odd, p.name, p.location))
				}
				return pageHTML(fmt.Sprintf(`<h1 class="name">%s</h1><div><p class="city">%s</p></div>`, p.name, p.location))
			}}
			res, set, _ := learnSite(t, s, 5, all, Options{Fields: []string{"location"}, MatchKey: "name"})
			f := fieldResult(t, res, "location")
			if f.Status != c.status || c.rule != "" && f.Rule != c.rule {
				t.Fatalf("location: %s %q (%s), want %s %q", f.Status, f.Rule, f.Reason, c.status, c.rule)
			}
			var report strings.Builder
			res.Report(&report)
			written := set.Mapping(res.Groups[0].Name) != nil && strings.Contains(strings.Join(set.Mapping(res.Groups[0].Name).FieldNames(), ","), "location")
			if c.status == Learned {
				if !written || !f.HeldOut.Perfect() {
					t.Errorf("location written %v, held out %+v", written, f.HeldOut)
				}
				return
			}
			if len(f.Misses) == 0 || !strings.Contains(f.Misses[0].URL, "dmitri") || f.Misses[0].Got != "Geneva" {
				t.Errorf("misses %+v", f.Misses)
			}
			if written {
				t.Errorf("the failed rule was written")
			}
			if !strings.Contains(report.String(), "miss: http://odd.example/people/dmitri") {
				t.Errorf("report does not list the miss:\n%s", report.String())
			}
		})
	}
}

// TestLearnMoreTeachersNeverWorse: learned from 3, 5, 10, 20 and 60
// teachers, no field does worse on the same forty held-out pages with
// more teachers (as many right, never a wrong value), the match key
// included, on two webs. On
// the first, a fifth of the pages keep the location under another class:
// the rule learned from 3 teachers (all of the usual make) fills most
// pages, and from more, some of the other make, the rule that fits them
// all fills at least as many, though a fold without the odd pages learns
// the narrower rule and misses them: a held-out miss is reported, not a
// reason to learn less. The second is a shop (shop_test.go) whose titles,
// the match key, are also in a button ("Add TITLE to basket") a rule
// could cut a title out of, short at a " to " of its own; its authors
// are lists, its dates sometimes months.
func TestLearnMoreTeachersNeverWorse(t *testing.T) {
	for _, w := range []struct {
		name   string
		pages  func(n int) (pageSet, []Teacher, []map[string]string) // n pages, the teachers knowing all, the truth
		fields []string
		key    string
	}{
		{"another class on a fifth of the pages", classWeb, []string{"location"}, "name"},
		{"a shop", shopWeb, []string{"author", "isbn", "publisher", "date"}, "title"},
	} {
		t.Run(w.name, func(t *testing.T) {
			ps, all, truth := w.pages(100)
			last := map[string]int{}
			for _, n := range []int{3, 5, 10, 20, 60} {
				res, err := Learn(context.Background(), all[:n], ps, Options{Fields: w.fields, MatchKey: w.key, PagesPerHost: 100})
				if err != nil {
					t.Fatal(err)
				}
				set, _ := writeLearned(t, res)
				scored := append([]string{w.key}, w.fields...)
				right, wrong := map[string]int{}, map[string]int{}
				for i := 60; i < 100; i++ {
					got := valuesOn(set, ps[all[i].Links[0]])
					for _, f := range scored {
						switch g := got[f]; {
						case len(g) == 0:
						case listKey(g) == listKey(listItems(truth[i][f])) || len(g) == 1 && g[0] == truth[i][f]:
							right[f]++
						default:
							wrong[f]++
							t.Logf("%d teachers: %s of %s: %q, want %q", n, f, all[i].Links[0], g, truth[i][f])
						}
					}
				}
				for _, f := range scored {
					fr := fieldResult(t, res, f)
					t.Logf("%2d teachers: %-9s %s by %s (held out: precision %.2f, recall %.2f); on the 40 other pages %d right, %d wrong",
						n, f, fr.Status, fr.Rule, fr.HeldOut.Precision(), fr.HeldOut.Recall(), right[f], wrong[f])
					if wrong[f] > 0 || right[f] < last[f] {
						t.Errorf("%d teachers: %s %d right, %d wrong; %d right with fewer", n, f, right[f], wrong[f], last[f])
					}
					last[f] = right[f]
				}
			}
			for f := range last {
				if last[f] < 40 {
					t.Errorf("60 teachers: %s right on %d of 40 pages", f, last[f])
				}
			}
		})
	}
}

// valuesOn runs the learned set on a page: field → its values.
func valuesOn(set *etl.Set, p *Page) map[string][]string {
	out := map[string][]string{}
	for _, f := range set.Extract(p.URL, p.Body, p.ContentType).Fields {
		out[f.Field] = f.Values
	}
	return out
}

// classWeb is n pages of people, a fifth of them with the location
// under another class.
func classWeb(n int) (pageSet, []Teacher, []map[string]string) {
	ps := pageSet{}
	var ts []Teacher
	var truth []map[string]string
	for i := 0; i < n; i++ {
		p := people[i%len(people)]
		name := fmt.Sprintf("%s %d", p.name, i)
		class := "city"
		if i%5 == 3 {
			class = "town"
		}
		u := fmt.Sprintf("http://stable.example/people/%d", i)
		ps[u] = &Page{URL: u, ContentType: "text/html", Body: []byte(pageHTML(fmt.Sprintf(`<h1 class="name">%s</h1><p class="%s">%s</p>`, name, class, p.location)))}
		v := map[string]string{"name": name, "location": p.location}
		ts = append(ts, Teacher{ID: fmt.Sprint("r", i), Values: v, Links: []string{u}})
		truth = append(truth, v)
	}
	return ps, ts, truth
}

// shopWeb is n product pages of the test shop, titles with " to " among
// them, books of three authors, dates as months.
func shopWeb(n int) (pageSet, []Teacher, []map[string]string) {
	books := shopBooks(n)
	for i := range books {
		if i%7 == 4 {
			books[i].title = fmt.Sprintf("A Guide to %s and Back, part %d", strings.Fields(books[i].authors[0])[1], i+1)
		}
		if i%5 == 2 {
			books[i].authors = append(books[i].authors, "Keiko Kato", "Luca Larsen")
		}
		if i%2 == 1 {
			books[i].date = books[i].date[strings.Index(books[i].date, " ")+1:]
		}
	}
	sh := testShop
	sh.ld = false
	ps := pageSet{}
	var ts []Teacher
	var truth []map[string]string
	for i, b := range books {
		u := fmt.Sprintf("http://shop.example/book/%d", i)
		ps[u] = &Page{URL: u, ContentType: "text/html", Body: []byte(shopPage(b, i, books, sh))}
		v := map[string]string{"title": b.title, "author": strings.Join(b.authors, ", "), "isbn": b.isbn, "publisher": b.publisher, "date": b.date}
		ts = append(ts, Teacher{ID: fmt.Sprint("b", i), Links: []string{u}, Values: v})
		truth = append(truth, v)
	}
	return ps, ts, truth
}

// TestLearnOneExample learns from a single page when allowed to, and says
// it was not cross-validated.
func TestLearnOneExample(t *testing.T) {
	res, _, _ := learnSite(t, layouts[0].site, 1, all, Options{Fields: []string{"location"}, MatchKey: "name", MinTeachers: 1})
	f := fieldResult(t, res, "location")
	if f.Status != Learned || f.Validated || !strings.Contains(f.Evidence(), "Not cross-validated") {
		t.Errorf("one example: %s, validated %v, %q", f.Status, f.Validated, f.Evidence())
	}
}

// TestLearnSkipsHosts: a host with too few teachers is not fetched, a
// record's website is not a teacher page, and pages that fail are listed.
func TestLearnSkipsHosts(t *testing.T) {
	ps, ts := layouts[3].site.build(4, all)
	ts[0].Links = append(ts[0].Links, "http://lonely.example/ada", people[0].website)
	ts[1].Links = append(ts[1].Links, "http://class.example/people/missing")
	var fetched []string
	src := sourceFunc(func(ctx context.Context, u string) (*Page, error) {
		fetched = append(fetched, u)
		return ps.Fetch(ctx, u)
	})
	res, err := Learn(context.Background(), ts, src, Options{Fields: []string{"location", "website"}, MatchKey: "name"})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range fetched {
		if strings.Contains(u, "lonely") || u == people[0].website {
			t.Errorf("fetched %s", u)
		}
	}
	if len(res.Skipped) != 1 || res.Skipped[0].Host != "lonely.example" || !strings.Contains(res.Skipped[0].Reason, "too few teachers (1, need 3)") {
		t.Errorf("skipped %+v", res.Skipped)
	}
	if len(res.Failed) != 1 || !strings.Contains(res.Failed[0].Err.Error(), "404") || res.Failed[0].Teacher != "r2" {
		t.Errorf("failed %+v", res.Failed)
	}
	if _, err := Learn(context.Background(), []Teacher{{Values: map[string]string{"name": "x"}, Links: []string{"http://a.example/"}}}, src,
		Options{Fields: []string{"location"}, MatchKey: "name"}); err != ErrNoTeachers {
		t.Errorf("a record knowing only its match key teaches: %v", err)
	}
}

type sourceFunc func(ctx context.Context, rawURL string) (*Page, error)

func (f sourceFunc) Fetch(ctx context.Context, rawURL string) (*Page, error) { return f(ctx, rawURL) }

func TestURLPattern(t *testing.T) {
	cases := []struct {
		urls    []string
		want    string
		matches []string
		not     []string
	}{
		{[]string{"http://a.example/people/ada", "http://a.example/people/bob"}, `^https?://a\.example/people/[^/?#]+$`,
			[]string{"https://a.example/people/zoe"}, []string{"http://a.example/about", "http://a.example/people/ada/x", "http://b.example/people/ada"}},
		{[]string{"http://a.example/staff/ada.html"}, `^https?://a\.example/staff/[^/?#]+\.html$`,
			[]string{"http://a.example/staff/bob.html"}, []string{"http://a.example/staff/bob.php"}},
		{[]string{"http://a.example/u/17/profile/", "http://a.example/u/18/profile/"}, `^https?://a\.example/u/[^/?#]+/[^/?#]+/$`, nil, nil},
		{[]string{"http://a.example/p?id=1", "http://a.example/p?id=2"}, `^https?://a\.example/[^/?#]+(?:\?.*)?$`, []string{"http://a.example/p?id=9"}, nil},
		{[]string{"http://ada.example/"}, `^https?://ada\.example/?$`, []string{"http://ada.example"}, []string{"http://ada.example/x"}},
	}
	for _, c := range cases {
		var us []*url.URL
		for _, s := range c.urls {
			u, _ := url.Parse(s)
			us = append(us, u)
		}
		got := urlPattern(us)
		if got != c.want {
			t.Errorf("urlPattern(%v) = %s, want %s", c.urls, got, c.want)
			continue
		}
		re := regexp.MustCompile(got)
		for _, u := range append(c.urls, c.matches...) {
			if !re.MatchString(u) {
				t.Errorf("%s does not match %s", got, u)
			}
		}
		for _, u := range c.not {
			if re.MatchString(u) {
				t.Errorf("%s matches %s", got, u)
			}
		}
	}
}

// TestLocate finds values where pages put them.
func TestLocate(t *testing.T) {
	page := &Page{URL: "http://a.example/p/ada", ContentType: "text/html", Body: []byte(`<html><head>
<meta property="og:title" content="Ada Almeida">
<script type="application/ld+json">{"@type": "ProfilePage", "mainEntity": {"@type": "Person", "address": {"addressLocality": "Lisbon"}}}</script>
<script>window.__S__ = {"u": {"mail": "ada@mail.example"}};</script></head>
<body><p>Write to ada [at] mail [dot] example today</p><a href="/me">Ada Almeida</a><a href="mailto:ADA@mail.example">mail</a><p>Lives in Lisbon.</p></body></html>`)}
	d := parseDoc(page)
	kinds := func(occs []occurrence) string {
		var out []string
		for _, o := range occs {
			s := []string{"element", "textnode", "attr", "ld", "blob", "json", "composite"}[o.kind]
			if o.exact {
				s += "="
			}
			if o.obfuscated {
				s += "~"
			}
			if o.attr != "" {
				s += "@" + o.attr
			}
			if o.path != nil {
				s += " " + jsonPath(o.path)
			}
			out = append(out, s)
		}
		return strings.Join(out, ", ")
	}
	for _, c := range []struct {
		k     kind
		value string
		want  string
	}{
		{kindString, "Ada Almeida", "attr=@content, element="},
		{kindEmail, "ada@mail.example", "element~, attr=@href, blob= $.u.mail"},
		{kindString, "Lisbon", "element, ld= $.mainEntity.address.addressLocality"},
		{kindURL, "http://a.example/me", "attr=@href"},
		{kindString, "Nowhere", ""},
	} {
		if got := kinds(d.locate(c.k, c.value)); got != c.want {
			t.Errorf("locate %q: %s, want %s", c.value, got, c.want)
		}
	}
}

// TestWriteLeavesReviewableFiles: the files are ordinary mappings with
// the evidence in their descriptions, fixtures beside them, and the
// report.
func TestWriteLeavesReviewableFiles(t *testing.T) {
	res, set, _ := learnSite(t, layouts[0].site, 5, all, Options{})
	m := set.Mappings()[0]
	if m.Name != "learned-dl.example" || !strings.Contains(m.Description, "5 teacher page(s) of dl.example") {
		t.Errorf("mapping %s: %q", m.Name, m.Description)
	}
	if len(m.Fixtures()) != fixturesPerMap {
		t.Errorf("%d fixtures", len(m.Fixtures()))
	}
	dir := t.TempDir()
	files, err := res.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, m.Name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"match": true`, `5-fold cross-validation on held-out teachers: precision 1.00 (5 of 5), recall 1.00 (5 of 5)`, `"type": "email"`, `"type": "url"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("mapping file lacks %s:\n%s", want, data)
		}
	}
	if len(files) != 1+fixturesPerMap+2 { // the mapping, its fixtures, the report and the fields asked for
		t.Errorf("wrote %v", files)
	}
	if errs := etl.Check(dir); len(errs) > 0 {
		t.Errorf("mappings check: %v", errs)
	}
}

// TestHostShape: numbered names of one site share a shape; addresses
// and ports never merge.
func TestHostShape(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{"folk-0001.example", "folk-0002.example"},
		{"FOLK-7.example", "folk-0012.example"},
		{"folk-1.example:8080", "folk-2.example:8080"},
	} {
		if hostShape(c.a) != hostShape(c.b) {
			t.Errorf("%s and %s: shapes %s and %s, want one", c.a, c.b, hostShape(c.a), hostShape(c.b))
		}
	}
	for _, c := range []struct{ a, b string }{
		{"127.0.0.1", "127.0.0.2"},
		{"127.0.0.1:8080", "127.0.0.2:8080"},
		{"[::1]:8080", "[::2]:8080"},
		{"folk-1.example:8080", "folk-1.example:8081"},
		{"www.example", "www2.example"},
	} {
		if hostShape(c.a) == hostShape(c.b) {
			t.Errorf("%s and %s: one shape %s, want two", c.a, c.b, hostShape(c.a))
		}
	}
}

// TestLearnKeepsAddressedHostsApart: two sites reached by address, one
// records file, are two groups with their own literal patterns, each
// learning its own layout, never one site of numbered hosts.
func TestLearnKeepsAddressedHostsApart(t *testing.T) {
	sites := []site{
		{host: "127.0.0.1:8001", page: layouts[0].site.page},
		{host: "127.0.0.2:8001", page: layouts[3].site.page},
	}
	all := pageSet{}
	var ts []Teacher
	for _, s := range sites {
		ps, st := s.build(5, func(p person) map[string]string { return map[string]string{"name": p.name, "location": p.location} })
		for u, p := range ps {
			all[u] = p
		}
		for _, tc := range st {
			tc.ID = s.host + "/" + tc.ID
			ts = append(ts, tc)
		}
	}
	res, err := Learn(context.Background(), ts, all, Options{Fields: []string{"location"}, MatchKey: "name"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Groups) != 2 {
		t.Fatalf("%d groups, want one a host", len(res.Groups))
	}
	for i, g := range res.Groups {
		want := `^https?://` + regexp.QuoteMeta(sites[i].host) + `/people/[^/?#]+$`
		if g.Pattern != want || !g.Written("name") {
			t.Errorf("group %s: pattern %s (want %s), written %v", g.Name, g.Pattern, want, g.Written("name"))
		}
	}
}
