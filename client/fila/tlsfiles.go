package fila

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSFiles names the PEM files of a TLS connection; Config builds Options.TLS from them.
type TLSFiles struct {
	// CA is the CA bundle the server's certificate must chain to (empty: the system roots).
	CA string
	// Cert and Key are the client certificate and its key, for a server that requires mTLS
	// (both or neither).
	Cert, Key string
	// ServerName is the name the server's certificate must carry (empty: the host of the
	// address dialled).
	ServerName string
}

// Config loads the files into a TLS 1.2+ client configuration.
func (f TLSFiles) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("fila: CA file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("fila: no PEM certificate in %s", f.CA)
		}
	}
	switch {
	case (f.Cert == "") != (f.Key == ""):
		return nil, errors.New("fila: a client certificate needs both its certificate and its key file")
	case f.Cert != "":
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("fila: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
