package e2e

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// rawHandshake sends a Handshake with the given protocol version on a new connection and returns
// the decoded answer (a *fibp.HandshakeOk or a *fibp.Error) and the connection.
func rawHandshake(t *testing.T, addr string, version uint16) (fibp.Frame, net.Conn, *wire.FrameReader) {
	t.Helper()
	return rawHandshakeCaps(t, addr, version, fibp.CapCreditFlowControl)
}

// rawHandshakeCaps is rawHandshake advertising the client capabilities caps.
func rawHandshakeCaps(t *testing.T, addr string, version uint16, caps fibp.Capabilities) (fibp.Frame, net.Conn, *wire.FrameReader) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, waitFor)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(waitFor))
	hello := &fibp.Handshake{ProtocolVersion: version, ClientCapabilities: caps}
	if apiKey != "" && addr == sharedAddr {
		hello.APIKey = wire.Some(apiKey)
	}
	if _, err := nc.Write(fibp.AppendFrame(nil, 0, 0, hello)); err != nil {
		t.Fatal(err)
	}
	fr := wire.NewFrameReader(nc, fibp.MinFrameSize, fibp.MaxFrameSize)
	return readFrame(t, fr), nc, fr
}

// readFrame reads and decodes one server frame.
func readFrame(t *testing.T, fr *wire.FrameReader) fibp.Frame {
	t.Helper()
	raw, err := fr.Next()
	if err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	h, body, err := fibp.ParseHeader(raw)
	if err != nil {
		t.Fatal(err)
	}
	switch h.Opcode {
	case fibp.OpHandshakeOk, fibp.OpError, fibp.OpPong:
	default:
		t.Fatalf("unexpected frame %v (request %d)", h.Opcode, h.RequestID)
	}
	f, err := fibp.Decode(h.Opcode, body)
	if err != nil {
		t.Fatalf("decoding %v: %v", h.Opcode, err)
	}
	if h.RequestID != 0 && h.Opcode != fibp.OpPong {
		t.Errorf("%v carries request ID %d, want 0 (the handshake's)", h.Opcode, h.RequestID)
	}
	return f
}

func TestHandshake(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	if c.NodeID() != 0 {
		t.Errorf("HandshakeOk node_id = %d, want 0 (single node)", c.NodeID())
	}
	if !c.Capabilities().Has(fibp.CapCreditFlowControl) {
		t.Errorf("active capabilities %v lack CREDIT_FLOW_CONTROL", c.Capabilities())
	}
	if c.MaxFrameSize() != fibp.MaxFrameSize {
		t.Errorf("max frame size = %d, want the default %d", c.MaxFrameSize(), fibp.MaxFrameSize)
	}
	if _, err := c.Ping(testCtx(t)); err != nil {
		t.Errorf("Ping: %v", err)
	}

	// The wire fields the SDK hides: the version, node ID and advertised frame size.
	f, _, _ := rawHandshake(t, sharedAddr, fibp.Version)
	ok, isOk := f.(*fibp.HandshakeOk)
	if !isOk {
		t.Fatalf("Handshake answered %+v", f)
	}
	if ok.NegotiatedVersion != 1 || ok.NodeID != 0 || (ok.MaxFrameSize != 0 && ok.MaxFrameSize != fibp.MaxFrameSize) ||
		!ok.ServerCapabilities.Has(fibp.CapCreditFlowControl) {
		t.Errorf("HandshakeOk = %+v, want version 1, node 0, max frame 16 MiB (or 0), CREDIT_FLOW_CONTROL", ok)
	}
}

func TestHandshakeVersionNegotiation(t *testing.T) {
	t.Parallel()
	// A newer client is answered with the highest version the server has that is not above it.
	f, nc, fr := rawHandshake(t, sharedAddr, 7)
	if ok, isOk := f.(*fibp.HandshakeOk); !isOk || ok.NegotiatedVersion != 1 {
		t.Fatalf("Handshake with version 7 answered %+v, want HandshakeOk with version 1", f)
	}
	// The negotiated connection works: a Ping is answered with a Pong echoing its request ID.
	if _, err := nc.Write(fibp.AppendFrame(nil, 0, 42, &fibp.Ping{})); err != nil {
		t.Fatal(err)
	}
	raw, err := fr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := fibp.ParseHeader(raw); h.Opcode != fibp.OpPong || h.RequestID != 42 {
		t.Errorf("Ping 42 answered %v %d", h.Opcode, h.RequestID)
	}

	// No version the server speaks: UnsupportedVersion with max_version, then the connection closes.
	f, nc, fr = rawHandshake(t, sharedAddr, 0)
	e, isErr := f.(*fibp.Error)
	if !isErr || e.ErrorCode != fibp.CodeUnsupportedVersion || e.Metadata[fibp.MetaMaxVersion] != "1" {
		t.Fatalf("Handshake with version 0 answered %+v, want UnsupportedVersion with max_version 1", f)
	}
	(&rawConn{t: t, nc: nc, fr: fr}).expectClosed()
}

// TestMaxFrameSizeAndContinuation runs a broker with a 64 KiB frame limit: HandshakeOk advertises
// it, and the SDK sends a larger Enqueue as continuation frames that the broker reassembles.
func TestMaxFrameSizeAndContinuation(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	s := privateServer(t, "--max-frame-size", "65536")
	c := dial(t, s.addr)
	if c.MaxFrameSize() != limit {
		t.Fatalf("max frame size = %d, want the configured %d", c.MaxFrameSize(), limit)
	}
	q := createQueue(t, c, fila.QueueConfig{})
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*limit/16) // 3 frames' worth
	ids := enqueue(t, c, fila.Message{Queue: q, Payload: big, Headers: map[string]string{"size": "192KiB"}})
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1})
	d := next(t, cons)
	if d.ID != ids[0] || !bytes.Equal(d.Payload, big) || d.Headers["size"] != "192KiB" {
		t.Fatalf("delivery %v of %d bytes (headers %v), want %v with the %d bytes enqueued", d.ID, len(d.Payload), d.Headers, ids[0], len(big))
	}
	ack(t, d)
}

// TestLargePayloadContinuation: a payload above the default 16 MiB frame size travels as
// continuation frames both ways.
func TestLargePayloadContinuation(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{})
	big := bytes.Repeat([]byte{0xfa, 0x11, 0xba, 0x5e}, (fibp.MaxFrameSize+fibp.MaxFrameSize/16)/4) // 17 MiB
	id := enqueue(t, c, fila.Message{Queue: q, Payload: big})[0]
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1})
	d := next(t, cons)
	if d.ID != id || !bytes.Equal(d.Payload, big) {
		t.Fatalf("delivery %v of %d bytes, want %v of %d", d.ID, len(d.Payload), id, len(big))
	}
	ack(t, d)
}
