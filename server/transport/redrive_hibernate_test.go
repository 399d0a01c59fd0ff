package transport

import (
	"fmt"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// A redrive in batches of a group that hibernates between them, and wakes for each: every
// answered batch is in the stats read right after it (from the live state, and from the summary
// once it sleeps again), every message is in exactly one of the two queues, and after a restart
// each message is delivered once from the queue.
func TestRedriveAcrossHibernationCountsEachMessageOnce(t *testing.T) {
	const n, batch = 40, 10
	dir := t.TempDir()
	addr, b, stop := startIdle(t, dir)
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "r", MaxAttempts: 1, Backoff: fibp.BackoffNone, VisibilityTimeoutMs: 60_000})
	msgs := make([]fibp.EnqueueMessage, n)
	for i := range msgs {
		msgs[i] = fibp.EnqueueMessage{Queue: "r", Payload: fmt.Appendf(nil, "m%d", i)}
	}
	ids := enqueue(t, c, msgs...)

	consumer := dialRaw(t, addr)
	consumer.Handshake()
	consumer.Subscribe(2, "r", n)
	nack := &fibp.Nack{}
	for _, d := range consumer.Deliveries(n) {
		nack.Items = append(nack.Items, fibp.NackItem{Queue: "r", MessageID: d.MessageID, Error: "fatal"})
	}
	for i, r := range consumer.Call(3, nack).(*fibp.NackResult).Results {
		if r.ErrorCode != fibp.CodeOk {
			t.Fatalf("nack %d: %v", i, r.ErrorCode)
		}
	}
	consumer.NC.Close()
	eventually(t, "the consumer is gone and every message dead-lettered", func() bool {
		return stats(t, c, "r").ActiveConsumers == 0 && stats(t, c, "r.dlq").Depth == n
	})

	counts := func(when string, moved uint64) {
		t.Helper()
		q, d := stats(t, c, "r"), stats(t, c, "r.dlq")
		if q.Depth != moved || q.InFlight != 0 || d.Depth != n-moved || d.InFlight != 0 {
			t.Fatalf("%s, %d redriven: queue depth %d (in flight %d), dlq depth %d (in flight %d)",
				when, moved, q.Depth, q.InFlight, d.Depth, d.InFlight)
		}
	}
	var moved uint64
	for i := uint32(0); moved < n; i++ {
		if i%2 == 0 {
			asleep(t, b) // this batch wakes the group; the next one finds it awake
		}
		rr := c.Call(10+i, &fibp.Redrive{DLQQueue: "r.dlq", Count: batch}).(*fibp.RedriveResult)
		if rr.ErrorCode != fibp.CodeOk || rr.Redriven != batch {
			t.Fatalf("redrive %d: %+v", i, rr)
		}
		moved += rr.Redriven
		counts("right after the redrive", moved)
	}
	asleep(t, b)
	counts("asleep after the redrive", n)
	stop()

	addr, b, stop = startIdle(t, dir)
	defer stop()
	if got := b.AwakeQueues(); got != 0 {
		t.Fatalf("the restart opened %d groups, want none", got)
	}
	c = dialRaw(t, addr)
	c.Handshake()
	counts("after a restart", n)
	c.Subscribe(100, "r", n)
	seen := map[wire.UUID]int{}
	for _, d := range c.Deliveries(n) {
		seen[d.MessageID]++
		if d.RedriveCount != 1 {
			t.Errorf("%v delivered with redrive count %d, want 1", d.MessageID, d.RedriveCount)
		}
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("%v delivered %d times after the redrive, want once", id, seen[id])
		}
	}
	if s := stats(t, c, "r.dlq"); s.Depth != 0 {
		t.Errorf("the dead-letter queue still holds %d", s.Depth)
	}
}
