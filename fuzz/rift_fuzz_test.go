package fuzz

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/rift/auth"
	"github.com/filamq/fila/server/rift/devcert"
	"github.com/filamq/fila/server/rift/listener"
	"github.com/filamq/fila/server/rift/service"
	"github.com/filamq/fila/server/rift/stream"
)

// The Rift targets drive a real QUIC listener: arbitrary bytes as an operation stream of an
// authenticated connection, and as the first (AUTH) stream of a new connection. The server must
// not crash, and must go on answering a PING on a fresh stream afterwards.

const riftToken = "fuzz-token"

var (
	riftOnce sync.Once
	riftAddr string
	riftTLS  *tls.Config
	riftErr  error
)

// liveRift starts one Rift listener for the whole fuzzing process, with a memory stream the
// inputs can reach.
func liveRift(f *testing.F) string {
	riftOnce.Do(func() { riftAddr, riftTLS, riftErr = startRift() })
	if riftErr != nil {
		f.Fatal(riftErr)
	}
	return riftAddr
}

func startRift() (string, *tls.Config, error) {
	dir, err := os.MkdirTemp(scratch, "rift-")
	if err != nil {
		return "", nil, err
	}
	bundle, err := devcert.Generate(devcert.DefaultHosts)
	if err != nil {
		return "", nil, err
	}
	cert, err := tls.X509KeyPair(bundle.Cert, bundle.Key)
	if err != nil {
		return "", nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := service.Open(service.Options{
		Identities: []auth.Config{{Name: "fuzz", Token: riftToken, Publish: []string{">"}, Subscribe: []string{">"}, Control: true}},
		Streams:    []stream.Config{{Name: "s", Subjects: []string{"s.>"}, Durability: stream.Memory, MaxMsgs: 100}},
		StreamDir:  dir, Logger: quiet,
	})
	if err != nil {
		return "", nil, err
	}
	srv, err := listener.Listen(svc, listener.Options{Addr: "127.0.0.1:0", TLS: &tls.Config{Certificates: []tls.Certificate{cert}},
		AuthTimeout: safetyNet, FrameTimeout: 200 * time.Millisecond, Logger: quiet})
	if err != nil {
		return "", nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle.CA)
	client := &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"rift-messaging/1"}, MinVersion: tls.VersionTLS13}
	return srv.Addr().String(), client, nil
}

func dialRift(t *testing.T, addr string) *quic.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	c, err := quic.DialAddr(ctx, addr, riftTLS, &quic.Config{InitialPacketSize: 1452})
	if err != nil {
		t.Fatalf("the Rift listener stopped accepting connections: %v", err)
	}
	return c
}

// authed opens a connection and authenticates it.
func authed(t *testing.T, addr string) *quic.Conn {
	c := dialRift(t, addr)
	if got := exchange(c, riftproto.AppendFrame(nil, &riftproto.Auth{Token: riftToken}), safetyNet); !isOk(got) {
		t.Fatalf("AUTH answered %x", got)
	}
	return c
}

// exchange writes input on a new stream, finishes the sending side and returns what the server
// sends back within wait; then it abandons the stream.
func exchange(c *quic.Conn, input []byte, wait time.Duration) []byte {
	s, err := c.OpenStream()
	if err != nil {
		return nil
	}
	defer s.CancelWrite(0)
	defer s.CancelRead(0)
	s.SetDeadline(time.Now().Add(wait))
	s.Write(input)
	s.Close()
	got, _ := io.ReadAll(io.LimitReader(s, 1<<20))
	return got
}

func isOk(b []byte) bool {
	return len(b) >= riftproto.LengthSize+1 && riftproto.Opcode(b[riftproto.LengthSize]) == riftproto.OpOk
}

// riftAlive checks that a new connection still authenticates and gets OK for a PING.
func riftAlive(t *testing.T, addr string) {
	c := authed(t, addr)
	defer c.CloseWithError(0, "")
	if got := exchange(c, riftproto.AppendFrame(nil, &riftproto.Ping{}), safetyNet); !isOk(got) {
		t.Fatalf("PING after the input answered %x", got)
	}
}

func riftSeeds(f *testing.F) {
	frames := []riftproto.Frame{
		&riftproto.Publish{Subject: "a.b", Payload: []byte("x")},
		&riftproto.PublishAck{Subject: "a.b", Reply: "r", Payload: []byte("y")},
		&riftproto.Ping{},
		&riftproto.Subscribe{Pattern: "a.*", Queue: "g"},
		&riftproto.Request{Subject: "rift.control.status", TimeoutMs: 50},
		&riftproto.StreamPublish{Stream: "s", Subject: "s.1", Payload: []byte("z")},
		&riftproto.ConsumerOpen{Stream: "s", Name: "c", Filter: "s.>", AckWaitMs: 1000, MaxAckPending: 10},
		&riftproto.ConsumerFetch{Stream: "s", Name: "c", Limit: 2},
		&riftproto.Ack{Stream: "s", Name: "c", Sequence: 1},
		&riftproto.Auth{Token: riftToken},
	}
	var all []byte
	for _, fr := range frames {
		one := riftproto.AppendFrame(nil, fr)
		f.Add(one)
		all = append(all, one...)
	}
	f.Add(all)
	f.Add(append(riftproto.AppendFrame(nil, frames[0]), riftproto.AppendFrame(nil, frames[3])...))
	f.Add(wire.AppendU32(nil, 1<<30))
	f.Add([]byte{0, 0, 0, 1, 0xff})
}

// FuzzRiftStream sends arbitrary bytes as one operation stream of an authenticated connection;
// what the stream answers must be frames of the spec with its error codes (answers_test.go).
func FuzzRiftStream(f *testing.F) {
	addr := liveRift(f)
	riftSeeds(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		c := authed(t, addr)
		got := exchange(c, input, 100*time.Millisecond)
		c.CloseWithError(0, "")
		if err := checkRiftAnswers(got); err != nil {
			t.Fatalf("%v (answers %x)", err, got)
		}
		riftAlive(t, addr)
	})
}

// FuzzRiftAuth sends arbitrary bytes as the first stream of a new connection, where only AUTH
// is valid.
var validAuth = riftproto.AppendFrame(nil, &riftproto.Auth{Token: riftToken})

func FuzzRiftAuth(f *testing.F) {
	addr := liveRift(f)
	riftSeeds(f)
	f.Add(riftproto.AppendFrame(nil, &riftproto.Auth{Token: "wrong"}))
	f.Fuzz(func(t *testing.T, input []byte) {
		c := dialRift(t, addr)
		got := exchange(c, input, 100*time.Millisecond)
		if isOk(got) && !bytes.HasPrefix(input, validAuth) {
			t.Fatalf("AUTH stream %x was answered OK without the identity's token", input)
		}
		if err := checkRiftAnswers(got); err != nil {
			t.Fatalf("%v (answers %x)", err, got)
		}
		c.CloseWithError(0, "")
		riftAlive(t, addr)
	})
}
