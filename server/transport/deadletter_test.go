package transport

import (
	"strconv"
	"strings"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
)

// wantDeadLetter checks the dead-letter headers of a delivery from a DLQ, and that the message's
// own headers are still there.
func wantDeadLetter(t *testing.T, d fibp.DeliveryMessage, reason, errText, queue string, attempts uint32, own map[string]string) {
	t.Helper()
	h := d.Headers
	if h[broker.HeaderDeadLetterReason] != reason || h[broker.HeaderDeadLetterError] != errText || h[broker.HeaderDeadLetterQueue] != queue ||
		h[broker.HeaderDeadLetterAttempts] != strconv.FormatUint(uint64(attempts), 10) {
		t.Fatalf("dead letter %x: headers %v, want reason %q, error %q, queue %q, attempts %d", d.MessageID[:4], h, reason, errText, queue, attempts)
	}
	if at, err := strconv.ParseInt(h[broker.HeaderDeadLetterAt], 10, 64); err != nil || at < int64(d.EnqueuedAt) {
		t.Fatalf("%s %q: %v (enqueued at %d)", broker.HeaderDeadLetterAt, h[broker.HeaderDeadLetterAt], err, d.EnqueuedAt)
	}
	for k, v := range own {
		if h[k] != v {
			t.Fatalf("the message's own header %s = %q, want %q", k, h[k], v)
		}
	}
}

// A message dead-lettered after its last attempt carries why in the DLQ: reason max_attempts, the
// Nack's error text, the queue and the attempt count; after a restart too, and a DLQ consumer's
// own Nack does not change them. Redriven, it is delivered without them.
func TestDeadLetteredMessagesSayWhy(t *testing.T) {
	dir := t.TempDir()
	addr, stop := startAt(t, dir)
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "orders", MaxAttempts: 2, Backoff: fibp.BackoffNone})
	own := map[string]string{"tenant": "acme"}
	id := enqueue(t, c, fibp.EnqueueMessage{Queue: "orders", Headers: own, Payload: []byte("x")})[0]
	c.Subscribe(1, "orders", 10)
	for i := range 2 {
		if d := c.Deliveries(1)[0]; d.MessageID != id || d.Headers[broker.HeaderDeadLetterReason] != "" {
			t.Fatalf("delivery %d from the queue: %+v", i, d)
		}
		c.Call(2, &fibp.Nack{Items: []fibp.NackItem{{Queue: "orders", MessageID: id, Error: "card declined " + strconv.Itoa(i)}}})
	}
	waitFor(t, func() bool { return stats(t, c, "orders.dlq").Depth == 1 })
	c.Subscribe(3, "orders.dlq", 1)
	wantDeadLetter(t, c.Deliveries(1)[0], "max_attempts", "card declined 1", "orders", 2, own)
	dlqNack(t, c, 4, id, "still broken")
	stop()

	// After a restart (the log replayed), and after the DLQ's own failure: the same.
	addr, stop = startAt(t, dir)
	defer stop()
	c = dialRaw(t, addr)
	c.Handshake()
	c.Subscribe(1, "orders.dlq", 1)
	wantDeadLetter(t, c.Deliveries(1)[0], "max_attempts", "card declined 1", "orders", 2, own)
	dlqNack(t, c, 2, id, "still broken")
	if r := c.Call(5, &fibp.Redrive{DLQQueue: "orders.dlq"}).(*fibp.RedriveResult); r.ErrorCode != fibp.CodeOk || r.Redriven != 1 {
		t.Fatalf("redrive: %+v", r)
	}
	c.Subscribe(6, "orders", 10)
	if d := c.Deliveries(1)[0]; d.MessageID != id || d.RedriveCount != 1 || len(d.Headers) != 1 || d.Headers["tenant"] != "acme" {
		t.Fatalf("redriven delivery: %+v", d)
	}
}

// dlqNack fails a delivery of orders.dlq for a retry at once (its consumer's one credit is spent,
// so it stays there, ready).
func dlqNack(t *testing.T, c *rawClient, reqID uint32, id wire.UUID, text string) {
	t.Helper()
	r := c.Call(reqID, &fibp.Nack{Items: []fibp.NackItem{{Queue: "orders.dlq", MessageID: id, Error: text, RetryAfterMs: wire.Some[uint64](0)}}}).(*fibp.NackResult)
	if r.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatalf("nack in the DLQ: %v", r.Results[0].ErrorCode)
	}
}

// on_failure sending a message to the DLQ gives the reason script; a parked message dead-lettered
// after park_dead_letter_after failed classifications gives unclassified, with the script's error.
func TestScriptAndParkDeadLettersSayWhy(t *testing.T) {
	c := scriptClient(t)
	setConfig(t, c, "lua.reclassify_interval_ms", "20")
	newQueue(t, c, &fibp.CreateQueue{Name: "q", MaxAttempts: 5, Backoff: fibp.BackoffNone,
		OnFailureScript: wire.Some(`function on_failure(msg) if msg.error == "fatal" then return { action = "dlq" } end end`)})
	id := enqueue(t, c, fibp.EnqueueMessage{Queue: "q", Payload: []byte("x")})[0]
	c.Subscribe(1, "q", 10)
	c.Deliveries(1)
	c.Call(2, &fibp.Nack{Items: []fibp.NackItem{{Queue: "q", MessageID: id, Error: "fatal"}}})
	c.Subscribe(3, "q.dlq", 10)
	wantDeadLetter(t, c.Deliveries(1)[0], "script", "fatal", "q", 1, nil)

	newQueue(t, c, &fibp.CreateQueue{Name: "p", ScriptFailure: fibp.ScriptFailurePark, ParkDeadLetterAfter: 2,
		OnEnqueueScript: wire.Some(gatedHook)})
	parked := enqueue(t, c, fibp.EnqueueMessage{Queue: "p", Headers: bad, Payload: []byte("u")})[0]
	c.Subscribe(4, "p.dlq", 10)
	d := c.Deliveries(1)[0]
	if d.MessageID != parked {
		t.Fatalf("delivery %+v", d)
	}
	wantDeadLetter(t, d, "unclassified", d.Headers[broker.HeaderDeadLetterError], "p", 0, bad)
	if e := d.Headers[broker.HeaderDeadLetterError]; !strings.Contains(e, "not yet") {
		t.Fatalf("the parked message's error: %q", e)
	}
}
