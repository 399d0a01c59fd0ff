package transport

import (
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// These tests drive the broker through FIBP, with the generated codecs only.

func newQueue(t *testing.T, c *rawClient, req *fibp.CreateQueue) {
	t.Helper()
	if r := c.Call(100, req).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue %s: %v", req.Name, r.ErrorCode)
	}
}

func enqueue(t *testing.T, c *rawClient, msgs ...fibp.EnqueueMessage) []wire.UUID {
	t.Helper()
	r := c.Call(101, &fibp.Enqueue{Messages: msgs}).(*fibp.EnqueueResult)
	ids := make([]wire.UUID, len(r.Results))
	for i, res := range r.Results {
		if res.ErrorCode != fibp.CodeOk {
			t.Fatalf("enqueue item %d: %v", i, res.ErrorCode)
		}
		ids[i] = res.MessageID
	}
	return ids
}

func stats(t *testing.T, c *rawClient, queue string) *fibp.GetStatsResult {
	t.Helper()
	return c.Call(102, &fibp.GetStats{Queue: queue}).(*fibp.GetStatsResult)
}

func TestNackRetriesThenDeadLettersThenRedrives(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "work", MaxAttempts: 2, Backoff: fibp.BackoffNone})
	id := enqueue(t, c, fibp.EnqueueMessage{Queue: "work", Payload: []byte("p"), FairnessKey: wire.Some("tenant"), Weight: wire.Some[uint32](3)})[0]
	c.Subscribe(7, "work", 0)

	first := c.Deliveries(1)[0]
	if first.MessageID != id || first.AttemptCount != 1 || first.FairnessKey != "tenant" || first.Weight != 3 {
		t.Fatalf("first delivery %+v", first)
	}
	if first.LeaseExpiresAt <= first.LeasedAt {
		t.Fatalf("lease_expires_at %d not after leased_at %d", first.LeaseExpiresAt, first.LeasedAt)
	}
	nr := c.Call(8, &fibp.Nack{Items: []fibp.NackItem{{Queue: "work", MessageID: id, Error: "boom"}}}).(*fibp.NackResult)
	if nr.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatalf("nack: %v", nr.Results[0].ErrorCode)
	}
	second := c.Deliveries(1)[0]
	if second.MessageID != id || second.AttemptCount != 2 {
		t.Fatalf("retry %+v", second)
	}
	// The second failure exhausts max_attempts: the message moves to work.dlq.
	c.Call(9, &fibp.Nack{Items: []fibp.NackItem{{Queue: "work", MessageID: id, Error: "boom again"}}})
	waitFor(t, func() bool { return stats(t, c, "work.dlq").Depth == 1 })
	if s := stats(t, c, "work"); s.Depth != 0 || s.InFlight != 0 {
		t.Fatalf("parent after dead-lettering: depth %d in flight %d", s.Depth, s.InFlight)
	}

	rr := c.Call(10, &fibp.Redrive{DLQQueue: "work.dlq"}).(*fibp.RedriveResult)
	if rr.ErrorCode != fibp.CodeOk || rr.Redriven != 1 {
		t.Fatalf("redrive %+v", rr)
	}
	third := c.Deliveries(1)[0]
	if third.MessageID != id || third.AttemptCount != 1 || third.RedriveCount != 1 || string(third.Payload) != "p" {
		t.Fatalf("redriven delivery %+v", third)
	}
}

func TestNackRetryAfterDelaysTheRetry(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	id := enqueue(t, c, fibp.EnqueueMessage{Queue: "q", Payload: []byte("x")})[0]
	c.Subscribe(3, "q", 0)
	c.Deliveries(1)
	c.Call(4, &fibp.Nack{Items: []fibp.NackItem{{Queue: "q", MessageID: id, RetryAfterMs: wire.Some[uint64](60_000)}}})
	s := stats(t, c, "q")
	if s.Delayed != 1 || s.Depth != 1 || s.InFlight != 0 {
		t.Fatalf("after a nack with retry_after_ms: %+v", s)
	}
}

