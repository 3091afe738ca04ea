package dispatcher

import (
	"testing"
	"time"

	"backfill/wire"
)

// A small web of profiles for the two tests below.
const (
	zedProf   = "https://z.example/people/zed"   // Zed's profile, linking to Ann's
	annProf   = "https://a.example/people/ann"   // Ann's profile
	farProf   = "https://f.example/people/far"   // linked from Ann's: past the depth limit
	teamPage  = "https://t.example/team"         // links to Pat's profile
	patHome   = "https://h.example/~pat/"        // Pat's homepage
	patNotes  = "https://h.example/~pat/notes"   // linked from it
	quinnProf = "https://q.example/people/quinn" // Quinn's profile, linking to Pat's
	patProf   = "https://p.example/people/pat"   // Pat's profile
)

// TestDisagreeingPageLinksFollowed: a record whose own link is someone
// else's profile gets no value from it, but the profile's links are
// followed, within the depth limit, and lead to the record's own profile.
func TestDisagreeingPageLinksFollowed(t *testing.T) {
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Fields = []string{"email", "title"}
	})
	web := map[string]page{
		zedProf: {fields: []wire.Field{fld("name", "Zed Null"), fld("email", "zed@z.example"), fld("title", "Decoy")}, links: []string{annProf}},
		annProf: {fields: []wire.Field{fld("name", "Ann Lee"), fld("email", "ann@a.example")}, links: []string{farProf}},
		farProf: {fields: []wire.Field{fld("name", "Ann Lee"), fld("title", "Too far")}},
	}
	e.load("r.csv", csvOf("id,name,email,title,link", "r1,Ann Lee,,,"+zedProf))
	sups := e.runWithTwo()
	st := crawl(t, e, sups, web, 20*time.Second)
	if e.err != nil {
		t.Fatalf("Run: %v", e.err)
	}
	found := e.records()["r1"].Found
	if v := found["email"]; v.Value != "ann@a.example" || v.Source != annProf || v.Depth != 1 || len(v.Conflicts) != 0 {
		t.Errorf("r1.email = %+v, want ann@a.example from %s at depth 1, no conflict from the decoy", v, annProf)
	}
	if v, ok := found["title"]; ok {
		t.Errorf("r1.title = %+v: the decoy's value, or a page past the depth limit", v)
	}
	if st.requests[farProf] != 0 {
		t.Errorf("%s (depth 2, limit 1) requested", farProf)
	}
	if st.requests[zedProf] != 1 || st.requests[annProf] != 1 {
		t.Errorf("requests %v", st.requests)
	}
	if e.sum.Disagreeing != 1 {
		t.Errorf("summary disagreeing %d, want 1", e.sum.Disagreeing)
	}
}

// TestLateAttribution: Pat's profile is fetched first on behalf of another
// record only (the team page links to it), which gets nothing from it;
// Pat's own record reaches it later, through Quinn's profile, and gets
// its values from the cached extraction without a second fetch.
func TestLateAttribution(t *testing.T) {
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Depth = 3
		c.Fields = []string{"email"}
	})
	web := map[string]page{
		teamPage:  {links: []string{patProf}},
		patHome:   {links: []string{patNotes}},
		patNotes:  {links: []string{quinnProf}},
		quinnProf: {fields: []wire.Field{fld("name", "Quinn Ash"), fld("email", "quinn@q.example")}, links: []string{patProf}},
		patProf:   {fields: []wire.Field{fld("name", "Pat Doe"), fld("email", "pat@p.example")}},
	}
	e.load("r.csv", csvOf("id,name,email,link",
		"rx,Xena Vale,,"+teamPage,
		"ry,Pat Doe,,"+patHome))
	sups := e.runWithTwo()
	st := crawl(t, e, sups, web, 20*time.Second)
	if e.err != nil {
		t.Fatalf("Run: %v", e.err)
	}
	// Pat's profile went out before Quinn's: it was fetched for rx alone.
	at := map[string]int{}
	for i, task := range st.tasks {
		if _, ok := at[task.URL]; !ok {
			at[task.URL] = i
		}
	}
	if at[patProf] > at[quinnProf] || st.requests[patProf] != 1 {
		t.Fatalf("tasks %v: want %s sent once, before %s", st.tasks, patProf, quinnProf)
	}
	recs := e.records()
	if v := recs["ry"].Found["email"]; v.Value != "pat@p.example" || v.Source != patProf || v.Depth != 3 {
		t.Errorf("ry.email = %+v, want pat@p.example from %s at depth 3", v, patProf)
	}
	if v, ok := recs["rx"].Found["email"]; ok {
		t.Errorf("rx.email = %+v: someone else's", v)
	}
	if e.sum.Reused == 0 || e.sum.Pages != int64(len(web)) {
		t.Errorf("summary reused %d, pages %d; want the cached extraction applied, %d pages", e.sum.Reused, e.sum.Pages, len(web))
	}
}
