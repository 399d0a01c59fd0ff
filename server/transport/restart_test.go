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

// startAt runs a server on dir; stop shuts it down cleanly so the next one can open dir.
func startAt(t *testing.T, dir string) (addr string, stop func()) {
	t.Helper()
	b, err := broker.Open(broker.DefaultOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	s := New(b, Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		b.Close()
	}
}

func TestStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	addr, stop := startAt(t, dir)
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q", VisibilityTimeoutMs: 60_000, Backoff: fibp.BackoffNone})
	ids := enqueue(t, c,
		fibp.EnqueueMessage{Queue: "q", Payload: []byte("leased")},
		fibp.EnqueueMessage{Queue: "q", Payload: []byte("nacked")},
		fibp.EnqueueMessage{Queue: "q", Payload: []byte("extended")},
		fibp.EnqueueMessage{Queue: "q", Payload: []byte("acked")},
		fibp.EnqueueMessage{Queue: "q", Payload: []byte("delayed"), DelayMs: wire.Some[uint64](3_600_000)},
	)
	c.Subscribe(1, "q", 4)
	c.Deliveries(4)
	c.Call(2, &fibp.Nack{Items: []fibp.NackItem{{Queue: "q", MessageID: ids[1], Error: "try later", RetryAfterMs: wire.Some[uint64](3_600_000)}}})
	ext := c.Call(3, &fibp.ExtendLease{Items: []fibp.ExtendLeaseItem{{Queue: "q", MessageID: ids[2], ExtendByMs: 7_200_000}}}).(*fibp.ExtendLeaseResult)
	c.Call(4, &fibp.Ack{Items: []fibp.AckItem{{Queue: "q", MessageID: ids[3]}}})
	c.Call(5, &fibp.SetConfig{Key: "app.colour", Value: "blue"})
	stop()

	addr, stop = startAt(t, dir)
	defer stop()
	c = dialRaw(t, addr)
	c.Handshake()
	s := stats(t, c, "q")
	// leased + extended are in flight; nacked (waiting an hour) and delayed are delayed.
	if s.InFlight != 2 || s.Depth != 2 || s.Delayed != 2 {
		t.Fatalf("after restart: depth %d in flight %d delayed %d, want 2, 2, 2", s.Depth, s.InFlight, s.Delayed)
	}
	// The leases are honoured: their holder can still extend and ack them.
	r := c.Call(6, &fibp.ExtendLease{Items: []fibp.ExtendLeaseItem{{Queue: "q", MessageID: ids[0], ExtendByMs: 1000}}}).(*fibp.ExtendLeaseResult)
	if r.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatalf("extending a recovered lease: %v", r.Results[0].ErrorCode)
	}
	if a := c.Call(7, &fibp.Ack{Items: []fibp.AckItem{{Queue: "q", MessageID: ids[2]}}}).(*fibp.AckResult); a.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatalf("acking the extended lease (expiry %d): %v", ext.Results[0].LeaseExpiresAt, a.Results[0].ErrorCode)
	}
	if a := c.Call(8, &fibp.Ack{Items: []fibp.AckItem{{Queue: "q", MessageID: ids[3]}}}).(*fibp.AckResult); a.Results[0].ErrorCode != fibp.CodeMessageNotFound {
		t.Fatalf("the acked message came back: %v", a.Results[0].ErrorCode)
	}
	if g := c.Call(9, &fibp.GetConfig{Key: "app.colour"}).(*fibp.GetConfigResult); g.Value != "blue" {
		t.Fatalf("config after restart: %+v", g)
	}
	// Expiring the recovered lease redelivers it as attempt 2.
	c.Call(10, &fibp.ExtendLease{Items: []fibp.ExtendLeaseItem{{Queue: "q", MessageID: ids[0], ExtendByMs: 1}}})
	c.Subscribe(11, "q", 10)
	d := c.Deliveries(1)[0]
	if d.MessageID != ids[0] || d.AttemptCount != 2 || string(d.Payload) != "leased" {
		t.Fatalf("redelivery after restart: %+v", d)
	}
}
