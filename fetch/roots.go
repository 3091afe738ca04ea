package fetch

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// LoadRoots returns the certificate authorities a crawl trusts: the
// system's, and those of the PEM file path (a private CA, a company's
// TLS-inspecting proxy), for Config.RootCAs. A file without a
// certificate, or with one that does not parse, is an error naming it.
func LoadRoots(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fetch: CA file: %w", err)
	}
	certs, err := parsePEMCerts(data)
	if err != nil {
		return nil, fmt.Errorf("fetch: CA file %s: %w", path, err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool() // no system roots: the file's alone
	}
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// parsePEMCerts parses every CERTIFICATE block of b.
func parsePEMCerts(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for n := 1; ; n++ {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("no PEM certificate in it")
	}
	return certs, nil
}
