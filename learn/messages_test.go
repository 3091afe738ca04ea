package learn

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLearnWithholdsKeylessMapping: a group whose match key could not be
// learned writes no mapping (its values would go to any record reaching
// the page) and the report says why and what to do; asked for no key
// (MatchKey ""), the same fields are written.
func TestLearnWithholdsKeylessMapping(t *testing.T) {
	s := site{host: "keyless.example", page: func(p person, i int) string {
		return pageHTML(fmt.Sprintf(`<p class="city">%s</p>`, p.location)) // the name is nowhere
	}}
	for _, c := range []struct {
		key     string
		written bool
		report  string
	}{
		{"name", false, "no mapping written: its match key name was not learned (never found)"},
		{"", true, "→ learned-keyless.example.json"},
	} {
		ps, ts := s.build(5, all)
		res, err := Learn(context.Background(), ts, ps, Options{Fields: []string{"location"}, MatchKey: c.key})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if _, err := res.Write(dir); err != nil {
			t.Fatal(err)
		}
		_, err = os.Stat(filepath.Join(dir, "learned-keyless.example.json"))
		if written := err == nil; written != c.written || res.Mappings() != map[bool]int{true: 1}[c.written] {
			t.Errorf("match key %q: mapping written %v (%d), want %v", c.key, written, res.Mappings(), c.written)
		}
		var report strings.Builder
		res.Report(&report)
		if !strings.Contains(report.String(), c.report) || c.key != "" && !strings.Contains(report.String(), `--match ""`) {
			t.Errorf("match key %q: report lacks %q:\n%s", c.key, c.report, report.String())
		}
	}
}

// TestLearnSaysWhatPagesPerHostLeftOut: pages over the bound are named
// in the report, with what to do.
func TestLearnSaysWhatPagesPerHostLeftOut(t *testing.T) {
	ps, ts := layouts[0].site.build(6, all)
	res, err := Learn(context.Background(), ts, ps, Options{Fields: []string{"location"}, MatchKey: "name", PagesPerHost: 4})
	if err != nil {
		t.Fatal(err)
	}
	var report strings.Builder
	res.Report(&report)
	if want := "2 page(s) not fetched, over 4 a host (--pages-per-host): dl.example (2); raise it to learn from them"; !strings.Contains(report.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, report.String())
	}
}
