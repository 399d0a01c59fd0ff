package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/config"
	"github.com/filamq/fila/server/rift/devcert"
	"github.com/filamq/fila/server/transport"
)

// clientPKI is a CA and one client certificate it signed.
type clientPKI struct {
	caPEM []byte
	cert  tls.Certificate
}

func newClientPKI(t *testing.T, name string) clientPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return clientPKI{
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		cert:  tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
	}
}

// The tls_client_ca setting requires a client certificate signed by that CA: with one, FIBP
// works; without one, or with one from another CA, the connection never completes a handshake.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	server, err := devcert.Generate(devcert.DefaultHosts)
	if err != nil {
		t.Fatal(err)
	}
	clients, rogue := newClientPKI(t, "trusted"), newClientPKI(t, "rogue")
	cfg := config.Default()
	cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"), filepath.Join(dir, "clients.pem")
	for path, data := range map[string][]byte{cfg.TLSCert: server.Cert, cfg.TLSKey: server.Key, cfg.TLSClientCA: clients.caPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reloader, err := loadTLS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conf := reloader.Config()
	b, err := broker.Open(broker.DefaultOptions(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := transport.New(b, transport.Options{TLS: conf})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	defer s.Shutdown(context.Background())

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(server.CA)
	handshake := func(certs []tls.Certificate) error {
		nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(),
			&tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: certs})
		if err != nil {
			return err
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Write(fibp.AppendFrame(nil, 0, 0, &fibp.Handshake{ProtocolVersion: 1})); err != nil {
			return err
		}
		body, err := wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize).Next()
		if err != nil {
			return err // TLS 1.3 reports a refused client certificate on the first read
		}
		if h, _, err := fibp.ParseHeader(body); err != nil || h.Opcode != fibp.OpHandshakeOk {
			t.Fatalf("answer to Handshake: %v %v", h.Opcode, err)
		}
		return nil
	}
	if err := handshake([]tls.Certificate{clients.cert}); err != nil {
		t.Fatalf("a client with a trusted certificate: %v", err)
	}
	if err := handshake(nil); err == nil {
		t.Fatal("a client without a certificate completed a FIBP handshake")
	}
	if err := handshake([]tls.Certificate{rogue.cert}); err == nil {
		t.Fatal("a client with a certificate from another CA completed a FIBP handshake")
	}

	// A client CA file without certificates is refused at start-up, with the file named.
	if err := os.WriteFile(cfg.TLSClientCA, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadTLS(cfg); err == nil || !strings.Contains(err.Error(), cfg.TLSClientCA) {
		t.Fatalf("loading an empty client CA: %v", err)
	}
}
