package transport

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/internal/fibptest"
)

type rawClient = fibptest.Client

func startServer(t testing.TB, opts Options) (*Server, string) {
	t.Helper()
	bo := broker.DefaultOptions(t.TempDir())
	bo.Sync = false
	s, _, addr, stop := serveAt(t, bo, opts)
	t.Cleanup(stop)
	return s, addr
}

// serveAt opens a broker with o and serves it with opts on a loopback port; stop shuts the
// server down, then closes the broker.
func serveAt(t testing.TB, o broker.Options, opts Options) (s *Server, b *broker.Broker, addr string, stop func()) {
	t.Helper()
	b, err := broker.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	s, addr, stopServer := listen(t, b, opts)
	return s, b, addr, func() { stopServer(); b.Close() }
}

// listen serves b with opts on a loopback port; stop shuts the server down (giving its
// connections 5 s), not b.
func listen(t testing.TB, b *broker.Broker, opts Options) (s *Server, addr string, stop func()) {
	t.Helper()
	s = New(b, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	return s, ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}
}

func dialRaw(t testing.TB, addr string) *rawClient { return fibptest.Dial(t, addr) }

func TestSmokeLifecycle(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	hs := c.Handshake()
	if hs.NegotiatedVersion != 1 || hs.MaxFrameSize != fibp.MaxFrameSize || !hs.ServerCapabilities.Has(fibp.CapCreditFlowControl) {
		t.Fatalf("HandshakeOk %+v", hs)
	}
	if r := c.Call(1, &fibp.CreateQueue{Name: "jobs"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk || r.QueueID == "" {
		t.Fatalf("CreateQueue: %+v", r)
	}
	enq := c.Call(2, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{
		{Queue: "jobs", Payload: []byte("one"), Headers: map[string]string{"k": "v"}},
		{Queue: "nope", Payload: []byte("x")},
	}}).(*fibp.EnqueueResult)
	if len(enq.Results) != 2 || enq.Results[0].ErrorCode != fibp.CodeOk || enq.Results[1].ErrorCode != fibp.CodeQueueNotFound {
		t.Fatalf("EnqueueResult %+v", enq)
	}
	c.Send(3, &fibp.Consume{Queue: "jobs", Credit: 10})
	if _, f := c.Next(); f.Opcode() != fibp.OpConsumeOk {
		t.Fatalf("Consume answered %#v", f)
	}
	h, f := c.Next()
	d, ok := f.(*fibp.Delivery)
	if !ok || h.RequestID != 3 || len(d.Messages) != 1 || string(d.Messages[0].Payload) != "one" || d.Messages[0].Headers["k"] != "v" || d.Messages[0].AttemptCount != 1 {
		t.Fatalf("Delivery %#v", f)
	}
	if d.Messages[0].MessageID != enq.Results[0].MessageID {
		t.Fatal("delivered ID differs from the enqueued one")
	}
	ack := c.Call(4, &fibp.Ack{Items: []fibp.AckItem{{Queue: "jobs", MessageID: d.Messages[0].MessageID}, {Queue: "jobs", MessageID: wire.UUID{1}}}}).(*fibp.AckResult)
	if ack.Results[0].ErrorCode != fibp.CodeOk || ack.Results[1].ErrorCode != fibp.CodeMessageNotFound {
		t.Fatalf("AckResult %+v", ack)
	}
	st := c.Call(5, &fibp.GetStats{Queue: "jobs"}).(*fibp.GetStatsResult)
	if st.ErrorCode != fibp.CodeOk || st.Depth != 0 || st.InFlight != 0 || st.ActiveConsumers != 1 {
		t.Fatalf("GetStatsResult %+v", st)
	}
}
