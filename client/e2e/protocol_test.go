package e2e

// Frame-level behaviour the SDK hides, checked over a raw FIBP connection (generated/fibp
// encodes and decodes; nothing here comes from the server module).

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// rawConn is a handshaken FIBP connection driven frame by frame.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	fr *wire.FrameReader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	f, nc, fr := rawHandshake(t, addr, fibp.Version)
	if _, ok := f.(*fibp.HandshakeOk); !ok {
		t.Fatalf("Handshake answered %+v", f)
	}
	return &rawConn{t: t, nc: nc, fr: fr}
}

func (r *rawConn) send(id uint32, f fibp.Frame) {
	r.t.Helper()
	if _, err := r.nc.Write(fibp.AppendFrame(nil, 0, id, f)); err != nil {
		r.t.Fatal(err)
	}
}

// next reads one frame (reassembling continuations is not needed for these small frames).
func (r *rawConn) next() (fibp.Header, fibp.Frame) {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(waitFor))
	raw, err := r.fr.Next()
	if err != nil {
		r.t.Fatalf("reading a frame: %v", err)
	}
	h, body, err := fibp.ParseHeader(raw)
	if err != nil {
		r.t.Fatal(err)
	}
	switch h.Opcode {
	case fibp.OpError, fibp.OpPong, fibp.OpPing, fibp.OpConsumeOk, fibp.OpDelivery, fibp.OpEnqueueResult, fibp.OpAckResult,
		fibp.OpGetStatsResult, fibp.OpDisconnect:
	default:
		r.t.Fatalf("unexpected %v", h.Opcode)
	}
	f, err := fibp.Decode(h.Opcode, body)
	if err != nil {
		r.t.Fatalf("decoding %v: %v", h.Opcode, err)
	}
	return h, f
}

// expectError reads an Error frame for request id with the given code.
func (r *rawConn) expectError(id uint32, code fibp.ErrorCode) {
	r.t.Helper()
	h, f := r.next()
	if e, ok := f.(*fibp.Error); !ok || h.RequestID != id || e.ErrorCode != code || e.Message == "" {
		r.t.Fatalf("got %v %d %+v, want an Error %v with a message for request %d", h.Opcode, h.RequestID, f, code, id)
	}
}

// ping checks that the connection still answers.
func (r *rawConn) ping(id uint32) {
	r.t.Helper()
	r.send(id, &fibp.Ping{})
	if h, _ := r.next(); h.Opcode != fibp.OpPong || h.RequestID != id {
		r.t.Fatalf("Ping %d answered %v %d", id, h.Opcode, h.RequestID)
	}
}

// expectClosed reads until the server closes the connection, allowing a Disconnect first.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(waitFor))
	for {
		raw, err := r.fr.Next()
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) {
			return
		}
		if err != nil {
			r.t.Fatalf("waiting for the server to close: %v", err)
		}
		if h, _, _ := fibp.ParseHeader(raw); h.Opcode != fibp.OpDisconnect && h.Opcode != fibp.OpPing {
			r.t.Fatalf("waiting for the server to close, got %v", h.Opcode)
		}
	}
}

func TestProtocolErrorsKeepTheConnection(t *testing.T) {
	t.Parallel()
	r := dialRaw(t, sharedAddr)
	// A second Handshake, an unknown opcode, reserved flag bits, a truncated body: each is an
	// InvalidFrame for that request, and the connection goes on.
	r.send(5, &fibp.Handshake{ProtocolVersion: 1})
	r.expectError(5, fibp.CodeInvalidFrame)
	r.nc.Write([]byte{0, 0, 0, 6, 0x1D, 0, 0, 0, 0, 6}) // opcode 0x1D is reserved
	r.expectError(6, fibp.CodeInvalidFrame)
	r.nc.Write([]byte{0, 0, 0, 6, byte(fibp.OpPing), 0x80, 0, 0, 0, 7})
	r.expectError(7, fibp.CodeInvalidFrame)
	r.nc.Write([]byte{0, 0, 0, 7, byte(fibp.OpGetStats), 0, 0, 0, 0, 8, 0}) // a string cut short
	r.expectError(8, fibp.CodeInvalidFrame)
	r.ping(9)
	// A client may use the server-initiated ID range for a Ping; the Pong echoes it.
	r.ping(0x80000009)
	// Credit and CancelConsume for an unknown subscription are ignored (no answer).
	r.send(10, &fibp.Credit{AdditionalCredit: 5})
	r.send(10, &fibp.CancelConsume{})
	r.ping(11)
	// Disconnect: the server closes.
	r.send(0, &fibp.Disconnect{})
	r.expectClosed()
}

func TestProtocolFirstFrameMustBeHandshake(t *testing.T) {
	t.Parallel()
	nc, err := net.DialTimeout("tcp", sharedAddr, waitFor)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := &rawConn{t: t, nc: nc, fr: wire.NewFrameReader(nc, fibp.MinFrameSize, fibp.MaxFrameSize)}
	r.send(1, &fibp.Ping{})
	r.expectError(1, fibp.CodeInvalidFrame)
	r.expectClosed()
}

func TestProtocolOversizedFrame(t *testing.T) {
	t.Parallel()
	s := privateServer(t, "--max-frame-size", "65536")
	r := dialRaw(t, s.addr)
	frame := make([]byte, 4+100_000)
	binary.BigEndian.PutUint32(frame, 100_000)
	frame[4] = byte(fibp.OpPing)
	binary.BigEndian.PutUint32(frame[6:], 3)
	if _, err := r.nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	r.expectError(3, fibp.CodeInvalidFrame)
	r.ping(4)
}

