package provisioning

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"backfill/wire"
)

// The keys directory holds every secret of a cluster, made on the first
// render and kept after, so that rendering again gives the same files:
//
//	HOST.key, HOST.pub     a crawl host's CURVE key pair (wire.EnsureKeys)
//	mongodb/ca.pem, ca.key the cluster's own CA for MongoDB's TLS
//	mongodb/HOST.pem       a host's certificate with its key: the MongoDB
//	                       host's server certificate, a client's certificate
//	mongodb/password       the MongoDB user's password
//	HOST.luks              with encryption = "luks": the key of a host's
//	                       LUKS data volume (luksKeyBytes random bytes)
//
// The CA's key never leaves this directory, nor does a LUKS key, which
// the operator sends to its host over SSH when the volume is to be opened
// (backfill-unlock reads it on standard input); each other secret goes
// only to the host it belongs to.
const (
	mongoKeysDir  = "mongodb"
	caCertFile    = "ca.pem"
	caKeyFile     = "ca.key"
	passwordFile  = "password"
	certLifetime  = 10 * 365 * 24 * time.Hour
	passwordBytes = 24
	luksKeyExt    = ".luks"
	luksKeyBytes  = 64
)

// secrets are a cluster's keys, loaded or made.
type secrets struct {
	curve    map[string]wire.Keys // by host
	caPEM    []byte
	certs    map[string][]byte // by host: certificate then key, PEM
	password string
}

// loadSecrets loads the cluster's secrets from its keys directory, making
// the missing ones.
func loadSecrets(c *cluster) (*secrets, error) {
	dir := c.inv.KeysDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("provisioning: keys: %w", err)
	}
	s := &secrets{curve: map[string]wire.Keys{}, certs: map[string][]byte{}}
	for _, n := range c.nodes {
		if !n.crawls() {
			continue
		}
		if !wire.HasCurve() {
			return nil, wire.ErrNoCurve
		}
		k, _, err := wire.EnsureKeys(filepath.Join(dir, n.Name))
		if err != nil {
			return nil, fmt.Errorf("provisioning: keys of %s: %w", n.Name, err)
		}
		s.curve[n.Name] = k
	}
	if c.inv.Encryption == EncryptLUKS {
		for _, n := range c.nodes {
			if _, err := ensureFile(luksKeyPath(c.inv, n), func() ([]byte, error) {
				b := make([]byte, luksKeyBytes)
				_, err := rand.Read(b)
				return b, err
			}); err != nil {
				return nil, err
			}
		}
	}
	if c.mongo == nil {
		return s, nil
	}
	mdir := filepath.Join(dir, mongoKeysDir)
	if err := os.MkdirAll(mdir, 0o700); err != nil {
		return nil, fmt.Errorf("provisioning: keys: %w", err)
	}
	pw, err := ensureFile(filepath.Join(mdir, passwordFile), func() ([]byte, error) {
		b := make([]byte, passwordBytes)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		return []byte(base64.RawURLEncoding.EncodeToString(b) + "\n"), nil
	})
	if err != nil {
		return nil, err
	}
	s.password = strings.TrimSpace(string(pw))
	if !c.usesTLS() {
		return s, nil
	}
	ca, caKey, caPEM, err := ensureCA(mdir, c.inv.Name)
	if err != nil {
		return nil, err
	}
	s.caPEM = caPEM
	for _, n := range c.nodes {
		if n != c.mongo && !n.crawls() {
			continue
		}
		var names []string
		if n == c.mongo {
			// The server answers at its cluster address, its public
			// one and, for the local setup, on loopback.
			names = slices.Compact([]string{n.addr, n.Address, "127.0.0.1", "localhost"})
		}
		pemBytes, err := ensureCert(filepath.Join(mdir, n.Name+".pem"), ca, caKey, n.Name, names)
		if err != nil {
			return nil, err
		}
		s.certs[n.Name] = pemBytes
	}
	return s, nil
}

