package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"backfill/store"
)

// TestOneProcessRunSaysNothingOfSecurity: `backfill run` is a dispatcher
// and its supervisors in one process, talking in process: it warns about
// nothing a cluster's operator must secure (the plaintext warning is for
// clusters whose members are on other machines).
func TestOneProcessRunSaysNothingOfSecurity(t *testing.T) {
	dir := t.TempDir()
	records := filepath.Join(dir, "r.csv")
	if err := os.WriteFile(records, []byte("id,name,email\nr1,Ann Lee,\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := mainExit([]string{"run", "--records", records, "--state-dir", filepath.Join(dir, "state"),
		"--mappings", filepath.Join("testdata", "badinputs", "maps")}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	for _, word := range []string{"plaintext", "secure the cluster", "WARN", `"level":"WARN"`} {
		if strings.Contains(stderr.String(), word) {
			t.Errorf("a one-process run says %q:\n%s", word, stderr.String())
		}
	}
}

// TestMistypedFlag: a mistyped flag is answered with the nearest flag in
// one line, not with every flag the command has; -h still lists them.
func TestMistypedFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--sate-dir", "x"}, "unknown flag --sate-dir: did you mean --state-dir?"},
		{[]string{"export", "--fromat", "csv"}, "did you mean --format?"},
		{[]string{"keygen", "--forse", "k"}, "did you mean --force?"},
		{[]string{"mappings", "check", "--nope"}, "unknown flag --nope (`backfill mappings check -h` lists every flag)"},
		{[]string{"provision", "render", "--oo", "x"}, "did you mean --o?"},
	} {
		var stdout, stderr bytes.Buffer
		if code := mainExit(c.args, &stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", c.args, code, exitUsage)
		}
		if got := stderr.String(); !strings.Contains(got, c.want) || strings.Count(got, "\n") != 1 {
			t.Errorf("%q: stderr %q, want one line saying %q", c.args, got, c.want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := mainExit([]string{"run", "-h"}, &stdout, &stderr); code != exitOK || !strings.Contains(stderr.String(), "-state-dir") {
		t.Errorf("run -h: exit %d, stderr %q: want every flag", code, stderr.String())
	}
}

// TestDemoTableShowsEveryColumn: the demo's table shows every column of
// the sample, the links too (homepage, profile), which say where the
// crawl started from.
func TestDemoTableShowsEveryColumn(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec := store.Record{ID: "r1", Seq: 1, Format: "csv", Order: []string{"id", "name", "homepage", "profile"},
		Fields: map[string]string{"id": "r1", "name": "Alice Moreau", "homepage": "http://blog.example.net/~alice/", "profile": ""},
		Links:  []string{"http://blog.example.net/~alice/"}}
	if err := st.PutRecords(ctx, []store.Record{rec}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printRecords(ctx, &out, st, nil); err != nil {
		t.Fatal(err)
	}
	header, _, _ := strings.Cut(out.String(), "\n")
	if strings.Join(strings.Fields(header), " ") != "id name homepage profile" || !strings.Contains(out.String(), "blog.example.net/~alice/") {
		t.Errorf("demo table:\n%s\nwant the columns id, name, homepage, profile and the homepage's link", out.String())
	}
}

// TestCAFile: a site whose certificate a private CA signed is refused
// (tls) until --ca-file names that CA; then it is fetched, verified.
func TestCAFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, "<html><head><title>private</title></head><body><h1>Behind a private CA</h1></body></html>")
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	try := func(extra ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		args := append([]string{"mappings", "try", "--allow-loopback", "--delay", "0"}, extra...)
		code := mainExit(append(args, srv.URL+"/page"), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	if code, out := try(); code == exitOK || !strings.Contains(out, "certificate") {
		t.Errorf("without --ca-file: exit %d, want a refusal naming the certificate:\n%s", code, out)
	}
	if code, out := try("--ca-file", ca); code != exitOK {
		t.Errorf("with --ca-file: exit %d:\n%s", code, out)
	}
	if code, out := try("--ca-file", filepath.Join(t.TempDir(), "none.pem")); code == exitOK || !strings.Contains(out, "--ca-file") {
		t.Errorf("--ca-file missing: exit %d:\n%s", code, out)
	}
}
