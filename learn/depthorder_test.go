package learn

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// countingSource is a pageSet that counts what is fetched of it.
type countingSource struct {
	pageSet
	mu      sync.Mutex
	fetched map[string]int
}

func (c *countingSource) Fetch(ctx context.Context, rawURL string) (*Page, error) {
	c.mu.Lock()
	c.fetched[rawURL]++
	c.mu.Unlock()
	return c.pageSet.Fetch(ctx, rawURL)
}

// TestDepthSearchBestFirst: each teacher's hub links to its own profile,
// named in its address, and to a team page and two colleagues' profiles
// that are not. Links that name a teacher are fetched first; a teacher
// whose profile shows all it knows is followed no further, so the other
// links of its hub are never fetched, and what it learns is the same.
func TestDepthSearchBestFirst(t *testing.T) {
	const n = 8
	ps := pageSet{}
	var ts []Teacher
	slug := func(i int) string { return fmt.Sprintf("%s-%d", people[i%len(people)].name, i) }
	for i := range n {
		p := people[i%len(people)]
		name := fmt.Sprintf("%s %d", p.name, i)
		prof := "http://people.example/p/" + slugOf(slug(i))
		other := "http://people.example/p/" + slugOf(slug((i+1)%n))
		team := fmt.Sprintf("http://people.example/team/%d", i)
		hub := fmt.Sprintf("http://hub.example/t/%d", i)
		ps[hub] = &Page{URL: hub, ContentType: "text/html", Body: []byte(pageHTML(fmt.Sprintf(
			`<a href="%s">our team</a><a href="%s">a colleague</a><a href="%s">me</a>`, team, other, prof)))}
		ps[team] = &Page{URL: team, ContentType: "text/html", Body: []byte(pageHTML(`<p>The team.</p>`))}
		ps[prof] = &Page{URL: prof, ContentType: "text/html", Body: []byte(pageHTML(fmt.Sprintf(
			`<h1 class="name">%s</h1><dl><dt>City</dt><dd>%s</dd><dt>Email</dt><dd>%s</dd></dl>`, name, p.location, p.email)))}
		ts = append(ts, Teacher{ID: fmt.Sprint("t", i), Links: []string{hub},
			Values: map[string]string{"name": name, "city": p.location, "email": p.email}})
	}
	src := &countingSource{pageSet: ps, fetched: map[string]int{}}
	res, err := Learn(context.Background(), ts, src, Options{Fields: []string{"city", "email"}, MatchKey: "name", Depth: 1, MinTeachers: 2})
	if err != nil {
		t.Fatal(err)
	}
	for u, k := range src.fetched {
		if k > 1 {
			t.Errorf("%s fetched %d times", u, k)
		}
		if _, ok := ps[u]; !ok {
			t.Errorf("%s fetched: not a page", u)
		}
	}
	for i := range n {
		if team := fmt.Sprintf("http://people.example/team/%d", i); src.fetched[team] > 0 {
			t.Errorf("%s fetched: teacher %d's own profile, named by its link, showed all it knows first", team, i)
		}
	}
	if got, want := len(src.fetched), 2*n; got != want {
		t.Errorf("%d pages fetched, want %d (each teacher's hub and profile): %v", got, want, src.fetched)
	}
	if len(res.Groups) != 1 || len(res.Untaught) > 0 {
		t.Fatalf("%d groups, untaught %+v", len(res.Groups), res.Untaught)
	}
	for _, f := range res.Groups[0].Fields {
		if f.Status != Learned || f.Field != "name" && f.Teachers != n {
			t.Errorf("%s: %s from %d teachers (%s)", f.Field, f.Status, f.Teachers, f.Reason)
		}
	}
}

// slugOf writes a name as an address does: lower case, words joined by
// hyphens.
func slugOf(name string) string {
	out := []byte{}
	for _, c := range []byte(name) {
		switch {
		case c >= 'A' && c <= 'Z':
			out = append(out, c+'a'-'A')
		case c == ' ':
			out = append(out, '-')
		default:
			out = append(out, c)
		}
	}
	return string(out)
}
