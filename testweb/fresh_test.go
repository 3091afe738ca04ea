package testweb

import (
	"io"
	"net/http"
	"testing"
	"time"
)

func TestFreshConditional(t *testing.T) {
	f, err := StartFresh(2)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mod := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	f.Put("a.example", "/e", FreshPage{Body: "<p>e</p>", ETag: true})
	f.Put("a.example", "/m", FreshPage{Body: "<p>m</p>", LastModified: mod})
	etag := ETagOf("<p>e</p>")
	lm := mod.Format(http.TimeFormat)
	cases := []struct {
		path, inm, ims string
		status         int
		body           string
	}{
		{"/robots.txt", "", "", 200, "User-agent: *\nAllow: /\nCrawl-delay: 2\n"},
		{"/e", "", "", 200, "<p>e</p>"},
		{"/e", etag, "", 304, ""},
		{"/e", "W/" + etag, "", 304, ""},
		{"/e", `"other", ` + etag, "", 304, ""},
		{"/e", `"other"`, lm, 200, "<p>e</p>"},
		{"/m", "", lm, 304, ""},
		{"/m", "", mod.Add(-time.Second).Format(http.TimeFormat), 200, "<p>m</p>"},
		{"/m", `"x"`, lm, 200, "<p>m</p>"},
		{"/nope", "", "", 404, "not found\n"},
	}
	for _, c := range cases {
		req, _ := http.NewRequest("GET", "http://"+f.Addr()+c.path, nil)
		req.Host = "a.example"
		if c.inm != "" {
			req.Header.Set("If-None-Match", c.inm)
		}
		if c.ims != "" {
			req.Header.Set("If-Modified-Since", c.ims)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || string(b) != c.body {
			t.Errorf("%s (%q, %q): %d %q, want %d %q", c.path, c.inm, c.ims, resp.StatusCode, b, c.status, c.body)
		}
	}
	log := f.Log()
	if len(log) != len(cases) || log[2].IfNoneMatch != etag || log[2].Status != 304 || log[6].IfModifiedSince != lm {
		t.Errorf("log %+v", log)
	}
	// A page changed: the old ETag no longer holds.
	f.Put("a.example", "/e", FreshPage{Body: "<p>e2</p>", ETag: true})
	req, _ := http.NewRequest("GET", "http://"+f.Addr()+"/e", nil)
	req.Host = "a.example"
	req.Header.Set("If-None-Match", etag)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("ETag") != ETagOf("<p>e2</p>") {
		t.Errorf("changed page: %d %q", resp.StatusCode, resp.Header.Get("ETag"))
	}
	http.DefaultClient.CloseIdleConnections()
}
