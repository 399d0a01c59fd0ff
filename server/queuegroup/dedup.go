package queuegroup

import (
	"container/heap"

	"github.com/filamq/fila/server/engine"
)

// dedupMemory remembers, for the deduplication window, the identity of each message a group
// accepted; expiry runs through a heap ordered by expiry time, so forgetting needs no scan.
type dedupMemory struct {
	ids   map[Identity]dedupEntry
	order dedupHeap
}

type dedupEntry struct {
	id    engine.MsgID
	until int64
}

type dedupItem struct {
	until int64
	id    Identity
}

type dedupHeap []dedupItem

func (h dedupHeap) Len() int { return len(h) }
func (h dedupHeap) Less(i, j int) bool {
	if h[i].until != h[j].until {
		return h[i].until < h[j].until
	}
	return string(h[i].id[:]) < string(h[j].id[:])
}
func (h dedupHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dedupHeap) Push(x any)   { *h = append(*h, x.(dedupItem)) }
func (h *dedupHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

func newDedupMemory() dedupMemory { return dedupMemory{ids: map[Identity]dedupEntry{}} }

func (d *dedupMemory) remember(ident Identity, id engine.MsgID, until int64) {
	d.ids[ident] = dedupEntry{id: id, until: until}
	heap.Push(&d.order, dedupItem{until: until, id: ident})
}

func (d *dedupMemory) lookup(ident Identity, now int64) (engine.MsgID, bool) {
	e, ok := d.ids[ident]
	if !ok || e.until <= now {
		return engine.MsgID{}, false
	}
	return e.id, true
}

// forget drops identities remembered until at or before at and returns how many.
func (d *dedupMemory) forget(at int64) int {
	n := 0
	for d.order.Len() > 0 && d.order[0].until <= at {
		it := heap.Pop(&d.order).(dedupItem)
		if e, ok := d.ids[it.id]; ok && e.until == it.until {
			delete(d.ids, it.id)
			n++
		}
	}
	return n
}

func (d *dedupMemory) next() (int64, bool) {
	if d.order.Len() == 0 {
		return 0, false
	}
	return d.order[0].until, true
}
