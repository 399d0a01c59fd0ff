package fila

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/filamq/fila/generated/shard"
)

// Producers route each message of a sharded queue to its shard's leader (docs/sharding.md): the
// Cluster computes the message's shard as the server does (generated/shard) and routes it by the
// shard's group name (orders*2), whose leader it learns from the route hints of the answers
// (a node that forwards a sharded queue's message names its shard's group and leader). A message
// sent elsewhere is still stored in its shard: the node it reaches forwards it. What a queue's
// shards are chosen by is looked up once per queue, in the background, the first time a message
// is sent to it (GetRoutes, then GetStats' settings for a sharded queue); until then, and when
// the lookup fails (retried after planRetry), its messages go to the queue's route.

// planRetry is how long a failed lookup of a queue's shard plan is remembered.
const planRetry = 10 * time.Second

// queuePlan is what the Cluster knows of a queue's shards.
type queuePlan struct {
	plan    *shard.Plan // nil: not sharded, or not known
	retryAt time.Time   // zero: final; else when to look it up again
}

// routeKey is what m is routed by: for a message of a sharded queue, its shard's group name;
// else its queue.
func (c *Cluster) routeKey(m *Message) string {
	v, ok := c.plans.Load(m.Queue)
	if !ok {
		c.lookUpPlan(m.Queue)
		return m.Queue
	}
	qp := v.(*queuePlan)
	if qp.plan == nil {
		if !qp.retryAt.IsZero() && time.Now().After(qp.retryAt) && c.plans.CompareAndDelete(m.Queue, qp) {
			c.lookUpPlan(m.Queue)
		}
		return m.Queue
	}
	sm := shard.Message{Headers: m.Headers, FairnessKey: m.FairnessKey, IdempotencyKey: m.IdempotencyKey,
		HasIdempotencyKey: m.IdempotencyKey != "", Payload: m.Payload}
	return shard.Name(m.Queue, qp.plan.Of(&sm))
}

// lookUpPlan looks queue's shard plan up in the background, unless a lookup is under way.
func (c *Cluster) lookUpPlan(queue string) {
	pending := &queuePlan{retryAt: time.Now().Add(planRetry)}
	if _, loaded := c.plans.LoadOrStore(queue, pending); loaded {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(c.life, c.opts.DialTimeout)
		defer cancel()
		qp := c.fetchPlan(ctx, queue)
		c.plans.CompareAndSwap(queue, pending, qp)
	}()
}

// fetchPlan asks any node for queue's shards and, for a sharded queue, its keys.
func (c *Cluster) fetchPlan(ctx context.Context, queue string) *queuePlan {
	retry := &queuePlan{retryAt: time.Now().Add(planRetry)}
	cl, err := c.Any(ctx)
	if err != nil {
		return retry
	}
	rs, err := cl.GetRoutes(ctx, queue)
	switch {
	case err != nil || len(rs) != 1:
		return retry
	case len(rs[0].Shards) <= 1:
		return &queuePlan{} // not sharded: its shard count is fixed at creation
	}
	st, err := cl.GetStats(ctx, queue)
	if err != nil {
		return retry // a key without admin on the queue: its messages go to the queue's route
	}
	return &queuePlan{plan: planOf(st.Settings, uint32(len(rs[0].Shards)))}
}

// planOf reads a sharded queue's plan from its settings (GetStats).
func planOf(settings map[string]string, shards uint32) *shard.Plan {
	if n, err := strconv.ParseUint(settings["shards"], 10, 32); err == nil && n > 1 {
		shards = uint32(n)
	}
	return &shard.Plan{Shards: shards, Grouped: settings["ordering"] == "grouped", OrderingKey: planKey(settings["ordering_key"]),
		DedupKey: planKey(settings["dedup_key"])}
}

// planKey reads a key as the settings print it (header:customer,fairness_key).
func planKey(s string) []shard.Part {
	if s == "" {
		return nil
	}
	var out []shard.Part
	for _, part := range strings.Split(s, ",") {
		kind, name, _ := strings.Cut(part, ":")
		p := shard.Part{Name: name}
		switch kind {
		case "header":
			p.Kind = shard.KindHeader
		case "fairness_key":
			p.Kind = shard.KindFairnessKey
		case "attribute":
			p.Kind = shard.KindAttribute
		case "idempotency_key":
			p.Kind = shard.KindIdempotencyKey
		case "payload_hash":
			p.Kind = shard.KindPayloadHash
		case "headers_hash":
			p.Kind = shard.KindHeadersHash
		default:
			p.Kind = 0xFF // unknown: no message has it, so the shard falls back as the server's does not: a forward
		}
		out = append(out, p)
	}
	return out
}
