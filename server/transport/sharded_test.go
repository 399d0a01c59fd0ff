package transport

import (
	"fmt"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/service"
)

// A sharded queue on a single node, through FIBP: each message goes to the shard its ordering
// group hashes to (its ID says which), one subscription delivers every shard's messages in
// order within each group, acks reach the shards, an idempotency key is deduplicated, and
// GetStats and ListQueues answer the queue as a whole.
func TestShardedQueueOnOneNode(t *testing.T) {
	bo := broker.DefaultOptions(t.TempDir())
	bo.Sync = false
	_, b, addr, stop := serveAt(t, bo, Options{})
	t.Cleanup(stop)
	const shards = 4
	if e := b.CreateQueue(service.QueueSpec{Name: "orders", Shards: shards, Ordering: service.OrderingGrouped,
		OrderingKey: keys.Key{{Kind: keys.Header, Name: "customer"}}, MaxAttempts: 2}); e != nil {
		t.Fatal(e)
	}
	for _, bad := range []service.QueueSpec{{Name: "big", Shards: shard.Max + 1}, {Name: "whole", Shards: 2, Ordering: service.OrderingQueue}} {
		if e := b.CreateQueue(bad); e == nil || e.Code != service.CodeInvalidConfigValue {
			t.Fatalf("CreateQueue %+v: %v", bad, e)
		}
	}
	c := dialRaw(t, addr)
	c.Handshake()

	const groups, per = 12, 10
	var msgs []fibp.EnqueueMessage
	for n := range per {
		for g := range groups {
			msgs = append(msgs, fibp.EnqueueMessage{Queue: "orders", Headers: map[string]string{"customer": fmt.Sprint("c", g)},
				Payload: []byte(fmt.Sprint(n))})
		}
	}
	ids := enqueue(t, c, msgs...)
	used := map[uint32]bool{}
	for i, id := range ids {
		g, _ := keys.Key{{Kind: keys.Header, Name: "customer"}}.Group(&keys.Subject{Headers: msgs[i].Headers})
		if got, want := shard.IndexOf(id, shards), shard.Index([]byte(g), shards); got != want {
			t.Fatalf("message %d of group %s in shard %d, want %d", i, msgs[i].Headers["customer"], got, want)
		}
		used[shard.IndexOf(id, shards)] = true
	}
	if len(used) < 3 {
		t.Fatalf("12 groups landed in shards %v only", used)
	}
	if s := stats(t, c, "orders"); s.ErrorCode != fibp.CodeOk || s.Depth != groups*per || s.Settings["shards"] != "4" {
		t.Fatalf("GetStats: %v depth %d (want %d), settings %v", s.ErrorCode, s.Depth, groups*per, s.Settings)
	}
	if gr := c.Call(111, &fibp.GetRoutes{Queues: []fibp.QueueRef{{Queue: "orders"}}}).(*fibp.GetRoutesResult); len(gr.Entries) != 1 ||
		len(gr.Entries[0].Shards) != shards || gr.Entries[0].Shards[3].ShardIndex != 3 || gr.Entries[0].Shards[3].LeaderAddr == "" {
		t.Fatalf("GetRoutes: %+v", gr.Entries)
	}
	if page, e := b.QueueSummaries(service.QueueListOptions{}); e != nil || len(page.Queues) != 1 || page.Queues[0].Name != "orders" ||
		page.Queues[0].Depth != groups*per || page.Total != 1 {
		t.Fatalf("the HTTP queue list: %+v %v", page, e) // one row, every shard summed
	}
	if row, e := b.QueueSummary("orders"); e != nil || row.Depth != groups*per {
		t.Fatalf("the HTTP queue row: %+v %v", row, e)
	}
	lr := c.Call(103, &fibp.ListQueues{}).(*fibp.ListQueuesResult)
	if len(lr.Queues) != 2 || lr.Queues[0].Name != "orders" || lr.Queues[0].Depth != groups*per || lr.Queues[1].Name != "orders.dlq" {
		t.Fatalf("ListQueues: %+v", lr.Queues)
	}

	c.Subscribe(7, "orders", 0)
	next := map[string]int{}
	for got := 0; got < groups*per; {
		ds := c.Deliveries(1)
		for _, d := range ds {
			got++
			if d.Queue != "orders" {
				t.Fatalf("a delivery names queue %q", d.Queue)
			}
			g := d.Headers["customer"]
			if string(d.Payload) != fmt.Sprint(next[g]) {
				t.Fatalf("group %s: got %s, want %d", g, d.Payload, next[g])
			}
			next[g]++
			ar := c.Call(200, &fibp.Ack{Items: []fibp.AckItem{{Queue: "orders", MessageID: d.MessageID}}}).(*fibp.AckResult)
			if ar.Results[0].ErrorCode != fibp.CodeOk {
				t.Fatalf("ack: %v", ar.Results[0].ErrorCode)
			}
		}
	}
	waitFor(t, func() bool { s := stats(t, c, "orders"); return s.Depth == 0 && s.InFlight == 0 })

	// Nacked to the dead-letter queue (max_attempts 2), redriven back, as the whole queue.
	r := c.Call(104, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "orders", Headers: map[string]string{"customer": "x"},
		Payload: []byte("dead"), IdempotencyKey: wire.Some("k1")}}}).(*fibp.EnqueueResult)
	dup := c.Call(105, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "orders", Headers: map[string]string{"customer": "x"},
		Payload: []byte("dead"), IdempotencyKey: wire.Some("k1")}}}).(*fibp.EnqueueResult)
	if dup.Results[0].MessageID != r.Results[0].MessageID {
		t.Fatalf("the repeat of an idempotency key got another ID")
	}
	for range 2 {
		d := c.Deliveries(1)[0]
		c.Call(106, &fibp.Nack{Items: []fibp.NackItem{{Queue: "orders", MessageID: d.MessageID, Error: "no"}}})
	}
	waitFor(t, func() bool { return stats(t, c, "orders.dlq").Depth == 1 })
	rr := c.Call(107, &fibp.Redrive{DLQQueue: "orders.dlq"}).(*fibp.RedriveResult)
	if rr.ErrorCode != fibp.CodeOk || rr.Redriven != 1 {
		t.Fatalf("redrive: %+v", rr)
	}
	if d := c.Deliveries(1)[0]; string(d.Payload) != "dead" || d.RedriveCount != 1 {
		t.Fatalf("redriven delivery %+v", d)
	}

	// An update changes every shard; a delete drops them all.
	ur := c.Call(108, &fibp.UpdateQueue{Queue: "orders", MaxAttempts: wire.Some[uint32](5)}).(*fibp.UpdateQueueResult)
	if ur.ErrorCode != fibp.CodeOk {
		t.Fatalf("UpdateQueue: %v", ur.ErrorCode)
	}
	for i := range uint32(shards) {
		if d, e := b.Definition(shard.Name("orders", i)); e != nil || d.MaxAttempts != 5 {
			t.Fatalf("shard %d after the update: %+v %v", i, d, e)
		}
	}
	c.Send(109, &fibp.DeleteQueue{Queue: "orders"})
	for ended := false; ; { // the subscription hears the queue was deleted (an Error frame on its request)
		h, f := c.Next()
		if h.RequestID == 7 {
			ended = true
			continue
		}
		if dr, ok := f.(*fibp.DeleteQueueResult); !ok || h.RequestID != 109 || dr.ErrorCode != fibp.CodeOk {
			t.Fatalf("DeleteQueue answered %v: %#v", h.RequestID, f)
		}
		if !ended {
			h, f = c.Next()
			if h.RequestID != 7 {
				t.Fatalf("the subscription did not end: %v %#v", h.RequestID, f)
			}
		}
		break
	}
	waitFor(t, func() bool {
		_, e := b.Definition("orders*3")
		return len(c.Call(110, &fibp.ListQueues{}).(*fibp.ListQueuesResult).Queues) == 0 && e != nil
	})
}
