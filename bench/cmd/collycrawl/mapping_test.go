package main

import (
	"backfill/etl"
	"backfill/testweb"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/antchfx/htmlquery"
)

// The contender must extract what backfill's mapping extracts, or the
// benchmark compares different work.
func TestExtract(t *testing.T) {
	set, err := loadMappings("../../../mappings", "testweb-*.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("testdata/profile.html")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := htmlquery.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url       string
		wantField map[string]string
		wantLinks []string
	}{
		{
			url: "http://people-0001.example/p/0001",
			wantField: map[string]string{
				"testweb-people/name":     "Ada Berger",
				"testweb-people/location": "Lisbon, Portugal",
				"testweb-people/email":    "ada.berger.0001@people-0001.example",
			},
			wantLinks: []string{"/p/0002"},
		},
		{url: "http://people-0001.example/"}, // the index matches no mapping
	}
	for _, tt := range tests {
		fields, links := set.extract(tt.url, doc)
		if !reflect.DeepEqual(fields, tt.wantField) {
			t.Errorf("%s: fields = %v, want %v", tt.url, fields, tt.wantField)
		}
		if !reflect.DeepEqual(links, tt.wantLinks) {
			t.Errorf("%s: links = %v, want %v", tt.url, links, tt.wantLinks)
		}
	}
}

func TestLoadMappingsRefusesUnknownProcessor(t *testing.T) {
	dir := t.TempDir()
	bad := `{"name":"m","url_patterns":[{"type":"regex","pattern":"x"}],"fields":[{"name":"f","processors":[{"type":"jsonpath","parameters":{}}]}]}`
	if err := os.WriteFile(dir+"/m.json", []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadMappings(dir, "*.json"); err == nil {
		t.Fatal("loaded a mapping with a processor the contender cannot run")
	}
}

// On the people web's profiles, in all five layouts, the contender finds
// the same first value of every field as backfill's extraction, so the
// crawl benchmark on that web compares the same work.
func TestExtractPeopleLikeBackfill(t *testing.T) {
	web, err := testweb.StartPeople(testweb.PeopleOptions{Hosts: 10, Pages: 10, Records: 60})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := t.TempDir()
	for name, data := range testweb.PeopleMappings() {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := loadMappings(dir, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	bf, err := etl.Load(testweb.PeopleMappings())
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if to, ok := web.Resolve()[addr]; ok {
			addr = to
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
	layouts := map[string]int{}
	for i := 1; i <= 60; i++ {
		u, layout := testweb.PeopleProfileURL(web, fmt.Sprintf("f%04d", i))
		if u == "" || strings.Contains(u, "/private/") {
			continue
		}
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", u, resp.StatusCode, err)
		}
		layouts[layout]++
		doc, err := htmlquery.Parse(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := set.extract(u, doc)
		want := map[string]string{}
		for _, f := range bf.Extract(u, body, "text/html").Fields {
			if len(f.Values) > 0 && f.Values[0] != "" {
				want[f.Mapping+"/"+f.Field] = f.Values[0]
			}
		}
		if layout != testweb.LayoutJS && len(want) < 3 {
			t.Errorf("%s (%s): backfill found only %v", u, layout, want)
		}
		if len(got)+len(want) > 0 && !reflect.DeepEqual(got, want) {
			t.Errorf("%s (%s): contender %v, backfill %v", u, layout, got, want)
		}
	}
	if len(layouts) < 4 {
		t.Errorf("profiles of %d layouts checked (%v), want all the static ones", len(layouts), layouts)
	}
}
