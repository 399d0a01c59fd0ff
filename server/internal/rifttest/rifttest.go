// Package rifttest is a raw Rift client for the server's tests: real QUIC on loopback, frames
// written and read one by one (or as arbitrary bytes), no retries and no conveniences that could
// hide a server bug.
package rifttest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/rift/devcert"
)

// ALPN is the Rift application protocol.
const ALPN = riftproto.ALPN

var (
	certOnce sync.Once
	bundle   *devcert.Bundle
	certErr  error
)

// Certs returns a development CA and server certificate shared by the test binary.
func Certs(t testing.TB) *devcert.Bundle {
	certOnce.Do(func() { bundle, certErr = devcert.Generate(devcert.DefaultHosts) })
	if certErr != nil {
		t.Fatal(certErr)
	}
	return bundle
}

// ServerTLS returns a server TLS config holding the test certificate.
func ServerTLS(t testing.TB) *tls.Config {
	b := Certs(t)
	cert, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}}
}

// ClientTLS returns a client TLS config trusting only the test CA, for server name localhost.
func ClientTLS(t testing.TB) *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(Certs(t).CA)
	return &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{ALPN}, MinVersion: tls.VersionTLS13}
}

// SetupWait bounds how long Dial waits for a handshake and Open for a stream: generous, as a
// loaded machine is slow, but one that never comes fails the test instead of hanging it.
const SetupWait = time.Minute

// Dial opens a QUIC connection without authenticating.
func Dial(t testing.TB, addr string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), SetupWait)
	defer cancel()
	if qc == nil {
		qc = &quic.Config{InitialPacketSize: 1452} // loopback: quic-go's largest packets at once
	}
	c, err := quic.DialAddr(ctx, addr, tc, qc)
	if err == nil {
		t.Cleanup(func() { c.CloseWithError(0, "") })
	}
	return c, err
}

// Connect dials and authenticates with token, failing the test on error.
func Connect(t testing.TB, addr, token string) *quic.Conn {
	t.Helper()
	c, err := Dial(t, addr, ClientTLS(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := Auth(c, token); err != nil {
		t.Fatalf("auth: %v", err)
	}
	return c
}

// Auth sends AUTH on the first stream and waits for OK and the end of that stream.
func Auth(c *quic.Conn, token string) error {
	s, err := c.OpenStream()
	if err != nil {
		return err
	}
	if _, err := s.Write(riftproto.AppendFrame(nil, &riftproto.Auth{Token: token})); err != nil {
		return err
	}
	s.Close()
	st := &Stream{S: s, fr: newReader(s)}
	f, err := st.Next()
	if err != nil {
		return err
	}
	if _, ok := f.(*riftproto.Ok); !ok {
		return fmt.Errorf("AUTH answered %T %+v", f, f)
	}
	if _, err := st.Next(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("auth stream not finished after OK: %v", err)
	}
	return nil
}

// Stream is one operation stream.
type Stream struct {
	S  *quic.Stream
	fr *wire.FrameReader
}

// newReader returns a reader with the protocol's limits and a small buffer, so that opening a
// stream per call does not cost a 64 KiB allocation (a delivery stream gets a large one).
func newReader(s *quic.Stream) *wire.FrameReader { return newReaderSize(s, 1<<10) }

func newReaderSize(s *quic.Stream, size int) *wire.FrameReader {
	return wire.NewFrameReaderSize(s, riftproto.MinFrameSize, riftproto.MaxFrameSize, size)
}

// Open opens a new operation stream.
func Open(t testing.TB, c *quic.Conn) *Stream {
	t.Helper()
	return open(t, c, newReader)
}

func open(t testing.TB, c *quic.Conn, reader func(*quic.Stream) *wire.FrameReader) *Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), SetupWait)
	defer cancel()
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &Stream{S: s, fr: reader(s)}
}

// Send writes frames.
func (s *Stream) Send(t testing.TB, frames ...riftproto.Frame) {
	t.Helper()
	var b []byte
	for _, f := range frames {
		b = riftproto.AppendFrame(b, f)
	}
	s.Raw(t, b)
}

// Raw writes bytes as they are.
func (s *Stream) Raw(t testing.TB, b []byte) {
	t.Helper()
	s.S.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := s.S.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// Next reads and decodes the next frame. The frame's byte fields are copied.
func (s *Stream) Next() (riftproto.Frame, error) {
	s.S.SetReadDeadline(time.Now().Add(20 * time.Second))
	body, err := s.fr.Next()
	if err != nil {
		return nil, err
	}
	f, err := riftproto.Decode(riftproto.Opcode(body[0]), append([]byte(nil), body[1:]...))
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Expect reads the next frame and fails the test unless it has the type of want.
func Expect[F riftproto.Frame](t testing.TB, s *Stream) F {
	t.Helper()
	f, err := s.Next()
	if err != nil {
		t.Fatalf("want %T, got error %v", *new(F), err)
	}
	got, ok := f.(F)
	if !ok {
		t.Fatalf("want %T, got %T %+v", *new(F), f, f)
	}
	return got
}

// ExpectError reads an ERROR with code and then the end of the stream.
func ExpectError(t testing.TB, s *Stream, code riftproto.ErrorCode) *riftproto.Error {
	t.Helper()
	e := Expect[*riftproto.Error](t, s)
	if e.Code != code {
		t.Fatalf("ERROR code %v (%q), want %v", e.Code, e.Message, code)
	}
	if f, err := s.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after ERROR: %T %v, want the end of the stream", f, err)
	}
	return e
}

// Subscribe opens a subscription stream and waits for its OK.
func Subscribe(t testing.TB, c *quic.Conn, pattern, queue string) *Stream {
	t.Helper()
	s := open(t, c, func(s *quic.Stream) *wire.FrameReader { return newReaderSize(s, 64<<10) })
	s.Send(t, &riftproto.Subscribe{Pattern: pattern, Queue: queue})
	Expect[*riftproto.Ok](t, s)
	return s
}
