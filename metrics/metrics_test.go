package metrics

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"backfill/wire"
)

func TestListenRules(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     Options
		wantHost string // host of the bound address; "" when refused
		plain    bool   // refused as plaintext on a public address
	}{
		{"bare port binds loopback", Options{Addr: "0"}, "127.0.0.1", false},
		{"no host binds loopback", Options{Addr: ":0"}, "127.0.0.1", false},
		{"loopback named", Options{Addr: "127.0.0.1:0"}, "127.0.0.1", false},
		{"ipv6 loopback", Options{Addr: "[::1]:0"}, "::1", false},
		{"wildcard refused", Options{Addr: "0.0.0.0:0"}, "", true},
		{"ipv6 wildcard refused", Options{Addr: "[::]:0"}, "", true},
		{"public refused", Options{Addr: "203.0.113.7:0"}, "", true},
		// Insecure lifts the rule: binding fails only because the
		// address is not this machine's.
		{"public allowed when insecure", Options{Addr: "203.0.113.7:0", Insecure: true}, "", false},
		{"half a certificate", Options{Addr: "127.0.0.1:0", CertFile: "x.pem"}, "", false},
		{"no port", Options{Addr: "127.0.0.1:"}, "", false},
		{"empty", Options{}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Listen(tc.opts)
			if tc.wantHost == "" {
				if err == nil {
					s.Close()
					t.Fatalf("Listen(%+v) succeeded, want an error", tc.opts)
				}
				if got := errors.Is(err, ErrPlaintext); got != tc.plain {
					t.Errorf("Listen(%+v) = %v; ErrPlaintext %v, want %v", tc.opts, err, got, tc.plain)
				}
				return
			}
			if err != nil {
				t.Fatalf("Listen(%+v): %v", tc.opts, err)
			}
			defer s.Close()
			if !strings.HasPrefix(s.Addr(), tc.wantHost+":") && !strings.HasPrefix(s.Addr(), "["+tc.wantHost+"]:") {
				t.Errorf("bound %s, want host %s", s.Addr(), tc.wantHost)
			}
		})
	}
}

// TestScrape serves a registry with a counter and a histogram, sends a
// ZeroMQ frame, scrapes /metrics over HTTP and parses the text format.
func TestScrape(t *testing.T) {
	reg := NewRegistry()
	hist := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "test_seconds", Help: "A test histogram."})
	Labeled(reg, "supervisor", "s1").MustRegister(hist)
	hist.Observe(0.2)

	rx, err := wire.Listen("tcp://127.0.0.1:*")
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := wire.Dial(rx.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if err := tx.Send(wire.KindHello, wire.Hello{Supervisor: "s1", Endpoint: "tcp://127.0.0.1:1"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rx.Recv(5 * time.Second); err != nil {
		t.Fatal(err)
	}

	s, err := Listen(Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	s.HandleMetrics(reg)
	serving(t, s)

	families := scrape(t, s.URL()+"metrics")
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "backfill_wire_frames_total", "backfill_wire_bytes_total", "backfill_test_seconds"} {
		if families[name] == nil {
			t.Errorf("scrape lacks %s", name)
		}
	}
	if h := families["backfill_test_seconds"]; h != nil {
		m := h.GetMetric()[0]
		if got := m.GetHistogram().GetSampleCount(); got != 1 {
			t.Errorf("histogram count %d, want 1", got)
		}
		if l := m.GetLabel(); len(l) != 1 || l[0].GetName() != "supervisor" || l[0].GetValue() != "s1" {
			t.Errorf("histogram labels %v, want supervisor=s1", l)
		}
	}
	for _, dir := range []string{"in", "out"} {
		if v := value(families["backfill_wire_frames_total"], map[string]string{"direction": dir, "kind": "hello"}); v < 1 {
			t.Errorf("hello frames %s = %v, want at least 1", dir, v)
		}
	}
}

// scrape GETs url and parses the Prometheus text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return families
}

// value is the counter or gauge value of the first metric of f whose
// labels include labels; -1 when there is none.
func value(f *dto.MetricFamily, labels map[string]string) float64 {
	for _, m := range f.GetMetric() {
		has := map[string]string{}
		for _, l := range m.GetLabel() {
			has[l.GetName()] = l.GetValue()
		}
		if subset(labels, has) {
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return -1
}

func subset(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// serving serves s until the test ends.
func serving(t *testing.T, s *Server) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

// TestServeTLS: with a certificate the listener speaks HTTPS, and only
// HTTPS.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "backfill-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600)

	s, err := Listen(Options{Addr: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	s.HandleMetrics(NewRegistry())
	serving(t, s)
	if !strings.HasPrefix(s.URL(), "https://") {
		t.Fatalf("URL %s, want https", s.URL())
	}
	pool := x509.NewCertPool()
	pool.AddCert(must(x509.ParseCertificate(der)))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(s.URL() + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET over TLS: %s", resp.Status)
	}
	if resp, err := http.Get("http://" + s.Addr() + "/metrics"); err == nil && resp.StatusCode == http.StatusOK {
		resp.Body.Close()
		t.Errorf("plaintext GET answered on a TLS listener")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
