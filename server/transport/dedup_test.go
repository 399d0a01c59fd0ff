package transport

import (
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// TestIdempotencyKeyDeduplicates: within the dedup window a message with a remembered
// idempotency key is not enqueued again; its result is Ok, duplicate, with the original's ID —
// also within one frame, after the original is acked, and across a restart. After the window the
// key is forgotten.
func TestIdempotencyKeyDeduplicates(t *testing.T) {
	dir := t.TempDir()
	addr, stop := startAt(t, dir)
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "once", DedupWindowMs: 60_000})
	newQueue(t, c, &fibp.CreateQueue{Name: "brief", DedupWindowMs: 300})
	key := func(q, k string) fibp.EnqueueMessage {
		return fibp.EnqueueMessage{Queue: q, Payload: []byte(k), IdempotencyKey: wire.Some(k)}
	}
	r := c.Call(1, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{key("once", "a"), key("once", "a"), key("once", "b"), {Queue: "once", Payload: []byte("no key")}}}).(*fibp.EnqueueResult)
	if r.Results[0].Duplicate || r.Results[2].Duplicate || r.Results[3].Duplicate {
		t.Fatalf("first sightings marked duplicate: %+v", r.Results)
	}
	if !r.Results[1].Duplicate || r.Results[1].ErrorCode != fibp.CodeOk || r.Results[1].MessageID != r.Results[0].MessageID {
		t.Fatalf("second item with key a: %+v, first %+v", r.Results[1], r.Results[0])
	}
	original := r.Results[0].MessageID
	if s := stats(t, c, "once"); s.Depth != 3 {
		t.Fatalf("depth %d after one duplicate of four, want 3", s.Depth)
	}
	// Ack the original: the identity is still remembered.
	c.Subscribe(2, "once", 0)
	var acks []fibp.AckItem
	for _, d := range c.Deliveries(3) {
		acks = append(acks, fibp.AckItem{Queue: "once", MessageID: d.MessageID})
	}
	c.Call(3, &fibp.Ack{Items: acks})
	stop()

	addr, stop = startAt(t, dir)
	defer stop()
	c = dialRaw(t, addr)
	c.Handshake()
	r = c.Call(4, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{key("once", "a"), key("brief", "z")}}).(*fibp.EnqueueResult)
	if !r.Results[0].Duplicate || r.Results[0].MessageID != original {
		t.Fatalf("after ack and restart, key a: %+v, want a duplicate of %v", r.Results[0], original)
	}
	if s := stats(t, c, "once"); s.Depth != 0 {
		t.Fatalf("a duplicate was stored: depth %d", s.Depth)
	}
	first := r.Results[1].MessageID
	time.Sleep(400 * time.Millisecond) // the 300 ms window of "brief" passes
	r = c.Call(5, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{key("brief", "z")}}).(*fibp.EnqueueResult)
	if r.Results[0].Duplicate || r.Results[0].MessageID == first {
		t.Fatalf("after the window, key z: %+v", r.Results[0])
	}
}