func TestLeaseExpiryRedelivers(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q", VisibilityTimeoutMs: 150, Backoff: fibp.BackoffNone})
	id := enqueue(t, c, fibp.EnqueueMessage{Queue: "q", Payload: []byte("x")})[0]
	c.Subscribe(3, "q", 0)
	if d := c.Deliveries(1)[0]; d.AttemptCount != 1 {
		t.Fatalf("first %+v", d)
	}
	// No ack: the lease runs out and the message comes back as attempt 2.
	d := c.Deliveries(1)[0]
	if d.MessageID != id || d.AttemptCount != 2 {
		t.Fatalf("after expiry %+v", d)
	}
	// Acking the first, expired lease's message now settles the second delivery.
	if r := c.Call(4, &fibp.Ack{Items: []fibp.AckItem{{Queue: "q", MessageID: id}}}).(*fibp.AckResult); r.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatalf("ack %v", r.Results[0].ErrorCode)
	}
}

func TestDelayedMessageWaits(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	enqueue(t, c, fibp.EnqueueMessage{Queue: "q", Payload: []byte("later"), DelayMs: wire.Some[uint64](300)})
	if s := stats(t, c, "q"); s.Delayed != 1 || s.Depth != 1 {
		t.Fatalf("delayed stats %+v", s)
	}
	c.Subscribe(3, "q", 0)
	d := c.Deliveries(1)[0]
	if d.LeasedAt < d.EnqueuedAt+300 {
		t.Fatalf("delivered %d ms after enqueue, before its 300 ms delay", d.LeasedAt-d.EnqueuedAt)
	}
}

func TestCreditBoundsDeliveries(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	for range 5 {
		enqueue(t, c, fibp.EnqueueMessage{Queue: "q", Payload: []byte("x")})
	}
	c.Subscribe(3, "q", 2)
	c.Deliveries(2)
	// With zero credit nothing more arrives: a GetStats round trip proves the server is idle.
	if s := stats(t, c, "q"); s.InFlight != 2 || s.Depth != 3 {
		t.Fatalf("with credit 2: %+v", s)
	}
	c.Send(3, &fibp.Credit{AdditionalCredit: 3})
	c.Deliveries(3)
	if s := stats(t, c, "q"); s.InFlight != 5 || s.Depth != 0 {
		t.Fatalf("after Credit 3: %+v", s)
	}
	// CancelConsume stops delivery; leases stay until they expire.
	c.Send(3, &fibp.CancelConsume{})
	enqueue(t, c, fibp.EnqueueMessage{Queue: "q", Payload: []byte("y")})
	if s := stats(t, c, "q"); s.ActiveConsumers != 0 || s.InFlight != 5 || s.Depth != 1 {
		t.Fatalf("after CancelConsume: %+v", s)
	}
}

func TestExtendLease(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	id := enqueue(t, c, fibp.EnqueueMessage{Queue: "q", Payload: []byte("x")})[0]
	c.Subscribe(3, "q", 0)
	d := c.Deliveries(1)[0]
	r := c.Call(4, &fibp.ExtendLease{Items: []fibp.ExtendLeaseItem{
		{Queue: "q", MessageID: id, ExtendByMs: 3_600_000},
		{Queue: "q", MessageID: wire.UUID{9}, ExtendByMs: 10},
		{Queue: "gone", MessageID: id, ExtendByMs: 10},
	}}).(*fibp.ExtendLeaseResult)
	if r.Results[0].ErrorCode != fibp.CodeOk || r.Results[0].LeaseExpiresAt < d.LeasedAt+3_600_000 {
		t.Fatalf("extend %+v (leased at %d)", r.Results[0], d.LeasedAt)
	}
	if r.Results[1].ErrorCode != fibp.CodeMessageNotFound || r.Results[1].LeaseExpiresAt != 0 {
		t.Fatalf("unknown message %+v", r.Results[1])
	}
	if r.Results[2].ErrorCode != fibp.CodeQueueNotFound {
		t.Fatalf("unknown queue %+v", r.Results[2])
	}
}

func TestWeightedFairnessOverTheWire(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "fair"})
	var msgs []fibp.EnqueueMessage
	for range 60 {
		msgs = append(msgs,
			fibp.EnqueueMessage{Queue: "fair", Payload: []byte("a"), FairnessKey: wire.Some("a"), Weight: wire.Some[uint32](1)},
			fibp.EnqueueMessage{Queue: "fair", Payload: []byte("b"), FairnessKey: wire.Some("b"), Weight: wire.Some[uint32](2)})
	}
	enqueue(t, c, msgs...)
	c.Subscribe(3, "fair", 30)
	got := map[string]int{}
	for _, d := range c.Deliveries(30) {
		got[d.FairnessKey]++
	}
	if got["a"] != 10 || got["b"] != 20 {
		t.Fatalf("30 deliveries with weights 1:2 went %v, want a:10 b:20", got)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
