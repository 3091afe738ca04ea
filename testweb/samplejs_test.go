package testweb

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSampleJSNeedsABrowser checks what SampleJS promises: every value of
// its truth is on the web, in the JSON the profiles' script loads, and none
// is in the HTML a plain fetch gets, where the testweb-app mapping matches
// and finds nothing. The truth itself is what the same reference rules as
// Sample give once the script has written the profile (layout A).
func TestSampleJSNeedsABrowser(t *testing.T) {
	w := startSmall(t, Options{})
	c := newClient(t, w)
	ms := loadFixtureMappings(t)
	body := func(u string) (int, string, []byte) {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatalf("get %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get("Content-Type"), b
	}

	records, truth := SampleJS()
	recs := parseSample(t, records)
	if len(recs) != len(truth) || len(recs) < 3 {
		t.Fatalf("%d records, truth for %d", len(recs), len(truth))
	}
	byName := map[string]person{}
	for _, p := range []person{maya, omar, pia} {
		byName[fold(p.Name)] = p
	}
	for _, r := range recs {
		want := truth[r.id]
		p, ok := byName[fold(r.fields["name"])]
		if !ok {
			t.Errorf("record %s names %q, no app.example person", r.id, r.fields["name"])
			continue
		}
		if len(want) != 2 || want["location"] != p.Location || want["email"] != p.Email {
			t.Errorf("record %s truth %v, want %s's location and email", r.id, want, p.Name)
		}
		if len(r.links) != 1 || !strings.HasPrefix(r.links[0], "http://app.example/") {
			t.Errorf("record %s links %v, want one app.example link", r.id, r.links)
		}
	}

	for slug, p := range map[string]person{"maya": maya, "omar": omar, "pia": pia} {
		u := "http://app.example/u/" + slug
		status, _, html := body(u)
		if status != 200 {
			t.Fatalf("%s: status %d", u, status)
		}
		values, matched := extract(t, ms, u, html)
		if !matched || len(values) != 0 {
			t.Errorf("%s as fetched: mapping matched %v, values %v; want matched with no value", u, matched, values)
		}
		for _, v := range []string{p.Name, p.Location, p.Email} {
			if v != "" && bytes.Contains(html, []byte(v)) {
				t.Errorf("%s as fetched holds %q: a crawl without a browser could find it", u, v)
			}
		}
		// What the script writes, rebuilt as layout A from the data it
		// loads: the mapping finds exactly the person's values there.
		status, ctype, data := body("http://app.example/api/u/" + slug + ".json")
		var d struct{ Name, Location, Email string }
		if err := json.Unmarshal(data, &d); status != 200 || ctype != jsonType || err != nil {
			t.Fatalf("%s data: status %d, type %q, %v", slug, status, ctype, err)
		}
		rendered := peopleProfile(hostApp, person{d.Name, d.Location, d.Email}, "")
		values, _ = extract(t, ms, u, []byte(rendered))
		if values["name"] != p.Name || values["location"] != p.Location || values["email"] != p.Email {
			t.Errorf("%s rendered: values %v, want %+v", u, values, p)
		}
	}

	// The index is plain HTML that links to every profile.
	_, _, index := body("http://app.example/")
	for _, slug := range []string{"maya", "omar", "pia"} {
		if !bytes.Contains(index, []byte(`href="/u/`+slug+`"`)) {
			t.Errorf("app.example index does not link to /u/%s", slug)
		}
	}

	onDisk, err := os.ReadFile(filepath.Join("testdata", "sample-js.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, records) {
		t.Error("SampleJS() differs from testdata/sample-js.csv")
	}
	records[0] = 'X'
	truth["j1"]["location"] = "changed"
	if r2, t2 := SampleJS(); r2[0] == 'X' || t2["j1"]["location"] == "changed" {
		t.Error("SampleJS() returns shared state")
	}
}
