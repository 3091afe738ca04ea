package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backfill/proctest"
	"backfill/resolver/resolvertest"
	"backfill/testweb"
	"backfill/wire"
)

// TestRunResolver: `run --resolver` finds every host of the fixture web
// through a DNS server on loopback (each host a name whose A record is the
// web's loopback address; the web listens on port 80, so the test needs
// root and skips without), fills what the pinned crawls of the other tests
// fill, and its summary says what DNS did. The names' answers are in the
// state directory's cache afterwards.
func TestRunResolver(t *testing.T) {
	proctest.Short(t, "crawls the fixture web")
	const webIP = "127.54.0.1"
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
	dir := t.TempDir()
	records, truth := writeSample(t, dir)
	stateDir := filepath.Join(dir, "state")
	sumPath := filepath.Join(dir, "summary.json")
	args := []string{"run", "--records", records, "--state-dir", stateDir, "--delay", "0", "--workers", "4",
		"--summary", sumPath, "--allow-loopback", "--contact", "https://backfill.invalid/dnsrun", "--resolver", dns.Addr}
	var stdout, stderr bytes.Buffer
	if code := mainExit(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("run exit %d:\n%s", code, stderr.String())
	}
	exportMatchesTruth(t, "run --resolver", stateDir, truth)

	b, err := os.ReadFile(sumPath)
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		DNS *wire.DNSStats `json:"dns"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.DNS == nil || sum.DNS.Lookups == 0 || sum.DNS.Queries == 0 {
		t.Fatalf("summary's dns: %+v", sum.DNS)
	}
	if !strings.Contains(stdout.String(), "dns: ") {
		t.Errorf("the printed summary has no dns line:\n%s", stdout.String())
	}
	asked := dns.Asked()
	for q, n := range asked {
		if n > 1 {
			t.Errorf("%s asked %d times", q, n)
		}
	}
	if len(asked) == 0 || len(asked) > 2*hosts {
		t.Errorf("%d questions for %d hosts: %v", len(asked), hosts, asked)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "dns.db")); err != nil {
		t.Errorf("no DNS cache in the state directory: %v", err)
	}
}
