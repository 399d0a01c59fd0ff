package transport

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
)

// rawClient speaks FIBP with the generated codecs only, as an independent client would.
type rawClient struct {
	t  testing.TB
	nc net.Conn
	fr *wire.FrameReader
}

func startServer(t testing.TB, opts Options) (*Server, string) {
	t.Helper()
	bo := broker.DefaultOptions(t.TempDir())
	bo.Sync = false
	b, err := broker.Open(bo)
	if err != nil {
		t.Fatal(err)
	}
	s := New(b, opts)
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
	return s, ln.Addr().String()
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, fr: wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)}
}

func (c *rawClient) send(reqID uint32, f fibp.Frame) {
	c.t.Helper()
	if _, err := c.nc.Write(fibp.AppendFrame(nil, 0, reqID, f)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawClient) sendBytes(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// next reads the next frame that is not a server Ping.
func (c *rawClient) next() (fibp.Header, fibp.Frame) {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		body, err := c.fr.Next()
		if err != nil {
			c.t.Fatalf("read: %v", err)
		}
		h, rest, err := fibp.ParseHeader(body)
		if err != nil {
			c.t.Fatal(err)
		}
		f, err := fibp.Decode(h.Opcode, rest)
		if err != nil {
			c.t.Fatalf("decode %v: %v", h.Opcode, err)
		}
		if h.Opcode == fibp.OpPing {
			c.send(h.RequestID, &fibp.Pong{})
			continue
		}
		return h, f
	}
}

func (c *rawClient) handshake() *fibp.HandshakeOk {
	c.t.Helper()
	c.send(0, &fibp.Handshake{ProtocolVersion: 1, ClientCapabilities: fibp.CapCreditFlowControl})
	_, f := c.next()
	ok, isOk := f.(*fibp.HandshakeOk)
	if !isOk {
		c.t.Fatalf("handshake answered %#v", f)
	}
	return ok
}

// call sends a request and returns the answer with the same request ID.
func (c *rawClient) call(reqID uint32, f fibp.Frame) fibp.Frame {
	c.t.Helper()
	c.send(reqID, f)
	h, res := c.next()
	if h.RequestID != reqID {
		c.t.Fatalf("answer to request %d carries request ID %d (%v)", reqID, h.RequestID, h.Opcode)
	}
	return res
}

func TestSmokeLifecycle(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	hs := c.handshake()
	if hs.NegotiatedVersion != 1 || hs.MaxFrameSize != fibp.MaxFrameSize || !hs.ServerCapabilities.Has(fibp.CapCreditFlowControl) {
		t.Fatalf("HandshakeOk %+v", hs)
	}
	if r := c.call(1, &fibp.CreateQueue{Name: "jobs"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk || r.QueueID == "" {
		t.Fatalf("CreateQueue: %+v", r)
	}
	enq := c.call(2, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{
		{Queue: "jobs", Payload: []byte("one"), Headers: map[string]string{"k": "v"}},
		{Queue: "nope", Payload: []byte("x")},
	}}).(*fibp.EnqueueResult)
	if len(enq.Results) != 2 || enq.Results[0].ErrorCode != fibp.CodeOk || enq.Results[1].ErrorCode != fibp.CodeQueueNotFound {
		t.Fatalf("EnqueueResult %+v", enq)
	}
	c.send(3, &fibp.Consume{Queue: "jobs", Credit: 10})
	if _, f := c.next(); f.Opcode() != fibp.OpConsumeOk {
		t.Fatalf("Consume answered %#v", f)
	}
	h, f := c.next()
	d, ok := f.(*fibp.Delivery)
	if !ok || h.RequestID != 3 || len(d.Messages) != 1 || string(d.Messages[0].Payload) != "one" || d.Messages[0].Headers["k"] != "v" || d.Messages[0].AttemptCount != 1 {
		t.Fatalf("Delivery %#v", f)
	}
	if d.Messages[0].MessageID != enq.Results[0].MessageID {
		t.Fatal("delivered ID differs from the enqueued one")
	}
	ack := c.call(4, &fibp.Ack{Items: []fibp.AckItem{{Queue: "jobs", MessageID: d.Messages[0].MessageID}, {Queue: "jobs", MessageID: wire.UUID{1}}}}).(*fibp.AckResult)
	if ack.Results[0].ErrorCode != fibp.CodeOk || ack.Results[1].ErrorCode != fibp.CodeMessageNotFound {
		t.Fatalf("AckResult %+v", ack)
	}
	st := c.call(5, &fibp.GetStats{Queue: "jobs"}).(*fibp.GetStatsResult)
	if st.ErrorCode != fibp.CodeOk || st.Depth != 0 || st.InFlight != 0 || st.ActiveConsumers != 1 {
		t.Fatalf("GetStatsResult %+v", st)
	}
}
