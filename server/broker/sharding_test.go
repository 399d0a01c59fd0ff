package broker

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/keys"
)

// The key shard.Plan hashes (which the SDK computes too) is exactly the ordering group or the
// deduplication identity the broker evaluates on the message (grouping.go), else its fairness
// key: random keys and messages, against the lane's own evaluation.
func TestShardKeyIsTheBrokersGroupOrIdentity(t *testing.T) {
	if shard.DefaultFairnessKey != engine.DefaultFairnessKey {
		t.Fatalf("shard.DefaultFairnessKey %q, the broker's %q", shard.DefaultFairnessKey, engine.DefaultFairnessKey)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(kinds []keys.Kind) keys.Key {
		var k keys.Key
		for _, kind := range kinds {
			if rng.IntN(2) == 0 {
				continue
			}
			p := keys.Part{Kind: kind}
			if kind == keys.Header {
				p.Name = fmt.Sprint("h", rng.IntN(2))
			}
			k = append(k, p)
		}
		return k
	}
	for range 2000 {
		lk := laneKeys{orderingKey: pick([]keys.Kind{keys.Header, keys.FairnessKey}),
			dedupKey: pick([]keys.Kind{keys.Header, keys.IdempotencyKey, keys.PayloadHash, keys.HeadersHash, keys.FairnessKey})}
		if len(lk.orderingKey) > 0 && rng.IntN(3) > 0 {
			lk.ordering = store.OrderingGrouped
		}
		m := Message{Queue: "q", Headers: map[string]string{}, Payload: []byte(fmt.Sprint(rng.IntN(3)))}
		for h := range 2 {
			if rng.IntN(2) == 0 {
				m.Headers[fmt.Sprint("h", h)] = fmt.Sprint(rng.IntN(3))
			}
		}
		if rng.IntN(2) == 0 {
			m.FairnessKey = fmt.Sprint("k", rng.IntN(3))
		}
		if rng.IntN(2) == 0 {
			m.IdempotencyKey, m.HasKey = fmt.Sprint("i", rng.IntN(3)), true
		}
		fk := m.FairnessKey
		if fk == "" {
			fk = engine.DefaultFairnessKey
		}
		subj := keys.Subject{Headers: m.Headers, FairnessKey: fk, IdempotencyKey: m.IdempotencyKey, HasIdempotencyKey: m.HasKey, Payload: m.Payload}
		want := []byte(fk)
		if id, ok := lk.identity(&subj); ok {
			want = id[:]
		}
		if g, grouped, _ := lk.group(&subj); grouped {
			want = []byte(g)
		}
		plan, sm := shardPlan(4, &lk), shardMessage(&m)
		if got := plan.Key(&sm); !bytes.Equal(got, want) {
			t.Fatalf("keys %+v, message %+v: shard key %x, the broker's %x", lk, m, got, want)
		}
	}
}
