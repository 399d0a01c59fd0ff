package engine

import (
	"encoding/binary"
	"slices"
)

// msgIndex maps the IDs of stored messages to their slots. Broker IDs are UUIDv7 whose first 8
// bytes (Unix ms, version, a 12-bit counter) increase strictly within one process, so in the
// common case a new ID sorts after every stored one: such IDs go to ordIndex, sorted chunks of
// (prefix, slot) appended at the tail, where finding and deleting touch only the chunks near the
// IDs in use (FIFO consumption touches the front and the tail) and the rest of the index can be
// swept out of memory (offheap.go). Every other ID — a dead-letter or redrive copy carrying an old
// ID, IDs replayed from another leader, a clock that went back, a prefix equal to the last one —
// goes to side, the hash table (idIndex).
//
// Memory: 12 bytes per entry in ordered chunks at least a quarter live on average (see ordIndex;
// about fully live under FIFO consumption), plus idIndex's 11–21 bytes per message in the side
// table.
type msgIndex struct {
	ord  ordIndex
	side idIndex
}

// newMsgIndex returns an empty index whose ordered chunks hold chunkCap entries.
func newMsgIndex(chunkCap int) *msgIndex { return &msgIndex{ord: ordIndex{chunkCap: chunkCap}} }

// idPrefix is the ordering key of id: its first 8 bytes, big-endian, so prefix order is ID order.
func idPrefix(id MsgID) uint64 { return binary.BigEndian.Uint64(id[0:8]) }

// find returns the slot of id, confirming the whole ID from the slab.
func (x *msgIndex) find(id MsgID, s *slab) (uint32, bool) {
	if slot, ok := x.ord.find(idPrefix(id)); ok && s.at(slot).id == id {
		return slot, true
	}
	return x.side.find(id, s)
}

// insert adds id → slot; id must not be present.
func (x *msgIndex) insert(id MsgID, slot uint32) {
	if !x.ord.add(idPrefix(id), slot) {
		x.side.insert(id, slot)
	}
}

// remove deletes id, which must be present at slot.
func (x *msgIndex) remove(id MsgID, slot uint32) {
	if !x.ord.remove(idPrefix(id), slot) {
		x.side.remove(id, slot)
	}
}

// len returns the number of IDs stored.
func (x *msgIndex) len() int { return x.ord.n + x.side.n }

// unmap gives back the mapped memory; the index must be dropped afterwards.
func (x *msgIndex) unmap() {
	x.ord.unmap()
	x.side.unmap()
}

// ordChunkCap is the number of entries of a full ordered chunk: 64 Ki × 12 B = 768 KiB, its
// prefixes (512 KiB) and slots (256 KiB) each big enough to be mapped (mapMin).
const ordChunkCap = 1 << 16

// firstOrdCap is the initial capacity of a sole chunk, so a short queue's index stays small.
const firstOrdCap = 16

// deadSlot marks a deleted entry of an ordered chunk; it keeps its prefix so the chunk stays
// sorted without moving anything.
const deadSlot = nilIdx

// ordIndex holds (ID prefix, slot) entries with strictly increasing prefixes in a list of chunks,
// each two parallel pointer-free arrays:
//
//	keys  [cap]uint64  ID prefixes, strictly increasing across the chunk and the whole list
//	slots [cap]uint32  slot of the message, or deadSlot once deleted
//
// A new entry is appended to the last chunk, so only a prefix greater than the last entry's is
// accepted (add reports false otherwise). Lookup is a binary search of mins (the first prefix of
// every chunk, on the Go heap) and then an interpolation search of the chunk's keys. Deleting marks the entry dead; a
// chunk that empties is freed, and two neighbours whose live entries fit in one chunk are merged
// (the dead entries dropped). A full last chunk at most half live is compacted in place instead
// of starting a new one. So every two adjacent chunks hold more than chunkCap/2 live entries
// (more than chunkCap once one of them has lost an entry): k chunks hold more than
// ⌊k/2⌋ × chunkCap/2, and the ordered part costs at most 48 bytes per live entry plus one chunk
// — 12 when messages are consumed in about the order they came. Merges only ever reduce the
// number of chunks, which grows by one per chunkCap insertions, and a compaction makes room for
// at least chunkCap/2 of them, so copying is O(1) per insertion (at most one chunk at a time).
// Every chunk has capacity chunkCap except a sole one, which grows from firstOrdCap. Chunks are
// mapped sweepable memory once big enough (allocSweepable); the index owns them and gives them back when they
// are freed, the index empties, or unmap is called.
type ordIndex struct {
	chunks   []ordChunk
	mins     []uint64 // mins[c] = chunks[c].keys[0]
	n        int      // live entries
	chunkCap int
}

type ordChunk struct {
	keys        []uint64
	slots       []uint32 // len(slots) == len(keys), cap(slots) == cap(keys)
	live        int
	keysMapped  bool
	slotsMapped bool
}

// find returns the slot of the live entry with prefix p; the caller confirms the ID.
func (x *ordIndex) find(p uint64) (uint32, bool) {
	c, i, ok := x.search(p)
	if !ok {
		return 0, false
	}
	slot := x.chunks[c].slots[i]
	return slot, slot != deadSlot
}

// search returns the chunk and position of prefix p, if an entry (live or dead) has it.
func (x *ordIndex) search(p uint64) (c, i int, ok bool) {
	nc := len(x.chunks)
	if nc == 0 || p < x.mins[0] {
		return 0, 0, false
	}
	last := x.chunks[nc-1].keys
	if p > last[len(last)-1] {
		return 0, 0, false
	}
	c, ok = slices.BinarySearch(x.mins, p)
	if ok {
		return c, 0, true
	}
	c--
	i, ok = searchKeys(x.chunks[c].keys, p)
	return c, i, ok
}

