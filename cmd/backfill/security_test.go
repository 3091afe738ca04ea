package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"backfill/proctest"
	"backfill/testweb"
	"backfill/wire"
)

// TestSecuredCluster runs a CURVE-secured dispatcher and four supervisors
// as separate processes: one properly keyed, one whose key is not
// authorized, one that expects the wrong dispatcher key and one speaking
// plaintext. Only the first may join and fetch; the crawl still completes.
func TestSecuredCluster(t *testing.T) {
	proctest.Short(t, "end-to-end crawl")
	if !wire.HasCurve() {
		proctest.NoCurve(t, "libzmq was built without CURVE: cannot test a secured cluster")
	}
	web, err := testweb.Start(testweb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()

	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	os.Mkdir(keys, 0o700)
	names := []string{"dispatcher", "good", "unlisted", "wrong-server", "stranger"}
	var args []string
	for _, n := range names {
		args = append(args, filepath.Join(keys, n))
	}
	kg := start(t, "keygen", append([]string{"keygen"}, args...)...)
	if code := kg.waitExit(30 * time.Second); code != 0 {
		t.Fatalf("keygen exit code %d", code)
	}
	if n := strings.Count(kg.stdout.String(), ".pub "); n != len(names) {
		t.Fatalf("keygen printed %d public keys, want %d:\n%s", n, len(names), kg.stdout.String())
	}
	again := start(t, "keygen again", "keygen", filepath.Join(keys, "good"))
	if code := again.waitExit(30 * time.Second); code != 1 || !strings.Contains(again.stderr.String(), "exists") {
		t.Fatalf("keygen over an existing pair: exit %d, stderr %q; want 1 and a refusal", again.waitExit(0), again.stderr)
	}
	key := func(n, ext string) string { return filepath.Join(keys, n+ext) }

	// The dispatcher authorizes "good" and "wrong-server": a directory
	// holding their public keys, as an operator would collect them.
	authorized := filepath.Join(dir, "authorized")
	os.Mkdir(authorized, 0o755)
	for _, n := range []string{"good", "wrong-server"} {
		b, err := os.ReadFile(key(n, ".pub"))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(authorized, n+".pub"), b, 0o644)
	}

	recordsPath, truth := writeSample(t, dir)
	stateDir := filepath.Join(dir, "state")
	storePath := filepath.Join(stateDir, "results.db")
	disp, endpoint := startDispatcher(t, "--records", recordsPath, "--state-dir", stateDir,
		"--listen", "tcp://127.0.0.1:*", "--expect", "1",
		"--key", key("dispatcher", ".key"), "--authorized-keys", authorized)
	deadline := time.Now().Add(time.Minute)

	supervisor := func(name string, extra ...string) *process {
		a := []string{"supervisor", "--name", name, "--dispatcher", endpoint, "--store", storePath,
			"--allow-loopback", "--delay", "0", "--workers", "4", "--contact", "https://backfill.invalid/" + name}
		for host, addr := range web.Resolve() {
			a = append(a, "--resolve", host+":"+addr)
		}
		return start(t, name, append(a, extra...)...)
	}
	bad := []*process{
		supervisor("unlisted", "--key", key("unlisted", ".key"), "--dispatcher-key", key("dispatcher", ".pub")),
		supervisor("wrong-server", "--key", key("wrong-server", ".key"), "--dispatcher-key", key("stranger", ".pub")),
		supervisor("plaintext"),
	}
	// Each is left unanswered before the good one starts: the dispatcher
	// would have started dispatching to the first to join (--expect 1).
	for _, p := range bad {
		if _, ok := p.stderr.wait(regexp.MustCompile(`dispatcher not answering`), deadline); !ok {
			t.Fatalf("%s did not report an unanswered hello:\n%s", p.name, p.stderr)
		}
	}
	// The dispatcher's public key given as the key itself, not a file.
	pub, err := wire.LoadPublicKey(key("dispatcher", ".pub"))
	if err != nil {
		t.Fatal(err)
	}
	good := supervisor("good", "--key", key("good", ".key"), "--dispatcher-key", pub)

	if code := disp.waitExit(3 * time.Minute); code != 0 {
		t.Fatalf("dispatcher exit code %d", code)
	}
	for _, p := range append(bad, good) {
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.waitExit(30 * time.Second); code != 0 {
			t.Errorf("%s exit code %d after SIGTERM", p.name, code)
		}
	}

	if _, ok := good.stderr.wait(regexp.MustCompile(`registered with dispatcher`), time.Now()); !ok {
		t.Error("the keyed supervisor never registered")
	}
	for _, p := range bad {
		if _, ok := p.stderr.wait(regexp.MustCompile(`registered with dispatcher`), time.Now()); ok {
			t.Errorf("%s registered with a secured dispatcher", p.name)
		}
		if strings.Contains(disp.stderr.String(), `"supervisor":"`+p.name+`"`) {
			t.Errorf("the dispatcher heard from %s", p.name)
		}
	}
	joined := regexp.MustCompile(`supervisor joined.*"supervisor":"([^"]+)"`).FindAllStringSubmatch(disp.stderr.String(), -1)
	if len(joined) != 1 || joined[0][1] != "good" {
		t.Errorf("members joined: %v, want only good", joined)
	}
	fetched := map[string]int{}
	for _, r := range web.Log() {
		for _, n := range []string{"good", "unlisted", "wrong-server", "plaintext"} {
			if strings.Contains(r.UserAgent, "backfill.invalid/"+n+")") {
				fetched[n]++
			}
		}
	}
	if fetched["good"] == 0 || len(fetched) != 1 {
		t.Errorf("requests by supervisor: %v, want only good's", fetched)
	}

	exportMatchesTruth(t, "secured cluster", stateDir, truth)
}

