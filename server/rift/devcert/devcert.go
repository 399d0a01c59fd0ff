// Package devcert makes a throw-away local certificate authority and a server certificate signed
// by it, so that the Rift listener (TLS 1.3 only, no plaintext) can be tried without a real PKI.
// The certificates are for development and tests only.
package devcert

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/filamq/fila/server/certs"
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
var DefaultHosts = certs.Loopback

// Generate makes a fresh CA and a server certificate for hosts (DNS names or IP addresses), valid
// for a year.
func Generate(hosts []string) (*Bundle, error) {
	ca, err := certs.NewCA("Fila Rift development CA")
	if err != nil {
		return nil, err
	}
	now := time.Now()
	server, err := ca.Issue("Fila Rift development server", certs.ServerUse, hosts, now.Add(-time.Hour), now.AddDate(1, 0, 0))
	if err != nil {
		return nil, err
	}
	return &Bundle{CA: ca.PEM, Cert: server.Cert, Key: server.Key}, nil
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
