package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority that issues certificates (development and tests only).
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	PEM  []byte // its certificate
}

// Pair is an issued certificate and its private key, PEM-encoded.
type Pair struct {
	Cert, Key []byte
}

// Use says what an issued certificate is for.
type Use uint8

const (
	ServerUse Use = iota + 1
	ClientUse
)

// NewCA makes a CA valid for a year.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(1, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue signs a certificate named name for use, valid from notBefore to notAfter; a server
// certificate covers hosts (DNS names or IP addresses).
func (ca *CA) Issue(name string, use Use, hosts []string, notBefore, notAfter time.Time) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if use == ClientUse {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// Loopback are the names a development server certificate covers.
var Loopback = []string{"localhost", "127.0.0.1", "::1"}

// Files written by WriteDev, in its directory.
const (
	DevCA         = "ca.pem"
	DevServerCert = "server.pem"
	DevServerKey  = "server-key.pem"
	DevClientCert = "client.pem"
	DevClientKey  = "client-key.pem"
)

// WriteDev writes a new local CA, a server certificate for Loopback and a client certificate,
// each valid for a year, into dir (created if needed); it refuses to overwrite existing files.
// It returns the paths written.
func WriteDev(dir string) ([]string, error) {
	ca, err := NewCA("Fila development CA")
	if err != nil {
		return nil, err
	}
	now := time.Now()
	server, err := ca.Issue("Fila development server", ServerUse, Loopback, now.Add(-time.Hour), now.AddDate(1, 0, 0))
	if err != nil {
		return nil, err
	}
	client, err := ca.Issue("Fila development client", ClientUse, nil, now.Add(-time.Hour), now.AddDate(1, 0, 0))
	if err != nil {
		return nil, err
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{DevCA, ca.PEM, 0o644}, {DevServerCert, server.Cert, 0o644}, {DevServerKey, server.Key, 0o600},
		{DevClientCert, client.Cert, 0o644}, {DevClientKey, client.Key, 0o600},
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f.name)); err == nil {
			return nil, fmt.Errorf("%s already exists; remove it or choose another directory", filepath.Join(dir, f.name))
		}
	}
	var paths []string
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}