// Plaintext is refused at start-up on an endpoint that is not loopback, and
// half a key configuration is a usage error.
func TestSecurityStartupRefusals(t *testing.T) {
	if !wire.HasCurve() {
		proctest.NoCurve(t, "libzmq was built without CURVE")
	}
	dir := t.TempDir()
	records := filepath.Join(dir, "r.csv")
	os.WriteFile(records, []byte("id,url\n1,https://a.example/\n"), 0o644)
	k, err := wire.NewKeys()
	if err != nil {
		t.Fatal(err)
	}
	if err := wire.WriteKeys(filepath.Join(dir, "d"), k, false); err != nil {
		t.Fatal(err)
	}
	state := func() string { return t.TempDir() }
	cases := []struct {
		name  string
		run   func(ctx context.Context, args []string) error
		args  []string
		want  string
		usage bool
	}{
		{"dispatcher plaintext on a wildcard", dispatcherCmd,
			[]string{"--records", records, "--state-dir", state(), "--listen", "tcp://0.0.0.0:0"},
			"tcp://0.0.0.0:0: plaintext refused", false},
		{"supervisor plaintext to a remote dispatcher", supervisorCmd,
			[]string{"--state-dir", state(), "--dispatcher", "tcp://192.0.2.1:5550"},
			"tcp://192.0.2.1:5550: plaintext refused", false},
		{"supervisor plaintext task socket on a wildcard", supervisorCmd,
			[]string{"--state-dir", state(), "--listen", "tcp://0.0.0.0:0"},
			"tcp://0.0.0.0:0: plaintext refused", false},
		{"dispatcher key without authorized keys", dispatcherCmd,
			[]string{"--records", records, "--state-dir", state(), "--key", filepath.Join(dir, "d.key")},
			"--key and --authorized-keys go together", true},
		{"supervisor key without dispatcher key", supervisorCmd,
			[]string{"--state-dir", state(), "--key", filepath.Join(dir, "d.key")},
			"--key and --dispatcher-key go together", true},
		{"insecure with keys", supervisorCmd,
			[]string{"--state-dir", state(), "--key", filepath.Join(dir, "d.key"), "--dispatcher-key", k.Public, "--insecure"},
			"--insecure contradicts --key", true},
		{"bad dispatcher key", supervisorCmd,
			[]string{"--state-dir", state(), "--key", filepath.Join(dir, "d.key"), "--dispatcher-key", "not-a-key"},
			"--dispatcher-key", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := c.run(ctx, c.args)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
			if errors.Is(err, errUsage) != c.usage {
				t.Errorf("usage error = %v, want %v", !c.usage, c.usage)
			}
		})
	}
}

func dispatcherCmd(ctx context.Context, args []string) error {
	var out, errb bytes.Buffer
	return cmdDispatcher(ctx, args, &out, &errb)
}

func supervisorCmd(ctx context.Context, args []string) error {
	var out, errb bytes.Buffer
	return cmdSupervisor(ctx, args, &out, &errb)
}
