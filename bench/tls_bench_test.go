//go:build unix

package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"backfill/testweb"
)

// BenchmarkTLSConnections is issue 31's goal 5: a crawl over TLS costs
// one connection (one TLS handshake) per host, HTTP/2 when the server
// offers it and HTTP/1.1 kept alive otherwise, robots.txt included.
//
// The large web (TLS_HOSTS × TLS_PAGES profiles plus an index each) is
// put behind a TLS front on loopback (tlsFront): a server of the
// benchmark's own that terminates TLS (a self-signed certificate, hence
// --insecure-tls), offers h2 or only http/1.1 in ALPN, passes each request
// on to the web, and counts the connections it accepted and the requests
// each carried, with their host and protocol. The records' links are
// https, and --resolve points every host's port 443 at the front.
//
// Each build crawls twice, once with each front: the branch (built from
// ..) and, when TLS_BASE_BIN names a binary built from the base commit,
// the base, in the same run. The figures per run: connections per host
// (mean and max), the share of requests over HTTP/2, and requests for a
// URL already requested (the same URL twice), and the full handshakes
// per host (a connection that resumed a session is not one). TLS_DELAY (default 0) is
// the --delay between two requests to a host ("default": none given, so
// the default applies) and TLS_IDLE, when set, the --idle-timeout: set
// both to one value to crawl at the default's proportions (15 s each) in
// less time.
//
//	cd bench && TLS_BASE_BIN=/tmp/backfill-base go test -run '^$' -bench TLSConnections -benchtime 1x -timeout 30m .
func BenchmarkTLSConnections(b *testing.B) {
	hosts := envInt(b, "TLS_HOSTS", 50)
	pages := envInt(b, "TLS_PAGES", 10)
	workers := envInt(b, "TLS_WORKERS", 8)
	// TLS_DELAY=default leaves --delay out: robots.txt sets none, so
	// the default delay applies.
	var delayArg []string
	if os.Getenv("TLS_DELAY") != "default" {
		delayArg = []string{"--delay", envDuration(b, "TLS_DELAY", 0).String()}
	}
	idle := envDuration(b, "TLS_IDLE", 0)

	web, err := testweb.StartLarge(testweb.LargeOptions{Hosts: hosts, Pages: pages})
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	dir := b.TempDir()
	records := strings.ReplaceAll(string(testweb.LargeRecords(web)), "http://", "https://")
	cb := newCrawlInputs(b, web, dir, workers, []byte(records))
	maps := fixtureMappings(b, dir)

	builds := []struct{ name, bin string }{}
	if base := os.Getenv("TLS_BASE_BIN"); base != "" {
		builds = append(builds, struct{ name, bin string }{"base", base})
	}
	builds = append(builds, struct{ name, bin string }{"branch", goBuild(b, "..", "./cmd/backfill", filepath.Join(dir, "backfill"))})

	fmt.Printf("tls: large web of %d hosts × (%d profiles + index) behind a TLS front, %d workers, %v, --idle-timeout %s\n",
		hosts, pages, workers, delayArg, orDefault(idle))
	for _, h2 := range []bool{true, false} {
		for _, build := range builds {
			name := build.name + "/h1"
			if h2 {
				name = build.name + "/h2"
			}
			b.Run(name, func(b *testing.B) {
				front := startTLSFront(b, web, h2)
				for i := 0; i < b.N; i++ {
					args := []string{"run",
						"--records", cb.records,
						"--mappings", maps,
						"--state-dir", filepath.Join(dir, fmt.Sprintf("state-%s-%d", strings.ReplaceAll(name, "/", "-"), i)),
						"--workers", strconv.Itoa(workers),
						"--allow-loopback", "--insecure-tls",
						"--log-level", "warn",
					}
					args = append(args, delayArg...)
					if idle > 0 {
						args = append(args, "--idle-timeout", idle.String())
					}
					for _, h := range web.Hosts() {
						args = append(args, "--resolve", h+":443:"+front.addr())
					}
					o, _, cpu := cb.runProcess(b, exec.Command(build.bin, args...))
					front.report(b, name, len(web.Hosts()), o.wall, cpu)
					front.reset()
				}
			})
		}
	}
}