// TestProtocolCredit drives credit by hand: credit 0 is unlimited; with a credit, Credit frames
// release exactly that many more; CancelConsume stops delivery.
func TestProtocolCredit(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{VisibilityTimeout: 30 * time.Second})
	enqueue(t, c, payloads(q, "m", 6)...)

	r := dialRaw(t, sharedAddr)
	r.send(1, &fibp.Consume{Queue: q, Credit: 2})
	if h, f := r.next(); h.RequestID != 1 || h.Opcode != fibp.OpConsumeOk || f.(*fibp.ConsumeOk).ConsumerID == "" {
		t.Fatalf("Consume answered %v %d %+v", h.Opcode, h.RequestID, f)
	}
	got := 0
	receive := func(want int) {
		t.Helper()
		for got < want {
			h, f := r.next()
			d, ok := f.(*fibp.Delivery)
			if !ok || h.RequestID != 1 {
				t.Fatalf("got %v on request %d, want a Delivery on the subscription", h.Opcode, h.RequestID)
			}
			got += len(d.Messages)
		}
		if got != want {
			t.Fatalf("%d deliveries, want %d", got, want)
		}
	}
	receive(2)
	waitStats(t, c, q, "2 in flight", func(s *fila.QueueStats) bool { return s.InFlight >= 2 })
	if st := getStats(t, c, q); st.InFlight != 2 {
		t.Fatalf("credit 2: %d in flight", st.InFlight)
	}
	r.send(1, &fibp.Credit{AdditionalCredit: 3})
	receive(5)
	st := waitStats(t, c, q, "5 in flight", func(s *fila.QueueStats) bool { return s.InFlight >= 5 })
	if st.InFlight != 5 || st.Depth != 1 {
		t.Fatalf("after Credit 3: %+v, want 5 in flight and 1 waiting", st)
	}
	r.send(1, &fibp.CancelConsume{})
	waitStats(t, c, q, "no consumers", func(s *fila.QueueStats) bool { return s.ActiveConsumers == 0 })
	r.send(1, &fibp.Credit{AdditionalCredit: 10}) // for a cancelled subscription: ignored
	r.ping(2)
	if st := getStats(t, c, q); st.InFlight != 5 || st.Depth != 1 {
		t.Errorf("after CancelConsume and a stray Credit: %+v", st)
	}

	// Credit 0: unlimited.
	q2 := createQueue(t, c, fila.QueueConfig{VisibilityTimeout: 30 * time.Second})
	enqueue(t, c, payloads(q2, "u", 20)...)
	r.send(3, &fibp.Consume{Queue: q2, Credit: 0})
	if h, _ := r.next(); h.Opcode != fibp.OpConsumeOk {
		t.Fatalf("Consume answered %v", h.Opcode)
	}
	n := 0
	for n < 20 {
		h, f := r.next()
		if d, ok := f.(*fibp.Delivery); ok && h.RequestID == 3 {
			n += len(d.Messages)
		}
	}
	if st := getStats(t, c, q2); st.InFlight != 20 {
		t.Errorf("credit 0 (unlimited): %+v, want all 20 in flight", st)
	}
}

// TestServerPing: the server pings an idle client; the SDK answers and stays connected, while a
// peer that never answers is disconnected after the pong timeout.
func TestServerPing(t *testing.T) {
	t.Parallel()
	s := privateServer(t, "--ping-interval", "100ms", "--pong-timeout", "2s")
	c := dial(t, s.addr)

	r := dialRaw(t, s.addr)
	h, _ := r.next()
	if h.Opcode != fibp.OpPing || h.RequestID&0x80000000 == 0 {
		t.Fatalf("idle connection got %v %#x, want a server-initiated Ping", h.Opcode, h.RequestID)
	}
	r.expectClosed() // no Pong

	time.Sleep(3 * time.Second) // many ping intervals, and longer than a ping interval plus the pong timeout
	if err := c.Err(); err != nil {
		t.Fatalf("the SDK client was disconnected while idle: %v", err)
	}
	if _, err := c.Ping(testCtx(t)); err != nil {
		t.Errorf("Ping after idling: %v", err)
	}
}

// TestProtocolWithoutCreditFlowControl: a client that does not advertise CREDIT_FLOW_CONTROL
// gets no such capability, and its Consume credit is ignored: the server pushes freely.
func TestProtocolWithoutCreditFlowControl(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{VisibilityTimeout: 30 * time.Second})
	enqueue(t, c, payloads(q, "m", 5)...)
	f, nc, fr := rawHandshakeCaps(t, sharedAddr, fibp.Version, 0)
	if ok, isOk := f.(*fibp.HandshakeOk); !isOk || ok.ServerCapabilities&^fibp.CapCreditFlowControl != 0 {
		t.Fatalf("Handshake answered %+v", f)
	}
	r := &rawConn{t: t, nc: nc, fr: fr}
	r.send(1, &fibp.Consume{Queue: q, Credit: 1})
	n := 0
	for n < 5 {
		h, f := r.next()
		if d, ok := f.(*fibp.Delivery); ok && h.RequestID == 1 {
			n += len(d.Messages)
		}
	}
	if st := getStats(t, c, q); st.InFlight != 5 {
		t.Errorf("credit 1 without CREDIT_FLOW_CONTROL: %+v, want all 5 in flight", st)
	}
}
