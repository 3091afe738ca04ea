package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"backfill/proctest"
)

// TestCrashLargeState is the crash test on a large state: the crash web's
// records plus BACKFILL_CRASH_RECORDS filler records (say 1000000; the test
// is skipped without it: taking in a million records twice takes a minute
// or more, too long for every test run). The dispatcher is killed with
// SIGKILL while it takes the records in, started again (it reads on from
// where its last commit left the file), killed again mid-crawl and started
// again. The export must hold every record once, the filler records
// exactly as given, and the crash web's records filled as an
// uninterrupted crawl fills them.
//
//	BACKFILL_CRASH_RECORDS=1000000 go test -run TestCrashLargeState -timeout 30m ./cmd/backfill
func TestCrashLargeState(t *testing.T) {
	n, _ := strconv.Atoi(proctest.OptIn(t, "BACKFILL_CRASH_RECORDS", "the crash test on a large state (the number of filler records, e.g. 1000000)"))
	if n <= 0 {
		t.Fatal("BACKFILL_CRASH_RECORDS: want a number of records")
	}
	want := baseline(t)
	w := startCrashWeb(t)
	c := newCluster(t, w)
	// The fillers have every field, so nothing is crawled for them: they
	// make the state large and must come back as they went in.
	var b bytes.Buffer
	b.Write(w.records)
	for i := range n {
		fmt.Fprintf(&b, "f%07d,Filler %d,Place %d,f%d@filler.example,\n", i, i, i%977, i)
	}
	if err := os.WriteFile(c.recordsPath, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	// Killed while taking the records in: once results.db holds about a
	// third of them (a few hundred bytes each), or as soon as it listens
	// if the intake was quicker than that.
	c.dispN++
	c.disp = start(t, "dispatcher-1", "dispatcher", "--records", c.recordsPath, "--state-dir", c.stateDir,
		"--listen", c.listen, "--lease", crashLease, "--expect", "2", "--summary", c.summaryPath)
	deadline := time.Now().Add(10 * time.Minute)
	for {
		fi, err := os.Stat(c.storePath)
		if err == nil && fi.Size() > int64(n)*100 {
			break
		}
		if _, ok := c.disp.stderr.wait(regexp.MustCompile(`dispatcher listening`), time.Now().Add(50*time.Millisecond)); ok || time.Now().After(deadline) {
			break
		}
	}
	c.killDispatcher()

	c.startDispatcher()
	if _, ok := c.disp.stderr.wait(regexp.MustCompile(`records loaded|records file taken in before`), time.Now().Add(10*time.Minute)); !ok {
		t.Fatal("the restarted dispatcher did not finish taking the records in")
	}
	c.startSupervisor("sup-1")
	c.startSupervisor("sup-2")
	c.waitRequests(crashRequests / 4)
	c.killDispatcher()
	c.startDispatcher()
	export := c.finish()

	got := checkExport(t, export, w.truth)
	for id, v := range want {
		if got[id] != v {
			t.Errorf("record %s differs from the uninterrupted run:\n got %s\nwant %s", id, got[id], v)
		}
	}
	fillers := 0
	for id, canon := range got {
		if _, ok := want[id]; ok {
			continue
		}
		i, err := strconv.Atoi(strings.TrimPrefix(id, "f"))
		if !strings.HasPrefix(id, "f") || err != nil || i >= n {
			t.Errorf("record %s in the export was not in the input", id)
			continue
		}
		fillers++
		var rec struct{ Fields map[string]any }
		if err := json.Unmarshal([]byte(canon), &rec); err != nil {
			t.Fatal(err)
		}
		wantFields := map[string]any{"id": id, "name": fmt.Sprintf("Filler %d", i), "location": fmt.Sprintf("Place %d", i%977),
			"email": fmt.Sprintf("f%d@filler.example", i), "homepage": nil} // an empty CSV value exports as null
		for k, v := range wantFields {
			if rec.Fields[k] != v {
				t.Errorf("filler %s field %s = %v, want %v", id, k, rec.Fields[k], v)
				break
			}
		}
	}
	if fillers != n {
		t.Errorf("%d filler records exported, want %d", fillers, n)
	}
	checkCrawlPoliteness(t, w.requests(), c.events)
}
