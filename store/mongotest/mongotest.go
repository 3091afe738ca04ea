// Package mongotest runs an embedded MongoDB-protocol server on loopback for
// tests, so the MongoDB store is tested over a real wire connection on
// machines with no MongoDB installed.
//
// The server is FerretDB with its SQLite handler, inside the test process:
// it speaks the MongoDB wire protocol on 127.0.0.1 and keeps every database
// as SQLite files in a directory of the test's. Only test files import this
// package, so the backfill binary does not carry the server.
//
// A package starts one server in its TestMain and gives each test a
// database of its own:
//
//	srv, err := mongotest.Start(dir, mongotest.Options{})
//	…
//	uri := srv.DatabaseURI(mongotest.DatabaseName(t)) // mongodb://127.0.0.1:PORT/NAME
//
// Stop and Restart take the server away and bring it back on the same
// address with the same data, as a MongoDB outage would. With Options.TLS
// the server accepts only TLS connections that present a client certificate
// signed by a CA the package generates (see TLSFiles).
//
// The embedded server takes no user: anyone who reaches it is in. A test
// that must see a password required, and a wrong one refused, runs
// FerretDB's own server program in a process of its own instead
// (BuildCommand, CommandConfig), with SCRAM authentication on.
//
// Servers of the protocol's version 1 lack transactions and some index
// options; the store uses neither, and a test passing here does not prove
// behaviour that only a real MongoDB has (replica-set failover, for one).
// Set BACKFILL_TEST_MONGO_URI to run the store's suite against a real
// server too.
package mongotest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// EnvURI names the environment variable that points the tests at a real
// MongoDB as well, e.g. mongodb://127.0.0.1:27017.
const EnvURI = "BACKFILL_TEST_MONGO_URI"

// Options configure the embedded server.
type Options struct {
	// TLS makes the server listen for TLS only and require client
	// certificates; the files are in Server.TLS.
	TLS bool
	// ServerTLS, when set, serves TLS with these files instead of ones
	// the package makes (TLS is then implied and Server.TLS holds only
	// the CA): a test that made its own certificates checks them here.
	ServerTLS *ServerTLS
	// Addr is the host:port to listen on; empty: a free port on
	// 127.0.0.1. A network namespace of a test's own may serve at
	// another address.
	Addr string
	// Logger gets the server's own log; nil discards it.
	Logger *slog.Logger
}

// ServerTLS are a TLS server's PEM files: its certificate, its key (they
// may be one file) and the CA whose client certificates it accepts.
type ServerTLS struct {
	CertFile, KeyFile, CAFile string
}

// TLSFiles are the PEM files of a TLS server, all in its directory.
type TLSFiles struct {
	CA         string // the CA certificate: what a client trusts
	ClientCert string // a client certificate the server accepts, with its key
	OtherCert  string // a client certificate with its key, signed by another CA
	serverCert string
	serverKey  string
}

// Server is one embedded server. Its methods are safe for concurrent use.
type Server struct {
	dir  string
	opts Options
	TLS  *TLSFiles // set when Options.TLS or Options.ServerTLS

	mu     sync.Mutex
	addr   string // host:port, fixed by the first start
	cancel context.CancelFunc
	done   chan error
}