// luksKeyPath is where the key of node n's LUKS data volume is kept, in
// the cluster's keys directory.
func luksKeyPath(inv *Inventory, n *node) string {
	return filepath.Join(inv.KeysDir(), n.Name+luksKeyExt)
}

// ensureFile reads path, or writes it (mode 0600) with what make returns
// when it does not exist.
func ensureFile(path string, make func() ([]byte, error)) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("provisioning: keys: %w", err)
	}
	if b, err = make(); err != nil {
		return nil, fmt.Errorf("provisioning: keys: %s: %w", path, err)
	}
	if err := writeSecret(path, b); err != nil {
		return nil, err
	}
	return b, nil
}

// writeSecret writes a secret file, readable by its owner only.
func writeSecret(path string, b []byte) error {
	return writeOpen(path, b, os.O_TRUNC, 0o600)
}

// writeOpen writes b to path, opened with flag (besides write and create)
// and mode.
func writeOpen(path string, b []byte, flag int, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|flag, mode)
	if err != nil {
		return fmt.Errorf("provisioning: %w", err)
	}
	_, err = f.Write(b)
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err != nil {
		return fmt.Errorf("provisioning: %s: %w", path, err)
	}
	return nil
}

// ensureCA loads or makes the cluster's MongoDB CA.
func ensureCA(dir, cluster string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	certPath, keyPath := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	certPEM, err1 := os.ReadFile(certPath)
	keyPEM, err2 := os.ReadFile(keyPath)
	if err1 == nil && err2 == nil {
		cert, key, err := parsePair(certPEM, keyPEM)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("provisioning: keys: %s: %w", certPath, err)
		}
		return cert, key, certPEM, nil
	}
	if !errors.Is(err1, fs.ErrNotExist) || !errors.Is(err2, fs.ErrNotExist) {
		return nil, nil, nil, fmt.Errorf("provisioning: keys: the MongoDB CA is half there (%s, %s): remove both to make a new CA", certPath, keyPath)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "backfill " + cluster + " MongoDB CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certLifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := writeSecret(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})); err != nil {
		return nil, nil, nil, err
	}
	if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
		return nil, nil, nil, fmt.Errorf("provisioning: keys: %w", err)
	}
	return cert, key, certPEM, nil
}

// ensureCert loads the certificate and key at path, or makes them: a
// server certificate for names when there are any, else a client one. A
// kept certificate that another CA signed, or whose names differ (the
// host's address changed), is made again.
func ensureCert(path string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, names []string) ([]byte, error) {
	if b, err := os.ReadFile(path); err == nil {
		if cert, _, err := parsePair(b, b); err == nil && cert.CheckSignatureFrom(ca) == nil && slices.Equal(certNames(cert), sortedNames(names)) {
			return b, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("provisioning: keys: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(names) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		for _, n := range names {
			if ip := net.ParseIP(n); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, n)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	b := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})...)
	if err := writeSecret(path, b); err != nil {
		return nil, err
	}
	return b, nil
}

// certNames are a certificate's subject alternative names, sorted.
func certNames(c *x509.Certificate) []string {
	var n []string
	for _, ip := range c.IPAddresses {
		n = append(n, ip.String())
	}
	return sortedNames(append(n, c.DNSNames...))
}

func sortedNames(n []string) []string {
	n = slices.Clone(n)
	slices.Sort(n)
	return slices.Compact(n)
}

// parsePair reads a certificate and an EC key from PEM.
func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, kb := firstPEM(certPEM, "CERTIFICATE"), firstPEM(keyPEM, "EC PRIVATE KEY")
	if cb == nil || kb == nil {
		return nil, nil, errors.New("want a PEM certificate and an EC private key")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, nil, errors.New("the key does not belong to the certificate")
	}
	return cert, key, nil
}

// firstPEM is the first block of type typ in b.
func firstPEM(b []byte, typ string) *pem.Block {
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil || blk.Type == typ {
			return blk
		}
	}
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}
