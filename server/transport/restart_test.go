package transport

import (
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
)

// startAt runs a server on dir; stop shuts it down cleanly so the next one can open dir.
func startAt(t *testing.T, dir string) (addr string, stop func()) {
	t.Helper()
	return startAtWith(t, dir, func(*broker.Options) {})
}

// startAtWith is startAt with changed broker options.
func startAtWith(t *testing.T, dir string, set func(*broker.Options)) (addr string, stop func()) {
	t.Helper()
	o := broker.DefaultOptions(dir)
	set(&o)
	_, _, addr, stop = serveAt(t, o, Options{})
	return addr, stop
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

// nobody claimed — as it was, without counting a failed attempt for it.
func TestFastQueueHoldsPendingMessagesForTheReclaimGrace(t *testing.T) {
	const grace = 400 * time.Millisecond
	dir := t.TempDir()
	addr, stop := startAt(t, dir)
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "f", VisibilityTimeoutMs: 60_000,
		DeliveryDurability: fibp.DeliveryDurabilityFast, ReclaimGraceMs: uint64(grace.Milliseconds())})
	ids := enqueue(t, c,
		fibp.EnqueueMessage{Queue: "f", Payload: []byte("acked after the restart")},
		fibp.EnqueueMessage{Queue: "f", Payload: []byte("extended after the restart")},
		fibp.EnqueueMessage{Queue: "f", Payload: []byte("never delivered")},
	)
	c.Subscribe(1, "f", 2)
	if d := c.Deliveries(2); d[0].MessageID != ids[0] || d[1].MessageID != ids[1] {
		t.Fatalf("delivered %v and %v, want the first two messages", d[0].MessageID, d[1].MessageID)
	}
	stop()

	restarted := time.Now()
	addr, stop = startAt(t, dir)
	defer stop()
	c = dialRaw(t, addr)
	c.Handshake()
	if a := c.Call(2, &fibp.Ack{Items: []fibp.AckItem{{Queue: "f", MessageID: ids[0]}}}).(*fibp.AckResult); a.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatalf("acking a message delivered before the restart: %v", a.Results[0].ErrorCode)
	}
	if e := c.Call(3, &fibp.ExtendLease{Items: []fibp.ExtendLeaseItem{{Queue: "f", MessageID: ids[1], ExtendByMs: 60_000}}}).(*fibp.ExtendLeaseResult); e.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatalf("extending a message delivered before the restart: %v", e.Results[0].ErrorCode)
	}
	c.Subscribe(4, "f", 10)
	d := c.Deliveries(1)[0]
	if d.MessageID != ids[2] {
		t.Fatalf("delivered %v after the grace, want the unclaimed message %v", d.MessageID, ids[2])
	}
	if d.AttemptCount != 1 {
		t.Fatalf("the unclaimed message came with attempt_count %d, want 1 (the hold is no attempt)", d.AttemptCount)
	}
	if earliest := restarted.Add(grace).UnixMilli(); int64(d.LeasedAt) < earliest {
		t.Fatalf("delivered at %d, before the reclaim grace ended (%d)", d.LeasedAt, earliest)
	}
	if s := stats(t, c, "f"); s.InFlight != 2 {
		t.Fatalf("in flight after the grace: %d, want 2 (the extended and the redelivered message)", s.InFlight)
	}
}