func orDefault(d time.Duration) string {
	if d == 0 {
		return "default"
	}
	return d.String()
}

// tlsFront terminates TLS for every host of a web on one loopback port
// and passes the requests on to the web, counting connections.
type tlsFront struct {
	ln  net.Listener
	srv *http.Server

	nextConn atomic.Int64
	mu       sync.Mutex
	conns    int64
	log      []frontRequest
}

// frontRequest is one request the front passed on.
type frontRequest struct {
	conn              int64 // which connection carried it
	host, path, proto string
	resumed           bool // its connection's handshake resumed a session
}

type frontConnKey struct{}

func startTLSFront(b *testing.B, web *testweb.Web, h2 bool) *tlsFront {
	cert := selfSignedCert(b, web.Hosts())
	f := &tlsFront{}
	backend := web.Resolve()
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = backend[pr.In.Host+":80"]
			pr.Out.Host = pr.In.Host
		},
		ErrorLog: nil,
	}
	f.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, _ := r.Context().Value(frontConnKey{}).(int64)
			f.mu.Lock()
			f.log = append(f.log, frontRequest{conn: id, host: r.Host, path: r.URL.Path, proto: r.Proto, resumed: r.TLS.DidResume})
			f.mu.Unlock()
			proxy.ServeHTTP(w, r)
		}),
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, frontConnKey{}, f.nextConn.Add(1))
		},
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				f.mu.Lock()
				f.conns++
				f.mu.Unlock()
			}
		},
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
	}
	if !h2 {
		f.srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){} // http/1.1 only
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	f.ln = ln
	go f.srv.ServeTLS(ln, "", "")
	b.Cleanup(func() { f.srv.Close() })
	return f
}

func (f *tlsFront) addr() string { return f.ln.Addr().String() }

func (f *tlsFront) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conns, f.log = 0, nil
}

// report prints one run's figures.
func (f *tlsFront) report(b *testing.B, name string, hosts int, wall, cpu time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	perHost := map[string]map[int64]bool{}
	full := map[int64]bool{} // connections with a full handshake
	seen := map[string]int{}
	var h2, robots, repeated int
	for _, r := range f.log {
		if perHost[r.host] == nil {
			perHost[r.host] = map[int64]bool{}
		}
		perHost[r.host][r.conn] = true
		if !r.resumed {
			full[r.conn] = true
		}
		if r.proto == "HTTP/2.0" {
			h2++
		}
		if r.path == "/robots.txt" {
			robots++
		}
		u := r.host + r.path
		if seen[u]++; seen[u] > 1 {
			repeated++
		}
	}
	var counts []int
	total := 0
	for _, cs := range perHost {
		counts = append(counts, len(cs))
		total += len(cs)
	}
	sort.Ints(counts)
	if len(counts) == 0 {
		b.Fatalf("%s: no request reached the TLS front", name)
	}
	mean := float64(total) / float64(len(counts))
	fullPerHost := float64(len(full)) / float64(len(counts))
	fmt.Printf("tls: %-11s %5d requests (%d robots.txt) to %d of %d hosts in %7s: %4d connections, %.2f per host (max %d), %.2f requests per connection, full handshakes %.2f per host (the rest resumed), HTTP/2 %3.0f%%, same URL again %d; CPU %.3f ms a request\n",
		name, len(f.log), robots, len(perHost), hosts, wall.Round(time.Millisecond), f.conns, mean, counts[len(counts)-1],
		float64(len(f.log))/float64(f.conns), fullPerHost, 100*float64(h2)/float64(len(f.log)), repeated,
		float64(cpu.Microseconds())/1000/float64(len(f.log)))
	b.ReportMetric(mean, "conns/host")
	b.ReportMetric(fullPerHost, "full-handshakes/host")
	b.ReportMetric(float64(counts[len(counts)-1]), "max-conns/host")
	b.ReportMetric(float64(h2)/float64(len(f.log)), "h2-share")
	b.ReportMetric(float64(repeated), "repeated")
}

// selfSignedCert is a certificate for names and 127.0.0.1; the crawl
// takes it under --insecure-tls.
func selfSignedCert(b *testing.B, names []string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "tls-front.example"},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		b.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