// searchKeys returns the position of p in keys (strictly increasing) if it is there. It first
// guesses by interpolation — IDs made at a steady rate are nearly evenly spread, so the guess
// usually lands within a cache line of the entry — and falls back to binary search on the range
// left after a few guesses, so a skewed chunk costs at most a few probes more than binary search.
func searchKeys(keys []uint64, p uint64) (int, bool) {
	lo, hi := 0, len(keys) // if p is in keys, it is in keys[lo:hi]
	for range 4 {
		if hi-lo <= 16 {
			break
		}
		a, b := keys[lo], keys[hi-1]
		if p < a || p > b {
			return 0, false
		}
		g := lo + int(float64(p-a)/float64(b-a)*float64(hi-1-lo))
		switch k := keys[g]; {
		case k == p:
			return g, true
		case k < p:
			lo = g + 1
		default:
			hi = g
		}
	}
	i, ok := slices.BinarySearch(keys[lo:hi], p)
	return lo + i, ok
}

// add appends p → slot if p is greater than every prefix in the index; false (and nothing
// changed) otherwise.
func (x *ordIndex) add(p uint64, slot uint32) bool {
	nc := len(x.chunks)
	if nc == 0 {
		x.chunks = append(x.chunks, newOrdChunk(min(firstOrdCap, x.chunkCap)))
		x.mins = append(x.mins, p)
		nc = 1
	} else if last := x.chunks[nc-1].keys; p <= last[len(last)-1] {
		return false
	}
	t := &x.chunks[nc-1]
	if len(t.keys) == cap(t.keys) {
		switch {
		case t.live <= cap(t.keys)/2:
			t.compact()
			x.mins[nc-1] = t.keys[0]
		case cap(t.keys) < x.chunkCap:
			t.grow(min(2*cap(t.keys), x.chunkCap))
		default:
			x.chunks = append(x.chunks, newOrdChunk(x.chunkCap))
			x.mins = append(x.mins, p)
			t = &x.chunks[nc]
		}
	}
	t.keys = append(t.keys, p)
	t.slots = append(t.slots, slot)
	t.live++
	x.n++
	return true
}

// remove deletes the entry p → slot if the index has it; false (and nothing changed) otherwise.
func (x *ordIndex) remove(p uint64, slot uint32) bool {
	c, i, ok := x.search(p)
	if !ok || x.chunks[c].slots[i] != slot {
		return false
	}
	ch := &x.chunks[c]
	ch.slots[i] = deadSlot
	ch.live--
	x.n--
	switch {
	case ch.live == 0:
		x.drop(c)
		if c > 0 && c < len(x.chunks) && x.chunks[c-1].live+x.chunks[c].live <= x.chunkCap {
			x.merge(c - 1)
		}
	case c > 0 && x.chunks[c-1].live+ch.live <= x.chunkCap:
		x.merge(c - 1)
	case c+1 < len(x.chunks) && ch.live+x.chunks[c+1].live <= x.chunkCap:
		x.merge(c)
	}
	return true
}

// drop frees chunk c.
func (x *ordIndex) drop(c int) {
	x.chunks[c].free()
	x.chunks = slices.Delete(x.chunks, c, c+1)
	x.mins = slices.Delete(x.mins, c, c+1)
	if len(x.chunks) == 0 {
		x.chunks, x.mins = nil, nil
	}
}

// merge moves the live entries of chunks c and c+1, which fit in one chunk, into chunk c and
// frees chunk c+1.
func (x *ordIndex) merge(c int) {
	a, b := &x.chunks[c], &x.chunks[c+1]
	a.compact()
	for i, s := range b.slots {
		if s != deadSlot {
			a.keys = append(a.keys, b.keys[i])
			a.slots = append(a.slots, s)
		}
	}
	a.live += b.live
	x.mins[c] = a.keys[0]
	x.drop(c + 1)
}

// unmap gives back every chunk and empties the index.
func (x *ordIndex) unmap() {
	for c := range x.chunks {
		x.chunks[c].free()
	}
	x.chunks, x.mins, x.n = nil, nil, 0
}

func newOrdChunk(n int) ordChunk {
	var ch ordChunk
	ch.keys, ch.keysMapped = allocSweepable[uint64](n)
	ch.slots, ch.slotsMapped = allocSweepable[uint32](n)
	ch.keys, ch.slots = ch.keys[:0], ch.slots[:0]
	return ch
}

// grow moves the chunk's entries to buffers of capacity n.
func (ch *ordChunk) grow(n int) {
	g := newOrdChunk(n)
	g.keys = append(g.keys, ch.keys...)
	g.slots = append(g.slots, ch.slots...)
	g.live = ch.live
	ch.free()
	*ch = g
}

// compact drops the dead entries, keeping the order of the others.
func (ch *ordChunk) compact() {
	k := 0
	for i, s := range ch.slots {
		if s != deadSlot {
			ch.keys[k], ch.slots[k] = ch.keys[i], s
			k++
		}
	}
	ch.keys, ch.slots = ch.keys[:k], ch.slots[:k]
}

func (ch *ordChunk) free() {
	freeMapped(ch.keys, ch.keysMapped)
	freeMapped(ch.slots, ch.slotsMapped)
	*ch = ordChunk{}
}
