package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/testweb"
)

// TestDiskFullStoppedSummary: a crawl whose state directory fills up
// stops, and its summary says how far it got (every record counted, not
// "records: 0") and what to do: free space and run the same command
// again. The state directory is a tmpfs of 1 MiB in a mount namespace of
// the run's own; the pages' long values fill it.
func TestDiskFullStoppedSummary(t *testing.T) {
	proctest.Short(t, "runs the binary on a small tmpfs")
	if os.Geteuid() != 0 {
		proctest.NotRoot(t, "mounting a small tmpfs for a state directory to fill")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		proctest.Missing(t, "unshare", "a state directory on a small tmpfs")
	}
	web, err := testweb.StartFresh(0)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	const n = 40
	rng := rand.New(rand.NewPCG(1, 2))
	words := func(k int) string { // text that compresses little
		var b strings.Builder
		for range k {
			fmt.Fprintf(&b, "w%x ", rng.Uint64())
		}
		return b.String()
	}
	var csv strings.Builder
	csv.WriteString("id,name,bio,site\n")
	for i := range n {
		host := fmt.Sprintf("p%02d.example", i)
		web.Put(host, "/", testweb.FreshPage{Body: fmt.Sprintf(`<html><body><h1>P%02d</h1><p class="bio">%s</p></body></html>`, i, words(3000))})
		fmt.Fprintf(&csv, "r%02d,P%02d,,http://%s/\n", i, i, host)
	}
	dir := t.TempDir()
	maps := writeMappings(t, dir, map[string]string{"bios.json": `{"name": "bios", "url_patterns": [{"type": "regex", "pattern": "^http://p[0-9]+\\.example/"}],
  "fields": [{"name": "name", "match": true, "processors": [{"type": "xpath", "parameters": {"expression": "//h1/text()"}}]},
    {"name": "bio", "processors": [{"type": "xpath", "parameters": {"expression": "//p[@class='bio']/text()"}}]}]}`})
	records := filepath.Join(dir, "records.csv")
	if err := os.WriteFile(records, []byte(csv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(dir, "state")
	if err := os.Mkdir(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append(freshRunArgs(records, stateDir, maps, web), "--depth", "0")
	script := `mount -t tmpfs -o size=1m tmpfs "$1" && shift && exec "$@"`
	cmd := exec.Command("unshare", append([]string{"-m", "sh", "-c", script, "sh", stateDir, backfillBinary(t)}, args...)...)
	done := make(chan struct{})
	var out []byte
	go func() {
		defer close(done)
		out, err = cmd.CombinedOutput()
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the run on a full disk did not end within 2 minutes:\n%s", out)
	}
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() == exitOK {
		t.Fatalf("a run whose state directory filled up: %v, want it stopped\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		"the crawl stopped before it finished; so far:",
		fmt.Sprintf("records: %d ", n),
		"the disk is full: free space where the state directory (" + stateDir + ") and the results store are, then run the same command again: the crawl resumes where it stopped",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the output does not say %q:\n%s", want, text)
		}
	}
}