// Start starts a server keeping its data under dir (which must exist) and
// listening on a free loopback port, or at Options.Addr.
func Start(dir string, opts Options) (*Server, error) {
	s := &Server{dir: dir, opts: opts, addr: "127.0.0.1:0"}
	if opts.Addr != "" {
		s.addr = opts.Addr
	}
	switch {
	case opts.ServerTLS != nil:
		s.TLS = &TLSFiles{CA: opts.ServerTLS.CAFile, serverCert: opts.ServerTLS.CertFile, serverKey: opts.ServerTLS.KeyFile}
	case opts.TLS:
		files, err := writeTLSFiles(filepath.Join(dir, "tls"))
		if err != nil {
			return nil, fmt.Errorf("mongotest: %w", err)
		}
		s.TLS = files
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, fmt.Errorf("mongotest: %w", err)
	}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

// start runs a server on s.addr. Callers hold mu, or own s alone.
func (s *Server) start() error {
	lc := ferretdb.ListenerConfig{TCP: s.addr}
	if s.TLS != nil {
		lc = ferretdb.ListenerConfig{TLS: s.addr, TLSCertFile: s.TLS.serverCert, TLSKeyFile: s.TLS.serverKey, TLSCAFile: s.TLS.CA}
	}
	log := s.opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  lc,
		Logger:    log,
		Handler:   "sqlite",
		SQLiteURL: "file:" + filepath.Join(s.dir, "data") + "/",
	})
	if err != nil {
		return fmt.Errorf("mongotest: start server on %s: %w", s.addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	// MongoDBURI waits until the listener is bound.
	u, err := url.Parse(f.MongoDBURI())
	if err != nil {
		cancel()
		<-done
		return fmt.Errorf("mongotest: server address: %w", err)
	}
	s.addr, s.cancel, s.done = u.Host, cancel, done
	return waitDial(s.addr, 10*time.Second)
}

// waitDial waits until addr accepts a TCP connection.
func waitDial(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mongotest: server on %s does not accept connections: %w", addr, err)
		}
		time.Sleep(10 * time.Millisecond) // polling a port: there is nothing to wait on
	}
}

// URI is the server's base URI, without a database.
func (s *Server) URI() string { return s.DatabaseURI("") }

// DatabaseURI is the URI of database db on the server. With TLS it asks for
// TLS; the client still needs the CA and a client certificate.
func (s *Server) DatabaseURI(db string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := url.URL{Scheme: "mongodb", Host: s.addr, Path: "/" + db}
	if s.TLS != nil {
		u.RawQuery = "tls=true"
	}
	return u.String()
}

// Addr is the server's host:port.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Stop stops the server and closes its connections; the data stays. It is
// a no-op on a stopped server.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	err := <-s.done
	s.cancel, s.done = nil, nil
	if err != nil {
		return fmt.Errorf("mongotest: server on %s: %w", s.addr, err)
	}
	return nil
}

// Restart starts a stopped server again on the same address with the same
// data.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return errors.New("mongotest: restart of a running server")
	}
	return s.start()
}

var dbSeq atomic.Int64

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_]+`)

// DatabaseName is a database name for t, unique in the process and short
// enough for every server: a counter, some random letters (two test
// processes may share a real server) and as much of the test's name as
// fits.
func DatabaseName(t testing.TB) string {
	var b [4]byte
	rand.Read(b[:])
	name := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(t.Name()), "_"), "_")
	if len(name) > 30 {
		name = name[len(name)-30:]
	}
	return fmt.Sprintf("bf%x_%d_%s", b, dbSeq.Add(1), name)
}

// writeTLSFiles writes a CA, a server certificate for 127.0.0.1 and
// localhost, a client certificate the CA signed and one another CA signed.
func writeTLSFiles(dir string) (*TLSFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, caKey, caPEM, err := newCA("backfill test CA")
	if err != nil {
		return nil, err
	}
	other, otherKey, _, err := newCA("some other CA")
	if err != nil {
		return nil, err
	}
	f := &TLSFiles{
		CA:         filepath.Join(dir, "ca.pem"),
		ClientCert: filepath.Join(dir, "client.pem"),
		OtherCert:  filepath.Join(dir, "other-client.pem"),
		serverCert: filepath.Join(dir, "server.pem"),
		serverKey:  filepath.Join(dir, "server-key.pem"),
	}
	if err := os.WriteFile(f.CA, caPEM, 0o600); err != nil {
		return nil, err
	}
	srvCert, srvKey, err := newLeaf(ca, caKey, "server", true)
	if err != nil {
		return nil, err
	}
	cliCert, cliKey, err := newLeaf(ca, caKey, "client", false)
	if err != nil {
		return nil, err
	}
	othCert, othKey, err := newLeaf(other, otherKey, "stranger", false)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		f.serverCert: srvCert,
		f.serverKey:  srvKey,
		f.ClientCert: append(cliCert, cliKey...),
		f.OtherCert:  append(othCert, othKey...),
	}
	for path, b := range files {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func newCA(name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func newLeaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, server bool) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}
