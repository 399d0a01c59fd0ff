package broker

import (
	"testing"

	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/server/service"
)

// nopSink takes deliveries and remembers whether the subscription ended.
type nopSink struct{ ended chan *Error }

func (nopSink) Subscribed(string)                       {}
func (nopSink) Deliver([]service.Delivery, func()) bool { return true }
func (s nopSink) Ended(e *Error)                        { s.ended <- e }

// A Consume of a 2-shard queue on three nodes: a node that leads a shard subscribes to it; the
// node that leads none answers NotLeader (it knows where the shards are led); a DeleteQueue ends
// a subscription once.
func TestConsumeOfAShardedQueueOnANodeLeadingNone(t *testing.T) {
	c := startCluster(t)
	if e := c.createQueue(QueueSpec{Name: "orders", Shards: 2}); e != nil {
		t.Fatal(e)
	}
	leaders := map[*Broker]bool{}
	for i := range uint32(2) {
		leaders[c.awaitLeader(shard.Name("orders", i))] = true
	}
	var idle *Broker
	for _, b := range c.brokers {
		if !leaders[b] {
			idle = b
		}
	}
	if idle == nil {
		t.Skip("the two shards' leaders are on one node: no node leads none") // placement spreads them: not seen
	}
	sink := nopSink{ended: make(chan *Error, 4)}
	if _, e := idle.Subscribe(SubscribeRequest{Queue: "orders", ConsumerID: "c0"}, sink); e == nil || e.Code != CodeNotLeader {
		t.Fatalf("a Consume on the node leading no shard: %v, want NotLeader", e)
	}
	for b := range leaders {
		if _, e := b.Subscribe(SubscribeRequest{Queue: "orders", ConsumerID: "c1"}, sink); e != nil {
			t.Fatalf("a Consume on a shard's leader: %v", e)
		}
	}
	// "orders*0" names shard 0's group alone (the SDK consumes shard by shard), on its leader.
	zero := nopSink{ended: make(chan *Error, 4)}
	lead0 := c.awaitLeader("orders")
	h, e := lead0.Subscribe(SubscribeRequest{Queue: "orders*0", ConsumerID: "z"}, zero)
	if e != nil {
		t.Fatalf("a Consume of orders*0 on shard 0's leader: %v", e)
	}
	if one, ok := h.(*subscriptionHandle); !ok || one.queue != "orders" {
		t.Fatalf("a Consume of orders*0 subscribed %#v, want shard 0's group alone", h)
	}
	for _, b := range c.brokers {
		if b != lead0 {
			if _, e := b.Subscribe(SubscribeRequest{Queue: "orders*0", ConsumerID: "z"}, zero); e == nil || e.Code != CodeNotLeader {
				t.Fatalf("a Consume of orders*0 on a node not leading it: %v, want NotLeader", e)
			}
		}
	}
	if e := c.createQueue(QueueSpec{Name: "plain"}); e != nil {
		t.Fatal(e)
	}
	if _, e := c.awaitLeader("plain").Subscribe(SubscribeRequest{Queue: "plain*0", ConsumerID: "z"}, zero); e == nil || e.Code != CodeQueueNotFound {
		t.Fatalf("a Consume of plain*0, plain not sharded: %v, want QueueNotFound", e)
	}
	if e := c.createQueue(QueueSpec{Name: "orders"}); e == nil || e.Code != CodeQueueAlreadyExists {
		t.Fatalf("creating the name again: %v", e)
	}
	var b *Broker
	c.eventually("a meta leader", func() bool { b = c.metaLeader(); return b != nil })
	if e := b.DeleteQueue("orders"); e != nil {
		t.Fatal(e)
	}
	for range leaders { // each leader's subscription ends once
		if e := <-sink.ended; e == nil || e.Code != CodeQueueNotFound {
			t.Fatalf("ended with %v, want QueueNotFound", e)
		}
	}
}
