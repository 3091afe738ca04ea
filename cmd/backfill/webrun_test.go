package main

import (
	"testing"
	"time"

	"backfill/testweb"
)

// startWeb starts the small fixture web for a test, its hosts asking for
// a Crawl-delay of delay seconds (0: none).
func startWeb(t *testing.T, delay int) *testweb.Web {
	t.Helper()
	web, err := testweb.Start(testweb.Options{CrawlDelay: delay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { web.Close() })
	return web
}

// crawlArgs are the flags that point a crawl at web's hosts on loopback,
// with a contact URL naming the test.
func crawlArgs(web *testweb.Web, test string) []string {
	args := []string{"--allow-loopback", "--contact", "https://backfill.invalid/" + test}
	for host, addr := range web.Resolve() {
		args = append(args, "--resolve", host+":"+addr)
	}
	return args
}

// exportMatchesTruth exports the state's records and checks them against
// truth (testweb.Sample's) with checkTruth.
func exportMatchesTruth(t *testing.T, what, stateDir string, truth map[string]map[string]string) {
	t.Helper()
	exp := start(t, "export", "export", "--state-dir", stateDir, "--format", "jsonl", "--provenance")
	if code := exp.waitExit(time.Minute); code != 0 {
		t.Fatalf("export exit code %d", code)
	}
	checkTruth(t, what, foundValues(t, &exp.stdout), truth)
}
