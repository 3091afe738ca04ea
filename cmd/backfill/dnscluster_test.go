package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"backfill/proctest"
	"backfill/resolver"
	"backfill/resolver/resolvertest"
	"backfill/store/mongotest"
	"backfill/testweb"
)

// TestClusterSharedNames: supervisors given --store keep their DNS cache
// in it, so a supervisor on another machine (another state directory)
// asks the DNS server nothing a supervisor of the cluster had an answer
// for. Two crawls of the sample through an embedded MongoDB-protocol
// server, each a dispatcher and a supervisor of its own, every host a name
// the loopback DNS server resolves (the web listens on port 80 of its own
// address, so the test needs root and skips without): the second crawl
// sends no query, and neither supervisor makes a dns.db.
func TestClusterSharedNames(t *testing.T) {
	proctest.Short(t, "end-to-end crawls")
	const webIP = "127.54.0.3"
	web, err := testweb.Start(testweb.Options{Addr: webIP + ":80"})
	if err != nil {
		proctest.NotRoot(t, fmt.Sprintf("the fixture web on port 80 of %s: %v", webIP, err))
	}
	t.Cleanup(func() { web.Close() })
	dns, err := resolvertest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dns.Close)
	hosts := 0
	for hp := range web.Resolve() {
		host, _, _ := net.SplitHostPort(hp)
		dns.Add(host, netip.MustParseAddr(webIP))
		hosts++
	}
	srv, err := mongotest.Start(t.TempDir(), mongotest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	dbName := mongotest.DatabaseName(t)
	uri := srv.DatabaseURI(dbName)
	dir := t.TempDir()
	recordsPath, truth := writeSample(t, dir)

	crawl := func(round int) {
		t.Helper()
		n := strconv.Itoa(round)
		disp, endpoint := startDispatcher(t, "--records", recordsPath, "--state-dir", filepath.Join(dir, "state-"+n),
			"--listen", "tcp://127.0.0.1:*", "--store", uri, "--expect", "1")
		supState := filepath.Join(dir, "sup-state-"+n)
		sup := start(t, "supervisor-"+n, "supervisor", "--dispatcher", endpoint, "--store", uri, "--state-dir", supState,
			"--name", "sup-"+n, "--resolver", dns.Addr, "--allow-loopback", "--delay", "0", "--workers", "4",
			"--contact", "https://backfill.invalid/dnscluster", "--exit-when-done")
		if code := disp.waitExit(3 * time.Minute); code != 0 {
			t.Fatalf("round %d: dispatcher exit code %d\n%s", round, code, disp.stderr)
		}
		if code := sup.waitExit(time.Minute); code != 0 {
			t.Fatalf("round %d: supervisor exit code %d\n%s", round, code, sup.stderr)
		}
		if _, err := os.Stat(filepath.Join(supState, resolver.StoreFile)); err == nil {
			t.Errorf("round %d: the supervisor made %s though its store is MongoDB", round, resolver.StoreFile)
		}
		exp := start(t, "export-"+n, "export", "--store", uri, "--format", "jsonl", "--provenance", "--out", "-")
		if code := exp.waitExit(time.Minute); code != 0 {
			t.Fatalf("round %d: export exit code %d\n%s", round, code, exp.stderr)
		}
		checkTruth(t, "round "+n, foundValues(t, &exp.stdout), truth)
	}

	crawl(1)
	first := dns.Queries()
	if first == 0 {
		t.Fatalf("the first crawl sent no DNS query")
	}
	// Every name asked (the hosts the crawl reached) has an address, so
	// every one is in the store.
	names := map[string]bool{}
	for q := range dns.Asked() {
		name, _, _ := strings.Cut(q, "/")
		names[name] = true
	}
	if got := countDocs(t, srv.URI(), dbName, "dns"); got != len(names) || got == 0 {
		t.Errorf("the store's dns collection holds %d names, want the %d asked (%d hosts in the web)", got, len(names), hosts)
	}
	crawl(2)
	if q := dns.Queries() - first; q != 0 {
		t.Errorf("the second crawl's supervisor sent %d DNS queries; every name was in the shared store (asked: %v)", q, dns.Asked())
	}
}

// countDocs counts the documents of a collection.
func countDocs(t *testing.T, uri, db, coll string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(ctx)
	n, err := c.Database(db).Collection(coll).CountDocuments(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}
