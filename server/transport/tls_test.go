package transport

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/internal/fibptest"
	"github.com/filamq/fila/server/rift/devcert"
)

// devTLS returns a server certificate for loopback from a generated CA, and a pool holding that
// CA for the clients.
func devTLS(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	bundle, err := devcert.Generate(devcert.DefaultHosts)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(bundle.Cert, bundle.Key)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle.CA)
	return cert, roots
}

// TestTLS serves FIBP over TLS with a generated CA: a client that trusts the CA completes the
// handshake and works; a plain-TCP client gets nothing it can parse and is closed.
func TestTLS(t *testing.T) {
	cert, roots := devTLS(t)
	_, _, addr, stop := serveAt(t, broker.DefaultOptions(t.TempDir()),
		Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	defer stop()

	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := &fibptest.Client{T: t, NC: nc, FR: wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)}
	c.Handshake()
	if r := c.Call(1, &fibp.CreateQueue{Name: "secure"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue over TLS: %v", r.ErrorCode)
	}

	plain := fibptest.Dial(t, addr)
	plain.SendBytes(fibp.AppendFrame(nil, 0, 0, &fibp.Handshake{ProtocolVersion: 1}))
	plain.NC.SetReadDeadline(time.Now().Add(5 * time.Second))
	if body, err := plain.FR.Next(); err == nil {
		if h, _, perr := fibp.ParseHeader(body); perr == nil && h.Opcode == fibp.OpHandshakeOk {
			t.Fatal("a plain-TCP client completed a handshake on the TLS listener")
		}
	}
}
