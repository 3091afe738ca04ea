package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInsecureTLSRecorded: a page whose certificate does not verify is
// refused (class tls); under --insecure-tls it is fetched, and the
// certificate problem is counted in the summary and said in the
// provenance of every value it gave.
func TestInsecureTLSRecorded(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ann" { // robots.txt, the soft-404 probe
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<html><body><h1>Ann Lee</h1><span class="email">ann@self-signed.example</span></body></html>`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	maps := filepath.Join(dir, "mappings")
	if err := os.MkdirAll(maps, 0o755); err != nil {
		t.Fatal(err)
	}
	mapping := `{"name": "people", "url_patterns": [{"type": "regex", "pattern": "^https://"}],
  "fields": [{"name": "name", "match": true, "processors": [{"type": "xpath", "parameters": {"expression": "//h1/text()"}}]},
    {"name": "email", "processors": [{"type": "xpath", "parameters": {"expression": "//span[@class='email']/text()"}}]}]}`
	if err := os.WriteFile(filepath.Join(maps, "people.json"), []byte(mapping), 0o644); err != nil {
		t.Fatal(err)
	}
	records := filepath.Join(dir, "r.csv")
	if err := os.WriteFile(records, []byte("id,name,email,site\nr1,Ann Lee,,"+srv.URL+"/ann\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(state string, extra ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args := append([]string{"run", "--records", records, "--state-dir", filepath.Join(dir, state), "--mappings", maps,
			"--allow-loopback", "--delay", "0"}, extra...)
		if code := mainExit(args, &stdout, &stderr); code != exitOK {
			t.Fatalf("run %v: exit %d\n%s", extra, code, stderr.String())
		}
		return stdout.String()
	}
	if out := run("verified"); !strings.Contains(out, "errors by class: tls=1") || strings.Contains(out, "--insecure-tls): ") {
		t.Errorf("without --insecure-tls the page is refused:\n%s", out)
	}
	out := run("insecure", "--insecure-tls")
	if !strings.Contains(out, "pages fetched despite a bad TLS certificate (--insecure-tls): 1") {
		t.Errorf("the summary does not count the page fetched despite its certificate:\n%s", out)
	}
	var stdout, stderr bytes.Buffer
	if code := mainExit([]string{"export", "--state-dir", filepath.Join(dir, "insecure"), "--provenance"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("export: exit %d\n%s", code, stderr.String())
	}
	var rec struct {
		Provenance map[string]struct {
			Value    string `json:"value"`
			TLSError string `json:"tls_error"`
		} `json:"provenance"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rec); err != nil {
		t.Fatalf("export %q: %v", stdout.String(), err)
	}
	email := rec.Provenance["email"]
	if email.Value != "ann@self-signed.example" || !strings.Contains(email.TLSError, "certificate") {
		t.Errorf("email provenance: %+v, want the certificate problem", email)
	}
}
