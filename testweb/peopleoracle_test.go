package testweb

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestPeopleCrawlDelays: with a range, each host asks its own
// Crawl-delay in it, in steps of 10 ms, the one PeopleHostDelay says;
// without, every host asks CrawlDelay; an empty range is refused.
func TestPeopleCrawlDelays(t *testing.T) {
	w := startPeople(t, PeopleOptions{Hosts: 40, Pages: 2, Records: 10, CrawlDelay: 200 * time.Millisecond, CrawlDelayMax: 500 * time.Millisecond})
	c := newClient(t, w)
	seen := map[time.Duration]bool{}
	for _, h := range w.Hosts() {
		d := PeopleHostDelay(w, h)
		if d < 200*time.Millisecond || d > 500*time.Millisecond || d%(10*time.Millisecond) != 0 {
			t.Errorf("%s: delay %s, want 200ms..500ms in steps of 10ms", h, d)
		}
		seen[d] = true
		want := fmt.Sprintf("User-agent: *\nCrawl-delay: %g\nDisallow: /private/\n", d.Seconds())
		if g := get(t, c, "GET", "http://"+h+"/robots.txt", "", ""); g.body != want {
			t.Errorf("%s robots.txt %q, want %q", h, g.body, want)
		}
	}
	if len(seen) < 10 {
		t.Errorf("40 hosts ask %d distinct delays; want them spread", len(seen))
	}
	if d := PeopleHostDelay(w, "elsewhere.example"); d != 0 {
		t.Errorf("delay of a host not of the web: %s", d)
	}
	one := startPeople(t, PeopleOptions{Hosts: 3, Pages: 2, Records: 2, CrawlDelay: time.Second})
	for _, h := range one.Hosts() {
		if d := PeopleHostDelay(one, h); d != time.Second {
			t.Errorf("%s: delay %s without a range, want 1s", h, d)
		}
	}
	if w, err := StartPeople(PeopleOptions{CrawlDelay: time.Second, CrawlDelayMax: time.Millisecond}); err == nil {
		w.Close()
		t.Error("an empty Crawl-delay range was accepted")
	}
}

// TestPeopleOracle: the oracle's pages are a shortest path from each
// record with a value to find to its profile (the record's link first),
// every one of them a page the web serves and robots.txt allows, and no
// more than a crawler fetches that stops a record when it is complete;
// a robots.txt for each of their hosts; a record with nothing to find
// needs no page.
func TestPeopleOracle(t *testing.T) {
	w := startPeople(t, PeopleOptions{Hosts: 20, Pages: 10, Records: 80})
	crawl := PeopleCrawl{Depth: 2}
	o := PeopleOracleOf(w, crawl)
	truth := PeopleTruth(w, crawl)
	need := map[string]bool{}
	hosts := map[string]bool{}
	for _, p := range o.Pages {
		need[p] = true
		u, err := url.Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		hosts[u.Host] = true
	}
	c := newClient(t, w)
	for p := range need {
		if strings.Contains(p, "/private/") {
			t.Errorf("%s: disallowed, in the oracle's pages", p)
		}
		if g := get(t, c, "GET", p, "", ""); g.status != 200 {
			t.Errorf("%s: status %d, in the oracle's pages", p, g.status)
		}
	}
	if o.Robots != len(hosts) || o.Requests != len(o.Pages)+o.Robots {
		t.Errorf("oracle %d pages on %d hosts, %d robots.txt, %d requests", len(o.Pages), len(hosts), o.Robots, o.Requests)
	}
	least, _ := PeopleLeastPages(w, crawl)
	if len(o.Pages) > least {
		t.Errorf("oracle %d pages, more than the %d a crawl that stops complete records needs", len(o.Pages), least)
	}
	records := 0
	for i := range w.people.records {
		r := &w.people.records[i]
		found := false
		for _, v := range truth[r.id] {
			found = found || v != ""
		}
		profile, _ := PeopleProfileURL(w, r.id)
		path := w.people.shortestPath(r.link, r.person, crawl, nil)
		if found {
			records++
			if !need[r.link] || !need[profile] || len(path) == 0 || path[0] != profile || path[len(path)-1] != r.link || len(path) > crawl.Depth+1 {
				t.Errorf("record %s (%v): path %q; want from its link %s to its profile %s, in the oracle's pages", r.id, r.kind, path, r.link, profile)
			}
			if r.kind == kindHome && len(path) != 2 {
				t.Errorf("record %s (home): path %q, want its homepage and its profile", r.id, path)
			}
		}
	}
	if records != o.Records || records == 0 {
		t.Errorf("%d records with a value to find, the oracle counts %d", records, o.Records)
	}
	if z := PeopleOracleOf(nil, crawl); z.Requests != 0 || z.Pages != nil {
		t.Errorf("oracle of no web: %+v", z)
	}
}
