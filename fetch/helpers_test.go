package fetch

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Test servers: every case gets its own real server on loopback, either an
// httptest server for well-formed HTTP or a raw listener that writes
// whatever bytes the case needs.

const testUA = "backfill-test/1.0 (+http://backfill.example/contact)"

// noLeak fails t if goroutines started during the test are still running
// when its cleanups have finished. Register it first so it runs last.
func noLeak(t *testing.T) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= base {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutines: %d at start, %d after cleanup\n%s", base, n, buf)
				return
			}
			runtime.Gosched()
			time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
		}
	})
}

// rawServer accepts connections on 127.0.0.1 and hands each to serve in its
// own goroutine. serve must return once done is closed or the connection
// fails; cleanup closes the listener and every connection and waits.
type rawServer struct {
	ln    net.Listener
	done  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func newRawServer(t *testing.T, serve func(c net.Conn, done <-chan struct{})) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				serve(c, s.done)
			}()
		}
	}()
	t.Cleanup(func() {
		close(s.done)
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) addr() string { return s.ln.Addr().String() }

// readRequest consumes a request head so the client sees its write succeed.
func readRequest(c net.Conn) {
	buf := make([]byte, 0, 4096)
	tmp := make([]byte, 1024)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for !bytes.Contains(buf, []byte("\r\n\r\n")) && len(buf) < 64<<10 {
		n, err := c.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if err != nil {
			return
		}
	}
}

// writeRaw answers one request with the given bytes and closes.
func writeRaw(resp string) func(net.Conn, <-chan struct{}) {
	return func(c net.Conn, _ <-chan struct{}) {
		readRequest(c)
		_, _ = c.Write([]byte(resp))
	}
}

// hold blocks until the server shuts down.
func hold(c net.Conn, done <-chan struct{}) { <-done }

// trickle writes s one byte at a time every gap, until done.
func trickle(c net.Conn, done <-chan struct{}, s string, gap time.Duration) bool {
	t := time.NewTicker(gap)
	defer t.Stop()
	for i := 0; i < len(s); i++ {
		select {
		case <-done:
			return false
		case <-t.C:
		}
		if _, err := c.Write([]byte{s[i]}); err != nil {
			return false
		}
	}
	return true
}

// newHTTPServer starts an httptest server and returns its address.
func newHTTPServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// testCert makes a self-signed certificate for names and 127.0.0.1.
func testCert(t *testing.T, names ...string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: names[0]},
		DNSNames:              names,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// dnsServer answers A queries on a loopback UDP socket: with answer (if
// valid), NXDOMAIN (if nx), or not at all (if silent).
type dnsBehaviour struct {
	answer netip.Addr
	nx     bool
	silent bool
}

func newDNSServer(t *testing.T, b dnsBehaviour) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if b.silent {
				continue
			}
			if out, err := dnsAnswer(buf[:n], b); err == nil {
				_, _ = pc.WriteTo(out, from)
			}
		}
	}()
	// The resolver's lookup outlives a canceled caller (it runs until its
	// own timeout); closing its sockets on cleanup ends it at once.
	var mu sync.Mutex
	var dialed []net.Conn
	t.Cleanup(func() {
		pc.Close()
		mu.Lock()
		for _, c := range dialed {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "udp", addr)
		if err == nil {
			mu.Lock()
			dialed = append(dialed, c)
			mu.Unlock()
		}
		return c, err
	}}
}

func dnsAnswer(q []byte, b dnsBehaviour) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil, err
	}
	question, err := p.Question()
	if err != nil {
		return nil, err
	}
	h.Response, h.Authoritative, h.RecursionAvailable = true, true, true
	if b.nx {
		h.RCode = dnsmessage.RCodeNameError
	}
	bld := dnsmessage.NewBuilder(nil, h)
	bld.EnableCompression()
	if err := bld.StartQuestions(); err != nil {
		return nil, err
	}
	if err := bld.Question(question); err != nil {
		return nil, err
	}
	if err := bld.StartAnswers(); err != nil {
		return nil, err
	}
	if !b.nx && question.Type == dnsmessage.TypeA && b.answer.Is4() {
		rh := dnsmessage.ResourceHeader{Name: question.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60}
		if err := bld.AResource(rh, dnsmessage.AResource{A: b.answer.As4()}); err != nil {
			return nil, err
		}
	}
	return bld.Finish()
}

// fullListener returns the address of a listener whose accept queue is
// full, so a new connection attempt hangs in the SYN stage. It reports
// false where the kernel does not behave that way.
func fullListener(t *testing.T) (string, bool) {
	t.Helper()
	ln, err := listenBacklog()
	if err != nil {
		return "", false
	}
	t.Cleanup(func() { ln.Close() })
	addr := ln.Addr().String()
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for i := 0; i < 16; i++ {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return addr, true
			}
			return "", false
		}
		held = append(held, c)
	}
	return "", false
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// exchanges counts what a keep-alive server saw: connections accepted
// and request heads read, across all connections.
type exchanges struct {
	conns, requests atomic.Int32
}

// newKeepAliveServer reads request heads on each connection in turn and
// hands each to answer with its number n (from 1, across connections);
// answer writes whatever it likes and returns false to close the
// connection without reading another.
func newKeepAliveServer(t *testing.T, answer func(n int, c net.Conn, done <-chan struct{}) bool) (string, *exchanges) {
	t.Helper()
	ex := &exchanges{}
	s := newRawServer(t, func(c net.Conn, done <-chan struct{}) {
		ex.conns.Add(1)
		br := bufio.NewReader(c)
		for {
			if !readHead(br) {
				return
			}
			if !answer(int(ex.requests.Add(1)), c, done) {
				return
			}
		}
	})
	return s.addr(), ex
}

// readHead reads one request head, reporting whether it was whole.
func readHead(br *bufio.Reader) bool {
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return false
		}
		if line == "\r\n" {
			return true
		}
	}
}

// okResponse is a kept-alive 200 with body.
func okResponse(body string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}
