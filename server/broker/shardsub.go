package broker

import (
	"strings"
	"sync"

	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/service"
)

// A Consume of a sharded queue (or of its dead-letter queue) on a node subscribes to every shard
// of it that this node leads, with one sink (shardSink) that carries the deliveries of them all
// to the one consumer. A node that leads none answers NotLeader with the address of a shard's
// leader (or NodeNotReady while it knows none). The subscription covers the shards led here when
// it started: when one of them moves to another node (or the queue is deleted) the whole
// subscription ends, as a subscription of an unsharded queue does, and the client subscribes
// again where GetRoutes says the shards are now led. A credit grant (consumer-managed credit)
// is given to every shard subscribed to: up to shards × credit deliveries may be outstanding.

// shardSink is the sink of a subscription to several shards: it hands the consumer one
// Subscribed, the deliveries of every shard one batch at a time, and one Ended, after which it
// ends the other shards' subscriptions.
type shardSink struct {
	inner Sink

	mu         sync.Mutex
	subscribed bool
	ended      bool
	parts      []*subscriptionHandle
}

func (s *shardSink) Subscribed(consumerID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.subscribed {
		s.subscribed = true
		s.inner.Subscribed(consumerID)
	}
}

func (s *shardSink) Deliver(ds []service.Delivery, onWritten func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	return s.inner.Deliver(ds, onWritten)
}

func (s *shardSink) Ended(e *Error) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	parts := s.parts
	s.mu.Unlock()
	for _, p := range parts {
		p.Unsubscribe() // the others: the one that ended is gone already, and ignores it
	}
	s.inner.Ended(e)
}

// shardHandle is the handle of a subscription to several shards.
type shardHandle struct{ s *shardSink }

func (h *shardHandle) Credit(n uint32) {
	for _, p := range h.parts() {
		p.Credit(n)
	}
}

func (h *shardHandle) Unsubscribe() {
	h.s.mu.Lock()
	h.s.ended = true
	h.s.mu.Unlock()
	for _, p := range h.parts() {
		p.Unsubscribe()
	}
}

func (h *shardHandle) parts() []*subscriptionHandle {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.s.parts
}

// shardZero names shard 0 of a sharded queue alone: its group bears the queue's name, which a
// Consume takes for every shard this node leads, so a Consume of "orders*0" subscribes to
// shard 0's group only, as "orders*2" does to shard 2's (the SDK consumes shard by shard to
// weigh the shards, client/fila/cluster_shardfair.go). It returns the group, and whether queue
// names shard 0 of a sharded queue.
func (b *Broker) shardZero(queue string) (string, bool) {
	parent, ok := strings.CutSuffix(queue, shard.Sep+"0")
	if !ok {
		return "", false
	}
	def, ok := b.catalog().Queue(parent)
	return parent, ok && def.Shards > 1 && def.DLQOf == ""
}

// shardGroups returns the groups of the shards of queue (a sharded queue, or its dead-letter
// queue), or nil when it is no sharded queue's.
func (b *Broker) shardGroups(queue string) []string {
	parent, dlq := strings.CutSuffix(queue, meta.DeadLetterSuffix)
	if !dlq {
		parent = queue
	}
	def, ok := b.catalog().Queue(parent)
	if !ok || def.Shards <= 1 || def.DLQOf != "" {
		return nil
	}
	out := make([]string, def.Shards)
	for i := range def.Shards {
		out[i] = shard.Name(parent, i)
		if dlq {
			out[i] = meta.DeadLetterName(out[i])
		}
	}
	return out
}

// subscribeShards subscribes to every group of groups (a sharded queue's shards) this node leads.
func (b *Broker) subscribeShards(s SubscribeRequest, sink Sink, groups []string) (Subscription, *Error) {
	ss := &shardSink{inner: sink}
	var refusal *Error
	for _, g := range groups {
		if b.lookup(g).a == nil {
			continue // no replica here
		}
		req := s
		req.Queue = g
		e := b.subscribe(req, ss)
		switch {
		case e == nil:
			ss.mu.Lock()
			ss.parts = append(ss.parts, &subscriptionHandle{b: b, queue: g, consumer: s.ConsumerID})
			ended := ss.ended
			ss.mu.Unlock()
			if ended { // a shard ended it already (deleted, or deposed)
				(&shardHandle{ss}).Unsubscribe()
				return nil, errorf(CodeNotLeader, "a shard of queue %q moved while subscribing; retry", s.Queue)
			}
		case e.Code == CodeNotLeader || e.Code == CodeNodeNotReady:
			if refusal == nil || refusal.LeaderAddr == "" {
				refusal = e
			}
		default:
			(&shardHandle{ss}).Unsubscribe()
			return nil, e
		}
	}
	if len(ss.parts) > 0 {
		return &shardHandle{ss}, nil
	}
	return nil, b.noShardHere(s.Queue, groups, refusal)
}

// noShardHere answers a Consume of a sharded queue on a node that leads none of its shards:
// NotLeader naming a shard's leader (by its address when known), NodeNotReady while no leader is
// known.
func (b *Broker) noShardHere(queue string, groups []string, refusal *Error) *Error {
	if refusal != nil && refusal.LeaderAddr != "" {
		return refusal
	}
	if !b.clustered() {
		return errorf(CodeQueueNotFound, "queue %q was deleted", queue)
	}
	var known *Error
	for _, g := range groups {
		e := b.notLeader(g)
		if e.Code == CodeNotLeader && (known == nil || e.LeaderAddr != "") {
			e.Message = "this node leads no shard of queue " + queue + "; " + e.Message
			known = e
		}
		if e.LeaderAddr != "" {
			break
		}
	}
	if known != nil {
		return known
	}
	return errorf(CodeNodeNotReady, "no leader of a shard of queue %q is known yet; retry", queue)
}
