package broker

import (
	"strings"

	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/server/meta"
)

// What the admin HTTP API needs to know of a sharded queue to answer about it as a whole
// (docs/sharding.md, "The whole queue"): which shard holds a fairness key's messages.

// KeyShard is the shard of sharded queue queue (or of its dead-letter queue) that holds the
// messages of fairness key key, when one shard holds them all by construction: when the queue
// is neither grouped nor deduplicated by a key, a message's shard is the hash of its fairness key
// ("" is the default key). ok is false for a queue that is not sharded, or whose messages are
// placed by their ordering group or dedup key. A message sent with an idempotency key is placed
// by that key, so a key's messages sent with one may sit in other shards.
func (b *Broker) KeyShard(queue, key string) (i uint32, ok bool) {
	cat := b.catalog()
	name := strings.TrimSuffix(queue, meta.DeadLetterSuffix)
	def, found := cat.Queue(name)
	if !found || def.Shards <= 1 {
		return 0, false
	}
	lk, err := parseLaneKeys(&def)
	if err != nil {
		return 0, false
	}
	p := shardPlan(def.Shards, &lk)
	if p.Grouped || len(p.DedupKey) > 0 {
		return 0, false
	}
	return p.Of(&shard.Message{FairnessKey: key}), true
}
