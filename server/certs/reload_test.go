package certs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/certs"
	"github.com/filamq/fila/server/transport"
)

// pki is a CA with a server certificate written to files, and clients it issued.
type pki struct {
	ca     *certs.CA
	server certs.Pair
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	ca, err := certs.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	server, err := ca.Issue(name+" server", certs.ServerUse, certs.Loopback, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return &pki{ca: ca, server: server}
}

func (p *pki) client(t *testing.T, notBefore, notAfter time.Time) tls.Certificate {
	t.Helper()
	pair, err := p.ca.Issue("client", certs.ClientUse, nil, notBefore, notAfter)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.X509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustPair(t *testing.T, p certs.Pair) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (p *pki) roots() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.ca.PEM)
	return pool
}

// install writes p's server certificate and CA as the server's files.
func (p *pki) install(t *testing.T, f certs.Files) {
	t.Helper()
	for path, data := range map[string][]byte{f.Cert: p.server.Cert, f.Key: p.server.Key, f.ClientCA: p.ca.PEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func serve(t *testing.T, conf *tls.Config) string {
	t.Helper()
	b, err := broker.Open(broker.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := transport.New(b, transport.Options{TLS: conf})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		b.Close()
	})
	return ln.Addr().String()
}

// session is a FIBP connection over TLS that has completed its Handshake.
type session struct {
	nc net.Conn
	fr *wire.FrameReader
}

func dial(addr string, roots *x509.CertPool, client []tls.Certificate) (*session, error) {
	nc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: client})
	if err != nil {
		return nil, err
	}
	s := &session{nc: nc, fr: wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)}
	if err := s.call(0, &fibp.Handshake{ProtocolVersion: 1}, fibp.OpHandshakeOk); err != nil {
		nc.Close()
		return nil, err // TLS 1.3 reports a refused client certificate on the first read
	}
	return s, nil
}

func (s *session) call(id uint32, f fibp.Frame, want fibp.Opcode) error {
	_ = s.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.nc.Write(fibp.AppendFrame(nil, 0, id, f)); err != nil {
		return err
	}
	body, err := s.fr.Next()
	if err != nil {
		return err
	}
	if h, _, err := fibp.ParseHeader(body); err != nil || h.Opcode != want || h.RequestID != id {
		return &net.OpError{Op: "answer", Err: os.ErrInvalid}
	}
	return nil
}

// mTLS refuses a client without a certificate, with one from another CA, and with an expired
// one; SIGHUP's Reload swaps the server certificate and client CA for new connections while an
// open one keeps working.
func TestMutualTLSAndReload(t *testing.T) {
	dir := t.TempDir()
	files := certs.Files{Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server-key.pem"), ClientCA: filepath.Join(dir, "ca.pem")}
	old, renewed, rogue := newPKI(t, "old"), newPKI(t, "renewed"), newPKI(t, "rogue")
	old.install(t, files)
	r, err := certs.Load(files)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r.Config())
	now := time.Now()
	valid := []tls.Certificate{old.client(t, now.Add(-time.Hour), now.Add(time.Hour))}

	open, err := dial(addr, old.roots(), valid)
	if err != nil {
		t.Fatalf("a client with a valid certificate: %v", err)
	}
	defer open.nc.Close()
	for name, client := range map[string][]tls.Certificate{
		"no client certificate": nil,
		"another CA's":          {rogue.client(t, now.Add(-time.Hour), now.Add(time.Hour))},
		"expired":               {old.client(t, now.Add(-2*time.Hour), now.Add(-time.Hour))},
	} {
		if s, err := dial(addr, old.roots(), client); err == nil {
			s.nc.Close()
			t.Errorf("%s: the FIBP handshake completed", name)
		}
	}
	if s, err := dial(addr, rogue.roots(), valid); err == nil {
		s.nc.Close()
		t.Error("a client trusting another CA accepted the server certificate")
	}

	// A broken file keeps the loaded state.
	if err := os.WriteFile(files.Cert, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil {
		t.Fatal("a garbage certificate reloaded")
	}
	if s, err := dial(addr, old.roots(), valid); err != nil {
		t.Fatalf("after a failed reload: %v", err)
	} else {
		s.nc.Close()
	}

	renewed.install(t, files)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if c, _ := r.GetCertificate(nil); string(c.Certificate[0]) != string(mustPair(t, renewed.server).Certificate[0]) {
		t.Fatal("GetCertificate (the Rift listener's) still gives the old certificate")
	}
	if err := open.call(1, &fibp.Ping{}, fibp.OpPong); err != nil {
		t.Fatalf("the connection opened before the reload: %v", err)
	}
	fresh := []tls.Certificate{renewed.client(t, now.Add(-time.Hour), now.Add(time.Hour))}
	if s, err := dial(addr, renewed.roots(), fresh); err != nil {
		t.Fatalf("a client of the renewed CA: %v", err)
	} else {
		s.nc.Close()
	}
	if s, err := dial(addr, old.roots(), valid); err == nil {
		s.nc.Close()
		t.Fatal("the old certificate is still served after the reload")
	}
}

func TestWriteDev(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	paths, err := certs.WriteDev(dir)
	if err != nil || len(paths) != 5 {
		t.Fatalf("WriteDev: %v %v", paths, err)
	}
	j := func(name string) string { return filepath.Join(dir, name) }
	r, err := certs.Load(certs.Files{Cert: j(certs.DevServerCert), Key: j(certs.DevServerKey), ClientCA: j(certs.DevCA)})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r.Config())
	caPEM, _ := os.ReadFile(j(certs.DevCA))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	client, err := tls.LoadX509KeyPair(j(certs.DevClientCert), j(certs.DevClientKey))
	if err != nil {
		t.Fatal(err)
	}
	s, err := dial(addr, roots, []tls.Certificate{client})
	if err != nil {
		t.Fatalf("the development client certificate: %v", err)
	}
	s.nc.Close()
	if _, err := certs.WriteDev(dir); err == nil {
		t.Fatal("WriteDev overwrote existing files")
	}
}
