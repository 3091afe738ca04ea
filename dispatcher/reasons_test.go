package dispatcher

import (
	"strings"
	"testing"
	"time"

	"backfill/etl"
	"backfill/wire"
)

// TestReasonsPointAtTheCause: a record whose own page is someone else's
// profile, linking to the record's own one level past the depth limit,
// is left incomplete for depth-limit (naming the link and the depth that
// reaches it), not for the neighbour's page it refused; a record whose
// only link is too long is link-too-long, not no-links; and each reason
// stays where it is the cause (a page linking only to what no mapping
// matches is no-mapping). The summary counts them, and the store keeps
// each outcome for export and the report.
func TestReasonsPointAtTheCause(t *testing.T) {
	const (
		zedAbout  = "https://z.example/about"
		teamPage  = "https://t.example/team"
		teamStaff = "https://t.example/contact"
	)
	long := "https://l.example/" + strings.Repeat("a", etl.MaxURLLength)
	web := map[string]page{
		zedProf:  {fields: []wire.Field{fld("name", "Zed Null"), fld("email", "zed@z.example")}, links: []string{zedAbout, annProf}},
		annProf:  {fields: []wire.Field{fld("name", "Ann Lee"), fld("email", "ann@a.example")}},
		teamPage: {links: []string{teamStaff}},
	}
	e := newEnv(t, t.TempDir(), func(c *Config) {
		c.Depth = -1 // the records' own links only
		c.Fields = []string{"email"}
	})
	e.load("r.csv", csvOf("id,name,email,link",
		"r1,Ann Lee,,"+zedProf,
		"r2,Bo Kim,,"+teamPage,
		"r3,Cy Roe,,"+long))
	sups := e.runWithTwo()
	st := crawl(t, e, sups, web, 20*time.Second)
	if e.err != nil {
		t.Fatalf("Run: %v", e.err)
	}
	if st.requests[annProf] != 0 {
		t.Errorf("%s (depth 1, limit 0) requested", annProf)
	}
	want := map[string]string{"r1": ReasonDepthLimit, "r2": ReasonNoMapping, "r3": ReasonLinkTooLong}
	for id, reason := range want {
		if c := e.sum.Reasons[reason]; len(c.IDs) != 1 || c.IDs[0] != id {
			t.Errorf("summary %s: %+v, want %s alone", reason, c, id)
		}
	}
	recs := e.records()
	for id, reason := range want {
		o := recs[id].Outcome
		if o == nil || o.Reason != reason {
			t.Errorf("%s: outcome %+v, want %s", id, o, reason)
		}
	}
	if o := recs["r1"].Outcome; o != nil {
		if o.Link != annProf || o.Depth != 1 || !strings.Contains(o.Detail, "--depth 1 would") || o.Page != zedProf || o.Key != "name" {
			t.Errorf("r1: outcome %+v: want the unfollowed %s at depth 1, and the refused %s", *o, annProf, zedProf)
		}
	}
	if o := recs["r3"].Outcome; o != nil {
		if !strings.HasPrefix(o.Link, "https://l.example/aaa") || !strings.Contains(o.Detail, "2066 bytes") {
			t.Errorf("r3: outcome %+v: want the long link's start and its length", *o)
		}
	}
}
