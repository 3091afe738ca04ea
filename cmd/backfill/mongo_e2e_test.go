package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"backfill/proctest"
	"backfill/store/mongotest"
	"backfill/testweb"
)

// TestEndToEndMongo runs the crawl of TestEndToEnd with its results and the
// supervisors' robots.txt and last-crawl caches in MongoDB, on an embedded
// MongoDB-protocol server: a dispatcher and two supervisors as separate
// processes, all with --store pointing at the server. The export, read
// back from the same store, must equal the truth, and robots.txt must have
// been fetched once per host across both supervisors.
func TestEndToEndMongo(t *testing.T) {
	proctest.Short(t, "end-to-end crawl")
	srv, err := mongotest.Start(t.TempDir(), mongotest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	dbName := mongotest.DatabaseName(t)
	uri := srv.DatabaseURI(dbName)
	t.Logf("store: mongodb(embedded) at %s", uri)

	const crawlDelay = 1
	web, err := testweb.Start(testweb.Options{CrawlDelay: crawlDelay})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := t.TempDir()
	recordsPath, truth := writeSample(t, dir)
	stateDir := filepath.Join(dir, "state")

	disp, endpoint := startDispatcher(t,
		"--records", recordsPath, "--state-dir", stateDir, "--listen", "tcp://127.0.0.1:*",
		"--lease", "30s", "--store", uri, "--expect", "2")
	supArgs := []string{"supervisor", "--dispatcher", endpoint, "--store", uri,
		"--state-dir", filepath.Join(dir, "sup-state"),
		"--allow-loopback", "--delay", "2s", "--workers", "4", "--contact", "https://backfill.invalid/e2e"}
	for host, addr := range web.Resolve() {
		supArgs = append(supArgs, "--resolve", host+":"+addr)
	}
	sups := []*process{
		start(t, "supervisor-1", append(supArgs, "--name", "sup-1")...),
		start(t, "supervisor-2", append(supArgs, "--name", "sup-2")...),
	}
	if code := disp.waitExit(3 * time.Minute); code != 0 {
		t.Fatalf("dispatcher exit code %d\n%s", code, disp.stderr)
	}
	for _, s := range sups {
		s.cmd.Process.Signal(syscall.SIGTERM)
		if code := s.waitExit(30 * time.Second); code != 0 {
			t.Errorf("%s exit code %d after SIGTERM, want 0", s.name, code)
		}
	}
	if _, ok := disp.stderr.wait(regexp.MustCompile(`store writes done`), time.Now()); !ok {
		t.Errorf("the dispatcher did not report its store writes done:\n%s", disp.stderr)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "results.db")); err == nil {
		t.Errorf("a SQLite results store was created though --store names MongoDB")
	}

	// The export streams JSON Lines from MongoDB to standard output.
	exp := start(t, "export", "export", "--store", uri, "--format", "jsonl", "--provenance", "--out", "-")
	if code := exp.waitExit(time.Minute); code != 0 {
		t.Fatalf("export exit code %d\n%s", code, exp.stderr)
	}
	got := foundValues(t, bytes.NewReader(exp.stdout.Bytes()))
	if len(got) != len(truth) {
		t.Errorf("export has %d records, truth has %d", len(got), len(truth))
	}
	for id, fields := range truth {
		for f, want := range fields {
			if g := got[id][f]; g != want {
				t.Errorf("record %s field %s = %q, want %q", id, f, g, want)
			}
		}
		for f := range got[id] {
			if _, known := fields[f]; !known {
				t.Errorf("record %s: field %s filled with %q but it is not a target", id, f, got[id][f])
			}
		}
	}

	// The caches went through MongoDB: robots.txt was fetched once per
	// host across both supervisors, and every host crawled has its
	// robots.txt and a last-crawl time in the store.
	log := web.Log()
	robotsFetches := map[string]int{}
	hosts := map[string]bool{}
	for _, r := range log {
		hosts[r.Host] = true
		if strings.HasPrefix(r.Path, "/robots.txt") {
			robotsFetches[r.Host]++
		}
	}
	for h := range hosts {
		if n := robotsFetches[h]; n != 1 {
			t.Errorf("robots.txt of %s fetched %d times, want once", h, n)
		}
	}
	robots, lastCrawl := mongoHosts(t, srv.URI(), dbName)
	if len(robots) != len(hosts) || len(lastCrawl) != len(hosts) {
		t.Errorf("MongoDB holds robots.txt of %d hosts and last-crawl times of %d; %d hosts were crawled",
			len(robots), len(lastCrawl), len(hosts))
	}
	checkPoliteness(t, log, crawlDelay*time.Second)
}

// mongoHosts reads the hosts of the robots and last_crawl collections.
func mongoHosts(t *testing.T, uri, db string) (robots, lastCrawl map[string]bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(ctx)
	read := func(coll, key string) map[string]bool {
		cur, err := c.Database(db).Collection(coll).Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.M
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, d := range docs {
			if h, ok := d[key].(string); ok {
				out[h] = true
			}
		}
		return out
	}
	return read("robots", "_id"), read("last_crawl", "host")
}
