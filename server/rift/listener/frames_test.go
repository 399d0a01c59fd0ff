package listener_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/generated/wire"
	rt "github.com/filamq/fila/server/internal/rifttest"
	"github.com/filamq/fila/server/rift/listener"
)

// frame builds a raw frame: length prefix, opcode, body.
func frame(op byte, body ...[]byte) []byte {
	b := []byte{op}
	for _, p := range body {
		b = append(b, p...)
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func str(s string) []byte { return wire.AppendString16(nil, s) }

// Every frame-validation rule: each bad frame gets ERROR code 2 and ends its stream, and the
// connection carries on.
func TestFrameValidation(t *testing.T) {
	f := start(t, nil)
	c := rt.Connect(t, f.addr, "admin-token")
	ping := riftproto.AppendFrame(nil, &riftproto.Ping{})
	for _, tc := range []struct {
		name string
		raw  []byte
	}{
		{"length zero", []byte{0, 0, 0, 0}},
		{"length above 1,114,112", binary.BigEndian.AppendUint32(nil, riftproto.MaxFrameSize+1)},
		{"AUTH above 4,099 bytes", append(binary.BigEndian.AppendUint32(nil, 4100), 1)},
		{"AUTH on an operation stream", riftproto.AppendFrame(nil, &riftproto.Auth{Token: "admin-token"})},
		{"unknown opcode", frame(99)},
		{"opcode 0", frame(0)},
		{"server-only opcode from a client", riftproto.AppendFrame(nil, &riftproto.Message{Subject: "a"})},
		{"bad UTF-8 in a subject", frame(byte(riftproto.OpPublish), str("a.\xff"), str(""))},
		{"bad UTF-8 in a queue group", frame(byte(riftproto.OpSubscribe), str("a"), str("\xc3("))},
		{"invalid subject", frame(byte(riftproto.OpPublish), str("a..b"), str(""))},
		{"wildcard in a publish subject", frame(byte(riftproto.OpPublish), str("a.*"), str(""))},
		{"invalid subscription pattern", frame(byte(riftproto.OpSubscribe), str("a.>.b"), str(""))},
		{"empty subject", frame(byte(riftproto.OpPublishAck), str(""), str(""))},
		{"subject above 1,024 bytes", frame(byte(riftproto.OpPublish), str(strings.Repeat("a", 1025)), str(""))},
		{"string above 4,096 bytes", frame(byte(riftproto.OpSubscribe), str("a"), str(strings.Repeat("q", 4097)))},
		{"truncated field", frame(byte(riftproto.OpPublish), []byte{0, 10, 'a'})},
		{"trailing bytes after PING", frame(byte(riftproto.OpPing), []byte{0})},
		{"trailing bytes after SUBSCRIBE", frame(byte(riftproto.OpSubscribe), str("a"), str(""), []byte{1})},
		{"trailing bytes after ACK", frame(byte(riftproto.OpAck), str("events"), str("c"), make([]byte, 9))},
		{"truncated CONSUMER_FETCH", frame(byte(riftproto.OpConsumerFetch), str("events"), str("c"), []byte{0, 1})},
		{"bad frame after good ones", append(append([]byte(nil), ping...), 0, 0, 0, 0)},
		{"stream ends inside a frame", []byte{0, 0, 0, 9, byte(riftproto.OpPublish)}},
		{"payload above 1 MiB", frame(byte(riftproto.OpPublish), str("a"), str(""), make([]byte, 1<<20+1))},
		{"REQUEST to a wildcard subject", frame(byte(riftproto.OpRequest), []byte{0, 0, 0, 10}, str("a.>"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := rt.Open(t, c)
			s.Raw(t, tc.raw)
			if tc.name == "stream ends inside a frame" {
				s.S.Close()
			}
			if strings.HasPrefix(tc.name, "bad frame after") {
				rt.Expect[*riftproto.Ok](t, s)
			}
			rt.ExpectError(t, s, riftproto.CodeOperation)
		})
	}
	// The connection is still usable.
	s := rt.Open(t, c)
	s.Send(t, &riftproto.Ping{})
	rt.Expect[*riftproto.Ok](t, s)
}

func TestPublisherStreamTakesOnlyPublishFrames(t *testing.T) {
	f := start(t, nil)
	c := rt.Connect(t, f.addr, "admin-token")
	s := rt.Open(t, c)
	s.Send(t, &riftproto.Publish{Subject: "a"}, &riftproto.Subscribe{Pattern: "a"})
	rt.ExpectError(t, s, riftproto.CodeOperation)
	// A failed PUBLISH closes its stream with ERROR; later frames are not served.
	s = rt.Open(t, c)
	s.Send(t, &riftproto.Publish{Subject: "rift.events.x"}, &riftproto.Ping{})
	rt.ExpectError(t, s, riftproto.CodePermission)
}

// A delivery stream takes no frames: one sent right behind SUBSCRIBE (in the same packet, read
// together with it) ends the subscription just like one sent later.
func TestFramesAfterSubscribeEndTheSubscription(t *testing.T) {
	f := start(t, nil)
	c := rt.Connect(t, f.addr, "admin-token")
	for _, together := range []bool{true, false} {
		s := rt.Open(t, c)
		if together {
			s.Send(t, &riftproto.Subscribe{Pattern: "a"}, &riftproto.Ping{})
		} else {
			s.Send(t, &riftproto.Subscribe{Pattern: "a"})
			rt.Expect[*riftproto.Ok](t, s)
			s.Send(t, &riftproto.Ping{})
		}
		fr, err := s.Next()
		if _, ok := fr.(*riftproto.Ok); ok && together { // the reset may also overtake the OK
			fr, err = s.Next()
		}
		var se *quic.StreamError
		if !errors.As(err, &se) || se.ErrorCode != listener.ResetCancelled {
			t.Fatalf("together=%v: got %T %v, want the stream reset", together, fr, err)
		}
	}
}

// closeWait bounds how long a test waits for the server to close a connection: generous, as a
// loaded machine is slow, but a close that never comes fails the test instead of hanging it.
const closeWait = time.Minute

// expectClosed waits for the connection to be closed by the server with code.
func expectClosed(t *testing.T, c *quic.Conn, code quic.ApplicationErrorCode) {
	t.Helper()
	select {
	case <-c.Context().Done():
	case <-time.After(closeWait):
		t.Fatalf("connection still open after %v, want it closed by the server with application error %d", closeWait, code)
	}
	var ae *quic.ApplicationError
	if err := contextCause(c); !errors.As(err, &ae) || ae.ErrorCode != code || !ae.Remote {
		t.Fatalf("connection closed with %v, want application error %d from the server", err, code)
	}
}

func TestAuthenticationFailuresCloseTheConnection(t *testing.T) {
	f := start(t, func(o *listener.Options) { o.AuthTimeout = 300 * time.Millisecond })
	events, err := f.svc.Bus.Subscribe("rift.events.auth.failed", "")
	if err != nil {
		t.Fatal(err)
	}
	const refused = "authentication failed"
	for _, tc := range []struct {
		name   string
		raw    []byte
		reason string
	}{
		{"wrong token", riftproto.AppendFrame(nil, &riftproto.Auth{Token: "nope"}), refused},
		{"empty token", riftproto.AppendFrame(nil, &riftproto.Auth{Token: ""}), refused},
		{"not AUTH first", riftproto.AppendFrame(nil, &riftproto.Ping{}), refused},
		{"AUTH above 4,099 bytes", append(binary.BigEndian.AppendUint32(nil, 4100), 1, 0x0f, 0xff), refused},
		{"trailing bytes after the token", frame(byte(riftproto.OpAuth), str("admin-token"), []byte{0}), refused},
		{"nothing within the deadline", nil, "authentication failed: no AUTH frame within 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := rt.Dial(t, f.addr, rt.ClientTLS(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			s := rt.Open(t, c)
			if tc.raw != nil {
				s.Raw(t, tc.raw)
			}
			expectClosed(t, c, listener.CloseAuthFailed)
			var ae *quic.ApplicationError
			if errors.As(contextCause(c), &ae) && ae.ErrorMessage != tc.reason {
				t.Errorf("closed with reason %q, want %q", ae.ErrorMessage, tc.reason)
			}
			if _, err := events.Next(t.Context()); err != nil {
				t.Fatalf("no rift.events.auth.failed: %v", err)
			}
		})
	}
}

func TestTLSRequirements(t *testing.T) {
	f := start(t, nil)
	for _, tc := range []struct {
		name string
		tune func(*testing.T) *tlsConf
	}{
		{"wrong ALPN", func(t *testing.T) *tlsConf { c := rt.ClientTLS(t); c.NextProtos = []string{"h3"}; return c }},
		{"TLS 1.2 only", func(t *testing.T) *tlsConf { c := rt.ClientTLS(t); c.MaxVersion = tlsV12; c.MinVersion = 0; return c }},
		{"untrusted server certificate", func(t *testing.T) *tlsConf { c := rt.ClientTLS(t); c.RootCAs = nil; return c }},
		{"wrong server name", func(t *testing.T) *tlsConf { c := rt.ClientTLS(t); c.ServerName = "example.org"; return c }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := rt.Dial(t, f.addr, tc.tune(t), nil); err == nil {
				t.Fatal("handshake succeeded")
			}
		})
	}
}
