package transport

import (
	"testing"

	"github.com/filamq/fila/generated/fibp"
)

// BenchmarkThrottleSaturatedOverFIBP consumes a backlog of 1 KB messages through one throttle of
// 200 deliveries per 100 ms over a real connection, acking every delivery, and reports the rate
// achieved after the first window against the limit, from the deliveries' lease times.
func BenchmarkThrottleSaturatedOverFIBP(b *testing.B) {
	const n, windowMs, deliveries = 200, 100, 4000
	for b.Loop() {
		_, addr := startServer(b, Options{})
		c := dialRaw(b, addr)
		c.Handshake()
		if r := c.Call(1, &fibp.CreateQueue{Name: "q"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			b.Fatal(r.ErrorCode)
		}
		for range deliveries / 1000 {
			msgs := make([]fibp.EnqueueMessage, 1000)
			for i := range msgs {
				msgs[i] = fibp.EnqueueMessage{Queue: "q", Payload: make([]byte, 1024)}
			}
			c.Call(2, &fibp.Enqueue{Messages: msgs})
		}
		c.Send(3, &fibp.Consume{Queue: "q", Throttles: []fibp.ThrottleDeclaration{{Name: "t",
			Limits: []fibp.ThrottleLimit{{MaxDeliveries: n, WindowMs: windowMs}}}}})
		c.Next()
		var at []uint64
		for len(at) < deliveries {
			_, f := c.Next()
			d, ok := f.(*fibp.Delivery)
			if !ok {
				continue // an AckResult
			}
			ack := &fibp.Ack{}
			for _, m := range d.Messages {
				at = append(at, m.LeasedAt)
				ack.Items = append(ack.Items, fibp.AckItem{Queue: "q", MessageID: m.MessageID})
			}
			c.Send(4, ack)
		}
		first, last := at[0], at[len(at)-1]
		firstWindow := 0
		for _, t := range at {
			if t < first+windowMs {
				firstWindow++
			}
		}
		rate := float64(len(at)-firstWindow) / float64(last-first) * 1000
		b.ReportMetric(100*rate/(n*1000/windowMs), "%limit")
	}
}
