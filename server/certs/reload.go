package certs

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"
)

// Files names a server certificate, its key and, for mTLS, the CA bundle that client
// certificates must chain to (empty: no client certificates).
type Files struct {
	Cert, Key, ClientCA string
}

// Reloader is the TLS configuration of a listener whose certificate files can be reloaded.
type Reloader struct {
	files Files
	cur   atomic.Pointer[tls.Config]
}

// Load reads the files; the error names the file at fault.
func Load(f Files) (*Reloader, error) {
	r := &Reloader{files: f}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the files again. On failure the configuration in use stays and the error says
// why; connections already open are never affected.
func (r *Reloader) Reload() error {
	conf, err := load(r.files)
	if err != nil {
		return err
	}
	r.cur.Store(conf)
	return nil
}

// Config is the listener's configuration: every new connection takes the latest loaded state.
func (r *Reloader) Config() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return r.cur.Load(), nil },
	}
}

// GetCertificate returns the latest loaded server certificate, for a tls.Config whose other
// settings are fixed elsewhere (the Rift listener forces TLS 1.3 and its ALPN).
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return &r.cur.Load().Certificates[0], nil
}

func load(f Files) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("tls: %s and %s: %w", f.Cert, f.Key, err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.ClientCA != "" {
		pem, err := os.ReadFile(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("tls client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls client CA %s: no certificates found", f.ClientCA)
		}
		conf.ClientCAs, conf.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return conf, nil
}
