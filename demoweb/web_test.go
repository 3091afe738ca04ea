package demoweb

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"backfill/testweb"
)

var update = flag.Bool("update", false, "write snapshot.json anew from testweb's small web")

// TestSnapshot holds the snapshot to testweb: the same hosts, and for
// every page, robots.txt (at several Crawl-delays), a directory named
// without its slash, a path no host has and a host the web does not
// know, the same status, headers and body from both; the same sample
// records and truth. With -update it first writes the snapshot from
// testweb.
func TestSnapshot(t *testing.T) {
	if *update {
		robots, pages, notFound, moved := testweb.SmallSite(snapshotDelay)
		records, truth := testweb.Sample()
		b, err := json.MarshalIndent(snapshot{Robots: robots, Pages: pages, NotFound: notFound, Moved: moved,
			Placeholder: testweb.SitePlaceholder, Records: string(records), Truth: truth}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("snapshot.json", append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		snapshotJSON = append(b, '\n')
	}
	records, truth := Sample()
	wantRecords, wantTruth := testweb.Sample()
	if string(records) != string(wantRecords) || !reflect.DeepEqual(truth, wantTruth) {
		t.Errorf("the sample records or truth differ from testweb's (go test ./demoweb -update)")
	}
	_, pages, _, _ := testweb.SmallSite(snapshotDelay)
	var urls []string // host and path
	for host, ps := range pages {
		urls = append(urls, host+"/robots.txt", host+"/no/such/page", host+"/private/")
		for p := range ps {
			urls = append(urls, host+p)
			if len(p) > 1 && strings.HasSuffix(p, "/") {
				urls = append(urls, host+strings.TrimSuffix(p, "/"))
			}
		}
	}
	urls = append(urls, "nowhere.example/")
	sort.Strings(urls)
	for _, delay := range []int{0, testweb.DefaultCrawlDelay, 3} {
		t.Run(fmt.Sprintf("crawl-delay %d", delay), func(t *testing.T) {
			tw, err := testweb.Start(testweb.Options{CrawlDelay: delay})
			if err != nil {
				t.Fatal(err)
			}
			defer tw.Close()
			dw, err := Start(delay)
			if err != nil {
				t.Fatal(err)
			}
			defer dw.Close()
			if !reflect.DeepEqual(dw.Hosts(), tw.Hosts()) {
				t.Fatalf("hosts %v, testweb's %v", dw.Hosts(), tw.Hosts())
			}
			for _, u := range urls {
				want, got := get(t, tw.Addr(), u), get(t, dw.Addr(), u)
				if got != want {
					t.Errorf("%s differs from testweb's (go test ./demoweb -update):\n got: %.300s\nwant: %.300s", u, got, want)
				}
			}
		})
	}
}

// get asks addr for u ("host/path") and returns the answer as text:
// status, the headers a crawler reads, body.
func get(t *testing.T, addr, u string) string {
	t.Helper()
	host, path, _ := strings.Cut(u, "/")
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	return fmt.Sprintf("%d %s|%s|%s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Location"), resp.Header.Get("Content-Length"), body)
}
