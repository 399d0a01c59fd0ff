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
