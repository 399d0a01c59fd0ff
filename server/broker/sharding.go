package broker

import (
	"strings"

	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/service"
)

// Sharded queues (docs/sharding.md). A queue created with Shards N ≥ 2 is N queue groups (the
// meta package: shard 0 is the group named as the queue, shard i the group shard.Name(queue, i)),
// each placed, led and replicated as a queue of its own. The hot path maps a client's queue name
// to a shard's group before anything else, so that routing, forwarding and the actors see only
// groups:
//
//   - an Enqueue's message goes to shard shard.Plan.Of: the FNV-1a hash of its ordering group
//     when the queue is grouped and the message has one, else of its deduplication identity when
//     it has one, else of its fairness key — all as the producer sent the message (an on_enqueue
//     hook runs in the shard and cannot move a message to another shard);
//   - a shard's leader writes the shard's index into the IDs it makes (shard.SetIndex), so that
//     an Ack, Nack or ExtendLease, which carries the queue's name and the message's ID, goes to
//     the shard the ID names, on whichever node it arrives;
//   - a Consume subscribes to every shard this node leads (shardsub.go).
//
// Deliveries and dead-letter headers name the queue, never a shard's group (lane.public). An
// Enqueue's route hints name the shard's group (orders*2) with its leader: a client that routes
// by shard (the Go SDK) learns where each shard is led from them.

// shardMemo remembers the shard plan of the last queue a request named (requests name one
// queue, mostly).
type shardMemo struct {
	name string
	plan shard.Plan
	ok   bool
}

// of returns queue's shard plan (Shards ≤ 1 when it is not sharded, or no queue has the name).
func (m *shardMemo) of(cat *meta.Catalog, queue string) *shard.Plan {
	if m.ok && m.name == queue {
		return &m.plan
	}
	m.name, m.ok, m.plan = queue, true, shard.Plan{}
	def, ok := cat.Queue(queue)
	if !ok || def.Shards <= 1 {
		return &m.plan
	}
	lk, err := parseLaneKeys(&def)
	if err != nil { // a definition CreateQueue checked: never
		return &m.plan
	}
	m.plan = shardPlan(def.Shards, &lk)
	return &m.plan
}

// shardPlan is the shard.Plan of a queue of n shards with keys lk.
func shardPlan(n uint32, lk *laneKeys) shard.Plan {
	parts := func(k keys.Key) []shard.Part {
		out := make([]shard.Part, len(k))
		for i, p := range k {
			out[i] = shard.Part{Kind: uint8(p.Kind), Name: p.Name}
		}
		return out
	}
	return shard.Plan{Shards: n, Grouped: lk.ordering == store.OrderingGrouped, OrderingKey: parts(lk.orderingKey),
		DedupKey: parts(lk.dedupKey)}
}

// shardMessage is what m's shard is chosen from.
func shardMessage(m *Message) shard.Message {
	return shard.Message{Headers: m.Headers, FairnessKey: m.FairnessKey, IdempotencyKey: m.IdempotencyKey, HasIdempotencyKey: m.HasKey,
		Payload: m.Payload}
}

// shardMessages names each message of a sharded queue by its shard's group.
func (b *Broker) shardMessages(msgs []Message) {
	cat := b.catalog()
	var memo shardMemo
	for i := range msgs {
		m := &msgs[i]
		if p := memo.of(cat, m.Queue); p.Shards > 1 {
			sm := shardMessage(m)
			m.Queue = shard.Name(m.Queue, p.Of(&sm))
		}
	}
}

// settleQueue is the group an Ack, Nack or ExtendLease of message id of queue goes to: for a
// sharded queue (or its dead-letter queue) the shard the ID names.
func settleQueue(cat *meta.Catalog, memo *shardMemo, queue string, id [16]byte) string {
	parent, dlq := queue, strings.HasSuffix(queue, meta.DeadLetterSuffix)
	if dlq {
		parent = strings.TrimSuffix(queue, meta.DeadLetterSuffix)
	}
	p := memo.of(cat, parent)
	if p.Shards <= 1 {
		return queue
	}
	g := shard.Name(parent, shard.IndexOf(id, p.Shards))
	if dlq {
		return meta.DeadLetterName(g)
	}
	return g
}

// shardSettles names each item's queue by its shard's group.
func (b *Broker) shardSettles(queues []string, items []settleItem) {
	cat := b.catalog()
	var memo shardMemo
	for i := range queues {
		queues[i] = settleQueue(cat, &memo, queues[i], items[i].id)
	}
}

// publicName is the name clients know a lane by: a shard's group's lanes are its queue's (and
// that queue's dead-letter queue's).
func publicName(def *store.QueueRecord) string { return clientQueue(def.Name) }

// ShardCount is how many shards queue (or the queue of dead-letter queue queue) has: 1 when it
// is not sharded, 0 when no queue has the name.
func (b *Broker) ShardCount(queue string) uint32 {
	cat := b.catalog()
	def, ok := cat.Queue(queue)
	if !ok {
		return 0
	}
	if def.DLQOf != "" {
		def, _ = cat.Queue(def.DLQOf)
	}
	return max(def.Shards, 1)
}

// clientQueue is the name clients know group (or dead-letter queue) name by: a shard's group's
// is its queue's.
func clientQueue(name string) string {
	if q, _, ok := shard.Parse(name); ok {
		return q
	}
	if g, ok := strings.CutSuffix(name, meta.DeadLetterSuffix); ok {
		if q, _, ok := shard.Parse(g); ok {
			return meta.DeadLetterName(q)
		}
	}
	return name
}

// checkShards validates a CreateQueue's shard count: at most shard.Max; a queue ordered as a
// whole cannot be split, and the keys a shard is chosen by cannot read on_enqueue's attributes
// (the shard is chosen before the hook runs, in the shard).
func checkShards(req *QueueSpec) *Error {
	if req.Shards <= 1 {
		return nil
	}
	switch {
	case req.Shards > shard.Max:
		return errorf(CodeInvalidConfigValue, "shards %d: a queue has 1 to %d shards", req.Shards, shard.Max)
	case req.Ordering == service.OrderingQueue:
		return errorf(CodeInvalidConfigValue, "a queue ordered as a whole (ordering 1) cannot be sharded: use grouped ordering, which holds within each group")
	}
	for _, k := range []keys.Key{req.OrderingKey, req.DedupKey} {
		for _, p := range k {
			if p.Kind == keys.Attribute {
				return errorf(CodeInvalidConfigValue, "a sharded queue's ordering and dedup keys cannot read on_enqueue attributes (%s): a message's shard is chosen from the message as sent", p)
			}
		}
	}
	return nil
}
