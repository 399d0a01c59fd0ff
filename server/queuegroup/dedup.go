package queuegroup

import (
	"bytes"

	"github.com/filamq/fila/server/engine"
)

// dedupMemory remembers, for the deduplication window, the identity of each message a group
// accepted; expiry runs through a binary min-heap ordered by expiry time, so forgetting needs no
// scan and costs O(log n) per identity. Memory is one map entry and one heap item per identity
// remembered (an identity remembered again after its window has two heap items until the older
// one is popped).
type dedupMemory struct {
	ids   map[Identity]dedupEntry
	order []dedupItem // min-heap by (until, identity)
}

type dedupEntry struct {
	id    engine.MsgID
	until int64
}

type dedupItem struct {
	until int64
	id    Identity
}

func (a *dedupItem) less(b *dedupItem) bool {
	if a.until != b.until {
		return a.until < b.until
	}
	return bytes.Compare(a.id[:], b.id[:]) < 0
}

func newDedupMemory() dedupMemory { return dedupMemory{ids: map[Identity]dedupEntry{}} }

func (d *dedupMemory) remember(ident Identity, id engine.MsgID, until int64) {
	d.ids[ident] = dedupEntry{id: id, until: until}
	h := append(d.order, dedupItem{until: until, id: ident})
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].less(&h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	d.order = h
}

// pop removes the earliest item of the heap.
func (d *dedupMemory) pop() dedupItem {
	h := d.order
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && h[r].less(&h[c]) {
			c = r
		}
		if !h[c].less(&h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	d.order = h
	return top
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
	for len(d.order) > 0 && d.order[0].until <= at {
		it := d.pop()
		if e, ok := d.ids[it.id]; ok && e.until == it.until {
			delete(d.ids, it.id)
			n++
		}
	}
	if len(d.order) == 0 && cap(d.order) > 1024 {
		d.order = nil // a drained window gives its memory back
	}
	return n
}

func (d *dedupMemory) next() (int64, bool) {
	if len(d.order) == 0 {
		return 0, false
	}
	return d.order[0].until, true
}
