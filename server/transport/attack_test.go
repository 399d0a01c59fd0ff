package transport

import (
	"fmt"
	"math"
	"testing"

	"github.com/filamq/fila/generated/fibp"
)

// Attacks through the wire: inputs a hostile client may send, each answered by the spec's error
// code while the server goes on serving.

// A window of up to 2^64 - 1 ms is a valid declaration; the first delivery through it used to
// divide by zero (or make a slice of negative length) on the queue's goroutine and kill the server.
func TestThrottleWindowsAtTheEdgeOfU64(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	for i, lim := range []fibp.ThrottleLimit{
		{MaxDeliveries: 65, WindowMs: math.MaxUint64}, // slotted
		{MaxDeliveries: 65, WindowMs: 1 << 63},
		{MaxDeliveries: 1, WindowMs: math.MaxUint64}, // exact
		{MaxDeliveries: math.MaxUint64, WindowMs: math.MaxUint64},
	} {
		t.Run(fmt.Sprint(lim), func(t *testing.T) {
			id := uint32(10 + i)
			consumeWith(t, c, id, "q", fibp.ThrottleDeclaration{Name: fmt.Sprint("t", i), Limits: []fibp.ThrottleLimit{lim}})
			enqueue(t, c, fibp.EnqueueMessage{Queue: "q", Payload: []byte("x")})
			h, f := c.Next()
			d, ok := f.(*fibp.Delivery)
			if !ok || h.RequestID != id || len(d.Messages) != 1 {
				t.Fatalf("expected one delivery on %d, got %d %#v", id, h.RequestID, f)
			}
			c.Send(1, &fibp.Ack{Items: []fibp.AckItem{{Queue: "q", MessageID: d.Messages[0].MessageID}}})
			if _, f := c.Next(); f.Opcode() != fibp.OpAckResult {
				t.Fatalf("Ack answered %#v", f)
			}
			c.Send(id, &fibp.CancelConsume{})
			c.Send(3, &fibp.Ping{}) // CancelConsume has no answer
			if _, f := c.Next(); f.Opcode() != fibp.OpPong {
				t.Fatalf("Ping answered %#v", f)
			}
		})
	}
}

// A Consume can carry 65,535 throttles of 65,535 limits each; validating and applying them was
// quadratic (20,000 limits took seconds of CPU), and every delivery walked them all. The counts
// are bounded: InvalidThrottle.
func TestThrottleDeclarationsAreBounded(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	limits := func(from, n int) []fibp.ThrottleLimit { // none implies another
		ls := make([]fibp.ThrottleLimit, n)
		for i := range ls {
			ls[i] = fibp.ThrottleLimit{MaxDeliveries: uint64(from + i + 1), WindowMs: uint64(from + i + 1)}
		}
		return ls
	}
	manyLimits := []fibp.ThrottleDeclaration{{Name: "t", Limits: limits(0, 60_000)}}
	var manyThrottles []fibp.ThrottleDeclaration
	for i := range 60_000 {
		manyThrottles = append(manyThrottles, fibp.ThrottleDeclaration{Name: fmt.Sprint("t", i), Limits: limits(0, 1)})
	}
	for name, ds := range map[string][]fibp.ThrottleDeclaration{"limits": manyLimits, "throttles": manyThrottles} {
		c.Send(5, &fibp.Consume{Queue: "q", Throttles: ds})
		_, f := c.Next()
		t.Logf("%d %s: %v", 60_000, name, expectError(t, f, fibp.CodeInvalidThrottle).Message)
	}
	// The union of one throttle's limits across subscriptions is bounded too.
	for i := range 4 {
		consumeWith(t, c, uint32(10+i), "q", fibp.ThrottleDeclaration{Name: "shared", Limits: limits(16*i, 16)})
	}
	c.Send(20, &fibp.Consume{Queue: "q", Throttles: []fibp.ThrottleDeclaration{{Name: "shared", Limits: limits(64, 1)}}})
	_, f := c.Next()
	expectError(t, f, fibp.CodeInvalidThrottle)
	consumeWith(t, c, 21, "q", fibp.ThrottleDeclaration{Name: "shared", Limits: limits(0, 16)}) // limits it already has
}
