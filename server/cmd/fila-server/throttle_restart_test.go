package main

import (
	"slices"
	"syscall"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
)

// A throttle's counts are the process's memory. The real server delivers N under a throttle of N
// per W, is killed with SIGKILL and restarted on its data directory, and delivers again under
// the same throttle: judged by the deliveries' lease times, no window of W holds more than N.
// Before, the restarted server delivered N more at once (2N within one window).
func TestThrottleLimitsHoldAcrossKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	const n, windowMs = 3, 8_000 // a window far longer than a restart takes
	bin := buildServer(t)
	dir := t.TempDir()
	first := startBinary(t, bin, dir, "127.0.0.1:0")
	addr := first.addrs.FIBP
	throttle := fibp.ThrottleDeclaration{Name: "api", Limits: []fibp.ThrottleLimit{{MaxDeliveries: n, WindowMs: windowMs}}}

	c := fibptest.Dial(t, addr)
	c.Handshake()
	if r := c.Call(1, &fibp.CreateQueue{Name: "q", VisibilityTimeoutMs: 600_000}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue: %v", r.ErrorCode)
	}
	req := &fibp.Enqueue{}
	for range 4 * n {
		req.Messages = append(req.Messages, fibp.EnqueueMessage{Queue: "q", Payload: []byte("m")})
	}
	if r := c.Call(2, req).(*fibp.EnqueueResult); r.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatalf("Enqueue: %v", r.Results[0].ErrorCode)
	}
	var leasedAt []int64
	consume := func(c *fibptest.Client, id uint32) {
		c.Send(id, &fibp.Consume{Queue: "q", Credit: 100, Throttles: []fibp.ThrottleDeclaration{throttle}})
		if _, f := c.Next(); f.Opcode() != fibp.OpConsumeOk {
			t.Fatalf("Consume answered %#v", f)
		}
		for _, d := range c.Deliveries(n) {
			leasedAt = append(leasedAt, int64(d.LeasedAt))
		}
	}
	consume(c, 3)
	if err := first.stop(syscall.SIGKILL); err == nil {
		t.Fatal("the server exited cleanly on SIGKILL")
	}

	second := startBinary(t, bin, dir, addr)
	defer second.stop(syscall.SIGTERM)
	c = fibptest.Dial(t, addr)
	c.Handshake()
	c.Send(4, &fibp.Consume{Queue: "q", Credit: 100, Throttles: []fibp.ThrottleDeclaration{throttle}})
	if _, f := c.Next(); f.Opcode() != fibp.OpConsumeOk {
		t.Fatalf("Consume answered %#v", f)
	}
	// The server itself says the bucket has no room until the first deliveries' window is over.
	b := c.Call(5, &fibp.GetThrottleBucket{Name: "api", BucketKind: fibp.BucketKindKeyed, Values: []string{}}).(*fibp.GetThrottleBucketResult)
	if b.ErrorCode != fibp.CodeOk || int64(b.Bucket.NextRoomAt) < leasedAt[0]+windowMs {
		t.Fatalf("after the restart the bucket reports next room at %d (%v); the first delivery was at %d, its window ends at %d",
			b.Bucket.NextRoomAt, b.ErrorCode, leasedAt[0], leasedAt[0]+windowMs)
	}
	for _, d := range c.Deliveries(n) {
		leasedAt = append(leasedAt, int64(d.LeasedAt))
	}
	slices.Sort(leasedAt)
	for i, at := range leasedAt {
		in := 0
		for _, other := range leasedAt[i:] {
			if other < at+windowMs {
				in++
			}
		}
		if in > n {
			t.Fatalf("%d deliveries within %d ms of the one at %d, at most %d allowed (lease times %v)", in, windowMs, at, n, leasedAt)
		}
	}
}
