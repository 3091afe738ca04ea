package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backfill/dispatcher"
	"backfill/linkscore"
	"backfill/wire"
)

// TestStatusHelp: asking for help is not an error.
func TestStatusHelp(t *testing.T) {
	for _, cmd := range []string{"status", "run", "export", "supervisor", "dispatcher"} {
		var stdout, stderr bytes.Buffer
		if code := mainExit([]string{cmd, "-h"}, &stdout, &stderr); code != exitOK {
			t.Errorf("%s -h: exit %d, want 0:\n%s", cmd, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "-state-dir") && cmd != "supervisor" || strings.Contains(stderr.String(), "help requested") {
			t.Errorf("%s -h printed:\n%s", cmd, stderr.String())
		}
	}
}

// TestStatusShowsRefusedPeersAndRestarts prints a status with a restart,
// refused handshakes and what the frontier's score did.
func TestStatusShowsRefusedPeersAndRestarts(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	st := dispatcher.Status{Dispatcher: "d", Run: "r", Endpoint: "tcp://127.0.0.1:5550", State: dispatcher.StateRunning,
		Started: now, Updated: now, Records: 3, Restarts: 2, Pages: 40, ElapsedSeconds: 20, PagesPerSec: 2,
		ETA: dispatcher.ETA{Seconds: 120, Estimate: 150, Requests: 70, Pages: 60, Hosts: 10, Rate: 0.5, RateSeconds: 120,
			Host: "a.example", HostRequests: 4, HostCycle: 15, HostSeconds: 45},
		Refused: []wire.Refusal{{Reason: wire.RefusedKey, Address: "10.0.0.9", Key: "K3y", Count: 7, First: now, Last: now},
			{Reason: wire.RefusedPlaintext, Count: 2, First: now, Last: now}},
		Frontier: dispatcher.FrontierStatus{Requests: 52, RequestsPerComplete: 2.5, Pruned: map[string]int64{dispatcher.PruneLastDepth: 9},
			Learned: []linkscore.Rate{{Feature: "naming", Value: "full", DirectN: 20, DirectS: 17, OnwardN: 3, OnwardS: 1}}}}
	b, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(dir, dispatcher.StatusFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	read, err := readStatusFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printStatus(&out, read, false, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"40 (2.0/s over 20s)", "(the whole crawl: 2 restart(s))", "refused handshakes (2 peers)",
		"eta        2m30s (≥ 2m0s: 70 requests at 0.5/s; 60 pages left on 10 hosts, 0.5 requests/s allowed)",
		"10.0.0.9", "K3y", "key not authorized", "no key (a plaintext client)",
		"52 requests for pages, 2.5 per complete record  links pruned: last-depth=9", "naming  full   17/20   1/3"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}
