// Package fibptest is a minimal FIBP client for tests: it speaks the protocol with the generated
// codecs only, frame by frame, the way an independent client written from the spec would.
package fibptest

import (
	"net"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// Client is one raw connection. Its methods fail the test on transport errors.
type Client struct {
	T  testing.TB
	NC net.Conn
	FR *wire.FrameReader

	// held keeps Delivery frames that arrived while Call waited for its answer: deliveries may
	// interleave with answers at any point, so Next returns them first, in arrival order.
	held []held
}

type held struct {
	h fibp.Header
	f fibp.Frame
}

// Dial connects to addr; the connection closes when the test ends.
func Dial(t testing.TB, addr string) *Client {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &Client{T: t, NC: nc, FR: wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)}
}

// Send writes one frame.
func (c *Client) Send(reqID uint32, f fibp.Frame) {
	c.T.Helper()
	c.SendBytes(fibp.AppendFrame(nil, 0, reqID, f))
}

// SendBytes writes raw bytes.
func (c *Client) SendBytes(b []byte) {
	c.T.Helper()
	if _, err := c.NC.Write(b); err != nil {
		c.T.Fatal(err)
	}
}

// ReadWait bounds how long the client waits for the server's next frame (or its close): generous,
// as a loaded machine is slow, but an answer that never comes fails the test instead of hanging it.
const ReadWait = time.Minute

// Next reads the next frame, answering (and skipping) server Pings.
func (c *Client) Next() (fibp.Header, fibp.Frame) {
	c.T.Helper()
	if len(c.held) > 0 {
		x := c.held[0]
		c.held = c.held[1:]
		return x.h, x.f
	}
	return c.read()
}

func (c *Client) read() (fibp.Header, fibp.Frame) {
	c.T.Helper()
	_ = c.NC.SetReadDeadline(time.Now().Add(ReadWait))
	for {
		body, err := c.FR.Next()
		if err != nil {
			c.T.Fatalf("read: %v", err)
		}
		h, rest, err := fibp.ParseHeader(body)
		if err != nil {
			c.T.Fatal(err)
		}
		f, err := fibp.Decode(h.Opcode, rest)
		if err != nil {
			c.T.Fatalf("decode %v: %v", h.Opcode, err)
		}
		if h.Opcode == fibp.OpPing {
			c.Send(h.RequestID, &fibp.Pong{})
			continue
		}
		return h, f
	}
}

// Handshake performs the handshake with credit flow control.
func (c *Client) Handshake() *fibp.HandshakeOk {
	c.T.Helper()
	c.Send(0, &fibp.Handshake{ProtocolVersion: 1, ClientCapabilities: fibp.CapCreditFlowControl})
	_, f := c.Next()
	ok, isOk := f.(*fibp.HandshakeOk)
	if !isOk {
		c.T.Fatalf("handshake answered %#v", f)
	}
	return ok
}

// Call sends a request and returns the answer, which must carry the same request ID. Delivery
// frames that arrive meanwhile are held for Next.
func (c *Client) Call(reqID uint32, f fibp.Frame) fibp.Frame {
	c.T.Helper()
	c.Send(reqID, f)
	for {
		h, res := c.read()
		if h.Opcode == fibp.OpDelivery && h.RequestID != reqID {
			c.held = append(c.held, held{h, res})
			continue
		}
		if h.RequestID != reqID {
			c.T.Fatalf("answer to request %d carries request ID %d (%v)", reqID, h.RequestID, h.Opcode)
		}
		return res
	}
}

// Subscribe sends Consume and waits for ConsumeOk.
func (c *Client) Subscribe(reqID uint32, queue string, credit uint32) {
	c.T.Helper()
	c.Send(reqID, &fibp.Consume{Queue: queue, Credit: credit})
	if h, f := c.Next(); f.Opcode() != fibp.OpConsumeOk || h.RequestID != reqID {
		c.T.Fatalf("Consume answered %v on %d: %#v", f.Opcode(), h.RequestID, f)
	}
}

// Deliveries reads Delivery frames until at least n messages have arrived.
func (c *Client) Deliveries(n int) []fibp.DeliveryMessage {
	c.T.Helper()
	var out []fibp.DeliveryMessage
	for len(out) < n {
		_, f := c.Next()
		d, ok := f.(*fibp.Delivery)
		if !ok {
			c.T.Fatalf("expected a Delivery, got %#v", f)
		}
		out = append(out, d.Messages...)
	}
	return out
}
