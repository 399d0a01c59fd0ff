package broker

import (
	"container/heap"
	"crypto/sha256"
	"encoding/binary"

	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/storage"
)

// Deduplication (deduplication.md): a queue remembers the identity of each message it accepted
// for its dedup window; a later message with the same identity is not enqueued and is answered
// with the original's ID. Without a queue dedup key — queues cannot define one yet — the identity
// is the producer's idempotency key. Identities are stored hashed (SHA-256, 128 bits kept), are
// durable with the message, and expire through a heap ordered by expiry, so forgetting them needs
// no scan.
type dedupMemory struct {
	ids   map[storage.ID]dedupEntry
	order dedupHeap
}

type dedupEntry struct {
	id        engine.MsgID
	expiresAt int64
}

type dedupItem struct {
	expiresAt int64
	hash      storage.ID
}

type dedupHeap []dedupItem

func (h dedupHeap) Len() int           { return len(h) }
func (h dedupHeap) Less(i, j int) bool { return h[i].expiresAt < h[j].expiresAt }
func (h dedupHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dedupHeap) Push(x any)        { *h = append(*h, x.(dedupItem)) }
func (h *dedupHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

func newDedupMemory() dedupMemory { return dedupMemory{ids: map[storage.ID]dedupEntry{}} }

// identityHash hashes an idempotency key, length-prefixed so that identities of several parts
// (dedup keys, later) can never collide by concatenation.
func identityHash(idempotencyKey string) storage.ID {
	h := sha256.New()
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(idempotencyKey)))
	h.Write(n[:])
	h.Write([]byte(idempotencyKey))
	var out storage.ID
	copy(out[:], h.Sum(nil))
	return out
}

// dedupWindow is the queue's window in milliseconds.
func (a *actor) dedupWindow() uint64 {
	if a.def.DedupWindowMs > 0 {
		return a.def.DedupWindowMs
	}
	return a.b.currentDefaults().DedupWindowMs
}

// duplicateOf returns the original message of an identity the queue still remembers.
func (a *actor) duplicateOf(hash storage.ID, now int64) (engine.MsgID, bool) {
	e, ok := a.dedup.ids[hash]
	if !ok || e.expiresAt <= now {
		return engine.MsgID{}, false
	}
	return e.id, true
}

// remember records an identity until exp, in memory and in the round's batch.
func (a *actor) remember(hash storage.ID, id engine.MsgID, exp int64) {
	a.dedup.ids[hash] = dedupEntry{id: id, expiresAt: exp}
	heap.Push(&a.dedup.order, dedupItem{expiresAt: exp, hash: hash})
	a.batch.PutDedup(a.name, hash, &store.DedupRecord{MessageID: wire.UUID(id), ExpiresAt: uint64(exp)})
}

// forgetExpired drops identities whose window has passed.
func (a *actor) forgetExpired(now int64) {
	for a.dedup.order.Len() > 0 && a.dedup.order[0].expiresAt <= now {
		it := heap.Pop(&a.dedup.order).(dedupItem)
		if e, ok := a.dedup.ids[it.hash]; ok && e.expiresAt == it.expiresAt {
			delete(a.dedup.ids, it.hash)
			a.batch.DeleteDedup(a.name, it.hash)
		}
	}
}

// nextDedupExpiry is when the oldest remembered identity expires.
func (a *actor) nextDedupExpiry() (int64, bool) {
	if a.dedup.order.Len() == 0 {
		return 0, false
	}
	return a.dedup.order[0].expiresAt, true
}

// recoverDedup loads the remembered identities; expired ones are forgotten on the first round.
func (a *actor) recoverDedup() error {
	return a.b.db.Dedups(a.name, func(hash storage.ID, r *store.DedupRecord) error {
		e := dedupEntry{id: engine.MsgID(r.MessageID), expiresAt: int64(r.ExpiresAt)}
		a.dedup.ids[hash] = e
		heap.Push(&a.dedup.order, dedupItem{expiresAt: e.expiresAt, hash: hash})
		return nil
	})
}
