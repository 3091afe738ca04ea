package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"backfill/cluster/clustertest"
	"backfill/dispatcher"
	"backfill/proctest"
	"backfill/testweb"
	"backfill/wire"
)

// TestSquatterCannotTakeAName runs a secured dispatcher and a supervisor
// as their own processes. Before the supervisor starts, a member whose
// key is authorized (a compromised droplet, played by the test) says
// Hello under the supervisor's name, and is welcomed under its own key's
// name; the real supervisor then joins under its name, crawls and exits
// when the run is done (--exit-when-done), while the squatter's forged
// answer quarantines its key alone. The export is the sample's truth.
func TestSquatterCannotTakeAName(t *testing.T) {
	proctest.Short(t, "end-to-end crawl")
	if !wire.HasCurve() {
		proctest.NoCurve(t, "a secured cluster")
	}
	web, err := testweb.Start(testweb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := t.TempDir()
	keyDir, authorized := filepath.Join(dir, "keys"), filepath.Join(dir, "authorized")
	for _, d := range []string{keyDir, authorized} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	keys := map[string]wire.Keys{}
	for _, n := range []string{"dispatcher", "good", "squat"} {
		k, err := wire.NewKeys()
		if err != nil {
			t.Fatal(err)
		}
		if err := wire.WriteKeys(filepath.Join(keyDir, n), k, false); err != nil {
			t.Fatal(err)
		}
		keys[n] = k
		if n != "dispatcher" { // as provisioning writes them: NAME.pub
			os.WriteFile(filepath.Join(authorized, n+".pub"), []byte("# backfill CURVE public key of supervisor "+n+"\n"+k.Public+"\n"), 0o644)
		}
	}
	recordsPath, truth := writeSample(t, dir)
	stateDir := filepath.Join(dir, "state")
	summary := filepath.Join(dir, "summary.json")
	disp := start(t, "dispatcher", "dispatcher", "--records", recordsPath, "--state-dir", stateDir, "--listen", "tcp://127.0.0.1:*",
		"--expect", "2", "--key", filepath.Join(keyDir, "dispatcher.key"), "--authorized-keys", authorized, "--summary", summary)
	deadline := time.Now().Add(time.Minute)
	line, ok := disp.stderr.wait(regexp.MustCompile(`dispatcher listening`), deadline)
	if !ok {
		t.Fatal("the dispatcher never said where it listens")
	}
	var listening struct{ Endpoint, Mappings string }
	if err := json.Unmarshal([]byte(line), &listening); err != nil {
		t.Fatal(err)
	}

	squatter := clustertest.New(t, "good", listening.Endpoint, 4, keys["squat"], keys["dispatcher"].Public)
	// Its hosts wait out its lease and its longest request once it is
	// quarantined (it may still be asking them): a second, not a minute.
	squatter.Hello.Mappings, squatter.Hello.MaxRequest = listening.Mappings, time.Second
	if !squatter.Join(10 * time.Second) {
		t.Fatalf("the squatter was not welcomed as itself\n%s", disp.stderr)
	}
	if squatter.Welcome.Member != "squat" {
		t.Errorf("the squatter, saying it is good, was welcomed as %q, want squat", squatter.Welcome.Member)
	}
	a := []string{"supervisor", "--name", "good", "--dispatcher", listening.Endpoint, "--store", filepath.Join(stateDir, "results.db"),
		"--allow-loopback", "--delay", "0", "--workers", "4", "--contact", "https://backfill.invalid/good", "--exit-when-done",
		"--key", filepath.Join(keyDir, "good.key"), "--dispatcher-key", filepath.Join(keyDir, "dispatcher.pub")}
	for host, addr := range web.Resolve() {
		a = append(a, "--resolve", host+":"+addr)
	}
	good := start(t, "good", a...)
	if _, ok := disp.stderr.wait(regexp.MustCompile(`"msg":"supervisor joined","supervisor":"good"`), deadline); !ok {
		t.Fatal("the supervisor named good never joined after a squatter said its name")
	}
	// The squatter answers a task it was never given.
	squatter.Poll(100 * time.Millisecond)
	squatter.Send(wire.KindResult, wire.Result{TaskID: "00000000000000a1", Lease: 1, Supervisor: "good", URL: "https://a.example/", Status: 200})
	if _, ok := disp.stderr.wait(regexp.MustCompile(`"msg":"member quarantined`), deadline); !ok {
		t.Fatal("the squatter's forged answer quarantined nobody")
	}
	for done := false; !done; {
		select {
		case <-good.done:
			done = true
		case <-time.After(50 * time.Millisecond):
			squatter.Poll(0) // it goes on heartbeating, refused
		}
		if time.Now().After(deadline.Add(2 * time.Minute)) {
			t.Fatal("the supervisor did not exit when the run was done")
		}
	}
	if code := good.waitExit(time.Second); code != 0 {
		t.Errorf("good exit code %d", code)
	}
	if code := disp.waitExit(time.Minute); code != 0 {
		t.Fatalf("dispatcher exit code %d", code)
	}
	var sum dispatcher.Summary
	b, err := os.ReadFile(summary)
	if err != nil || json.Unmarshal(b, &sum) != nil {
		t.Fatalf("summary: %v\n%s", err, b)
	}
	if len(sum.Quarantined) != 1 || sum.Quarantined[0].Key != keys["squat"].Public || sum.Quarantined[0].Member != "squat" {
		t.Errorf("quarantined %+v, want the squatter's key alone, as squat", sum.Quarantined)
	}
	if _, ok := disp.stderr.wait(regexp.MustCompile(`"supervisor":"squat".*"says":"good"`), time.Now()); !ok {
		t.Error("the squatter's join is not logged under its own name, with the name it says")
	}
	exportMatchesTruth(t, "squatted cluster", stateDir, truth)
}
