package dispatcher

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"backfill/etl"
	"backfill/store"
	"backfill/wire"
)

// remapSet is a mapping set of one mapping whose url_pattern is pattern.
func remapSet(t *testing.T, pattern string) *etl.Set {
	t.Helper()
	set, err := etl.Load(map[string][]byte{"people.json": []byte(`{
  "name": "people",
  "url_patterns": [{"type": "regex", "pattern": "` + pattern + `"}],
  "fields": [
    {"name": "name", "match": true, "processors": [{"type": "xpath", "parameters": {"expression": "//h1/text()"}}]},
    {"name": "email", "processors": [{"type": "xpath", "parameters": {"expression": "//span[@class='email']/text()"}}]}
  ]
}`)})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestRemap: a rerun whose mappings changed extracts the kept pages anew
// before anything is fetched (ann's page fills her email with no task
// sent for it), queues again a page fetched before and not kept (bob's:
// kept damaged),
// for the incomplete record that wants it, and counts both; a page the
// crawl never fetched is left alone; a rerun with the same mappings does
// nothing of the kind.
func TestRemap(t *testing.T) {
	dir := t.TempDir()
	records := csvOf("id,name,email,site",
		"ann,Ann Lee,,http://a.test/ann",
		"bob,Bob Roe,,http://b.test/bob",
		"cy,Cy Doe,,http://c.test/cy")
	const (
		annPage = `<html><body><h1>Ann Lee</h1><span class="email">ann@a.test</span></body></html>`
		cyPage  = `<html><body><h1>Cy Doe</h1><p>no address here</p></body></html>`
	)
	// What the supervisor answers: the first mappings match nothing.
	bare := map[string]page{"http://a.test/ann": {}, "http://b.test/bob": {}, "http://c.test/cy": {}}
	runOnce := func(set *etl.Set, web map[string]page) (*env, crawlStats) {
		t.Helper()
		e := newEnv(t, dir, func(c *Config) { c.Mappings = set })
		e.set = set
		e.load("r.csv", records)
		sups := e.runWithTwo()
		st := crawl(t, e, sups, web, 30*time.Second)
		<-e.done
		if e.err != nil {
			t.Fatalf("Run: %v", e.err)
		}
		return e, st
	}

	first, _ := runOnce(remapSet(t, `^http://[a-z]\\.test/nobody`), bare)
	if first.sum.Complete != 0 || first.sum.Remap.Changed {
		t.Fatalf("first run: %d complete, remap %+v", first.sum.Complete, first.sum.Remap)
	}
	// The supervisors kept ann's and cy's pages, not bob's.
	ctx := context.Background()
	if _, err := first.st.PutPages(ctx, []store.Page{
		{Key: "http://a.test/ann", Status: 200, ContentType: "text/html", Body: []byte(annPage), FetchedAt: time.Now()},
		{Key: "http://c.test/cy", Status: 200, ContentType: "text/html", Body: []byte(cyPage), FetchedAt: time.Now()},
		{Key: "http://d.test/never-crawled", Status: 200, ContentType: "text/html", Body: []byte(annPage), FetchedAt: time.Now()},
		{Key: "http://b.test/bob", Status: 200, ContentType: "text/html", Body: []byte("<h1>Bob Roe</h1>"), FetchedAt: time.Now()},
	}); err != nil {
		t.Fatal(err)
	}
	first.close()
	// Bob's page was kept damaged: as good as not kept.
	db, err := sql.Open("sqlite", filepath.Join(dir, "out.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE pages SET body = x'00' WHERE key = 'http://b.test/bob'`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	fixed := remapSet(t, `^http://[a-z]\\.test/`)
	web := map[string]page{"http://b.test/bob": {fields: []wire.Field{fld("name", "Bob Roe"), fld("email", "bob@b.test")}}}
	second, st := runOnce(fixed, web)
	var asked []string
	for _, task := range st.tasks {
		asked = append(asked, task.URL)
	}
	if fmt.Sprint(asked) != "[http://b.test/bob]" {
		t.Errorf("the rerun sent tasks for %v; want bob's page alone (ann's and cy's are kept)", asked)
	}
	want := Remap{Changed: true, Reextracted: 2, Applied: 2, Refetched: 1}
	if second.sum.Remap != want {
		t.Errorf("Remap = %+v, want %+v", second.sum.Remap, want)
	}
	recs := second.records()
	if v := recs["ann"].Found["email"]; v.Value != "ann@a.test" || v.Source != "http://a.test/ann" || v.Mapping != "people" {
		t.Errorf("ann's email: %+v", v)
	}
	if v := recs["bob"].Found["email"]; v.Value != "bob@b.test" {
		t.Errorf("bob's email: %+v", v)
	}
	if _, ok := recs["cy"].Found["email"]; ok {
		t.Errorf("cy has an email: %+v", recs["cy"].Found)
	}
	second.close()

	// Nothing to do: Run ends before any supervisor joins.
	third := newEnv(t, dir, func(c *Config) { c.Mappings = fixed })
	third.load("r.csv", records)
	third.run(ctx)
	<-third.done
	if third.err != nil || third.sum.Remap != (Remap{}) || third.sum.Pages != 0 {
		t.Errorf("a rerun with the same mappings: %v, %d pages, remap %+v", third.err, third.sum.Pages, third.sum.Remap)
	}
}

func TestDigestKey(t *testing.T) {
	set := remapSet(t, "^x")
	if k := digestKey(set.Digest()); k == 0 || k != digestKey(set.Digest()) || k == digestKey(remapSet(t, "^y").Digest()) {
		t.Errorf("digestKey: %d", k)
	}
	for _, bad := range []string{"", "abc", "zzzzzzzzzzzzzzzzzz"} {
		if digestKey(bad) != 0 {
			t.Errorf("digestKey(%q) != 0", bad)
		}
	}
}
