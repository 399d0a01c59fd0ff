// Package devcert makes a throw-away local certificate authority and a server certificate signed
// by it, so that the Rift listener (TLS 1.3 only, no plaintext) can be tried without a real PKI.
// The certificates are for development and tests only.
package devcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// File names written by Write.
const (
	CAFile   = "ca.pem"
	CertFile = "server.pem"
	KeyFile  = "server-key.pem"
)

// Bundle is a CA certificate and a server certificate and key, all PEM-encoded.
type Bundle struct {
	CA, Cert, Key []byte
}

// DefaultHosts are the names and addresses the server certificate covers.
var DefaultHosts = []string{"localhost", "127.0.0.1", "::1"}

// Generate makes a fresh CA and a server certificate for hosts (DNS names or IP addresses), valid
// for a year.
func Generate(hosts []string) (*Bundle, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "Fila Rift development CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "Fila Rift development server"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Bundle{
		CA:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// Ensure returns the paths of ca.pem, server.pem and server-key.pem in dir, generating them for
// DefaultHosts when server.pem or server-key.pem is missing (existing files are reused, so
// clients keep trusting the same CA across restarts).
func Ensure(dir string) (ca, cert, key string, err error) {
	ca, cert, key = filepath.Join(dir, CAFile), filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	if exists(cert) && exists(key) && exists(ca) {
		return ca, cert, key, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", "", err
	}
	b, err := Generate(DefaultHosts)
	if err != nil {
		return "", "", "", err
	}
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{ca, b.CA, 0o644}, {cert, b.Cert, 0o644}, {key, b.Key, 0o600}} {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return "", "", "", fmt.Errorf("devcert: %w", err)
		}
	}
	return ca, cert, key, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}
