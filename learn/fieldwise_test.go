package learn

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// hubSite serves a profile per person one link from the teacher's own
// link (a hub page naming no one), the profile written by page; the
// records' values come from values.
func hubSite(n int, page func(i int) string, values func(i int) map[string]string) (pageSet, []Teacher) {
	ps := pageSet{}
	var ts []Teacher
	for i := 0; i < n; i++ {
		hub := fmt.Sprintf("http://hub.example/t/%d", i)
		prof := fmt.Sprintf("http://people.example/p/%d", i)
		ps[hub] = &Page{URL: hub, ContentType: "text/html", Body: []byte(pageHTML(fmt.Sprintf(`<p>A hub.</p><a href="%s">more</a>`, prof)))}
		ps[prof] = &Page{URL: prof, ContentType: "text/html", Body: []byte(page(i))}
		ts = append(ts, Teacher{ID: fmt.Sprint("t", i), Values: values(i), Links: []string{hub}})
	}
	return ps, ts
}

func profilePage(i int) string {
	p := people[i%len(people)]
	return pageHTML(fmt.Sprintf(`<h1 class="name">%s %d</h1><dl><dt>City</dt><dd>%s</dd><dt>Email</dt><dd>%s</dd><dt>Phone</dt><dd>0161 496 %04d</dd></dl>`,
		p.name, i, p.location, p.email, i))
}

// TestLearnFieldByField: a page is its teacher's for the fields it shows.
// The records write their phone numbers in another form than the pages
// (+44 for the 0). Asked for city, email and phone, the two the pages
// show are learned and the phone is reported never found. Asked for
// city and phone, most pages show one value of two: they are taken as
// their teachers' because the match key learned from the three pages that
// show both (their records write the phone as the pages do) reads the
// teacher's name on them; the city is learned from all eight, and the
// phone is reported as the records disagreeing with their pages.
func TestLearnFieldByField(t *testing.T) {
	values := func(i int) map[string]string {
		p := people[i%len(people)]
		v := map[string]string{"name": fmt.Sprintf("%s %d", p.name, i), "city": p.location, "email": p.email, "phone": fmt.Sprintf("+44 161 496 %04d", i)}
		if i < 3 {
			v["phone"] = fmt.Sprintf("0161 496 %04d", i)
		}
		return v
	}
	for _, c := range []struct {
		fields []string
		want   map[string]Status
	}{
		{[]string{"city", "email", "phone"}, map[string]Status{"name": Learned, "city": Learned, "email": Learned, "phone": Contradicted}},
		{[]string{"city", "phone"}, map[string]Status{"name": Learned, "city": Learned, "phone": Contradicted}},
	} {
		ps, ts := hubSite(8, profilePage, values)
		res, err := Learn(context.Background(), ts, ps, Options{Fields: c.fields, MatchKey: "name", Depth: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Groups) != 1 {
			t.Fatalf("fields %v: %d groups", c.fields, len(res.Groups))
		}
		for _, f := range res.Groups[0].Fields {
			if f.Status != c.want[f.Field] || f.Field == "city" && f.Teachers != 8 {
				t.Errorf("fields %v: %s %s from %d pages (%s), want %s", c.fields, f.Field, f.Status, f.Teachers, f.Reason, c.want[f.Field])
			}
		}
		if len(res.Untaught) > 0 || len(res.Groups[0].Pages) != 8 {
			t.Errorf("fields %v: %d teacher pages, untaught %+v", c.fields, len(res.Groups[0].Pages), res.Untaught)
		}
	}
}

// TestLearnSaysWhyTeachersTaughtNothing: a teacher whose own page no
// link reaches and whose name a colleague's page shows (with one value
// that happens to be its own) is not taught from that page: the learned
// key reads the colleague's name there. The report says, per teacher,
// which page showed which of its values; a deeper --depth is advised
// only for the teacher no page named.
func TestLearnSaysWhyTeachersTaughtNothing(t *testing.T) {
	page := func(i int) string {
		p := people[i%len(people)]
		seeAlso := ""
		if i == 6 {
			// The profile of 6 names 7 under "See also"; 7's own
			// profile is not linked from its hub.
			seeAlso = fmt.Sprintf(`<h2>See also</h2><p>%s 7</p>`, people[7].name)
		}
		return pageHTML(fmt.Sprintf(`<h1 class="name">%s %d</h1><dl><dt>City</dt><dd>%s</dd><dt>Email</dt><dd>%s</dd></dl>%s`, p.name, i, p.location, p.email, seeAlso))
	}
	ps, ts := hubSite(9, page, func(i int) map[string]string {
		p := people[i%len(people)]
		v := map[string]string{"name": fmt.Sprintf("%s %d", p.name, i), "city": p.location, "email": p.email}
		if i == 7 {
			v["city"] = people[6].location // the colleague's city, by chance
		}
		return v
	})
	ps["http://hub.example/t/7"].Body = []byte(pageHTML(`<a href="http://people.example/p/6">a colleague</a>`))
	ps["http://hub.example/t/8"].Body = []byte(pageHTML(`<p>Nothing here.</p>`))
	res, err := Learn(context.Background(), ts, ps, Options{Fields: []string{"city", "email"}, MatchKey: "name", Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	var report strings.Builder
	res.Report(&report)
	t.Log(report.String())
	for _, want := range []string{
		"2 teacher(s) taught nothing:",
		`t7: http://people.example/p/6 names it and shows its city, not its email: the learned match key name reads "` + people[6].name + ` 6" there, another's page`,
		"t8: no page within 1 link(s) of its own links names it",
		"no page within 1 link(s) of their own links named 1 of them; a deeper --depth may reach their pages",
	} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, f := range res.Groups[0].Fields {
		if f.Status != Learned || f.Teachers != 7 {
			t.Errorf("%s: %s from %d teacher pages (%s), want learned from the 7 teachers' own", f.Field, f.Status, f.Teachers, f.Reason)
		}
	}
}
