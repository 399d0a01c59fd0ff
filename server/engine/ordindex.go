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
// swept out of memory (alloc.go). An older ID — a dead-letter or redrive copy, IDs replayed
// from another leader, a clock that went back, a prefix equal to the last one — goes to run, a
// second ordIndex, if it sorts after every ID there: a redrive moves a dead-letter queue's
// messages in the order they died, mostly the order of their IDs, so a large redrive stays in
// sorted, sweepable chunks too. Every other ID goes to side, the hash table (idIndex).
//
// Memory: 12 bytes per entry in ordered chunks at least a quarter live on average (see ordIndex;
// about fully live under FIFO consumption), plus idIndex's 11–21 bytes per message in the side
// table.
type msgIndex struct {
	ord  ordIndex
	run  ordIndex
	side idIndex
}

// newMsgIndex returns an empty index whose ordered chunks hold chunkCap entries, taking its big
// buffers from a (the Go heap when nil).
func newMsgIndex(chunkCap int, a Allocator) *msgIndex {
	return &msgIndex{ord: ordIndex{chunkCap: chunkCap, mem: a}, run: ordIndex{chunkCap: chunkCap, mem: a}, side: idIndex{mem: a}}
}

// idPrefix is the ordering key of id: its first 8 bytes, big-endian, so prefix order is ID order.
func idPrefix(id MsgID) uint64 { return binary.BigEndian.Uint64(id[0:8]) }

// find returns the slot of id, confirming the whole ID from the slab.
func (x *msgIndex) find(id MsgID, s *slab) (uint32, bool) {
	p := idPrefix(id)
	if slot, ok := x.ord.find(p); ok && s.at(slot).id == id {
		return slot, true
	}
	if slot, ok := x.run.find(p); ok && s.at(slot).id == id {
		return slot, true
	}
	return x.side.find(id, s)
}

// insert adds id → slot; id must not be present.
func (x *msgIndex) insert(id MsgID, slot uint32) {
	if p := idPrefix(id); !x.ord.add(p, slot) && !x.run.add(p, slot) {
		x.side.insert(id, slot)
	}
}

// remove deletes id, which must be present at slot.
func (x *msgIndex) remove(id MsgID, slot uint32) {
	if p := idPrefix(id); !x.ord.remove(p, slot) && !x.run.remove(p, slot) {
		x.side.remove(id, slot)
	}
}

// len returns the number of IDs stored.
func (x *msgIndex) len() int { return x.ord.n + x.run.n + x.side.n }

// unmap gives back the memory from the Allocator; the index must be dropped afterwards.
func (x *msgIndex) unmap() {
	x.ord.unmap()
	x.run.unmap()
	x.side.unmap()
}

// ordChunkCap is the number of entries of a full ordered chunk: 64 Ki × 12 B = 768 KiB, big
// enough to come from the Allocator.
const ordChunkCap = 1 << 16

// firstOrdCap is the initial capacity of a sole chunk, so a short queue's index stays small.
const firstOrdCap = 16

// deadSlot marks a deleted entry of an ordered chunk; it keeps its prefix so the chunk stays
// sorted without moving anything.
const deadSlot = nilIdx

// ordEnt is an entry of an ordered chunk, 12 bytes with no padding (the prefix is split in two
// uint32 so that the struct is 4-aligned), so a lookup finds the prefix and the slot in the same
// cache line:
//
//	offset size field
//	     0    4 hi    ID prefix, high half
//	     4    4 lo    ID prefix, low half
//	     8    4 slot  slot of the message, or deadSlot once deleted
type ordEnt struct {
	hi, lo, slot uint32
}

func (e *ordEnt) key() uint64 { return uint64(e.hi)<<32 | uint64(e.lo) }

// ordIndex holds (ID prefix, slot) entries in a list of chunks, each a pointer-free array of
// ordEnt whose prefixes strictly increase across the chunk and the whole list. A new entry is
// appended to the last chunk, so only a prefix greater than the last entry's is accepted (add
// reports false otherwise). Lookup first looks near the last two entries found (hints), then
// binary-searches mins (the first prefix of every chunk, on the Go heap beside maxs, the last)
// and interpolation-searches the chunk, whose first guess reads nothing of it but that entry. Deleting marks the entry dead; a
// chunk that empties is freed, and two neighbours whose live entries fit in one chunk are merged
// (the dead entries dropped). A full last chunk at most half live is compacted in place instead
// of starting a new one. So every two adjacent chunks hold more than chunkCap/2 live entries
// (more than chunkCap once one of them has lost an entry): k chunks hold more than
// ⌊k/2⌋ × chunkCap/2, and the ordered part costs at most 48 bytes per live entry plus one chunk
// — 12 when messages are consumed in about the order they came. Merges only ever reduce the
// number of chunks, which grows by one per chunkCap insertions, and a compaction makes room for
// at least chunkCap/2 of them, so copying is O(1) per insertion (at most one chunk at a time).
// Every chunk has capacity chunkCap except a sole one, which grows from firstOrdCap. Chunks are
// sweepable buffers from the Allocator once big enough (allocBuf); the index owns them and gives them
// back when they are freed, the index empties, or unmap is called.
type ordIndex struct {
	chunks   []ordChunk
	mins     []uint64 // mins[c] = chunks[c].ents[0].key()
	maxs     []uint64 // maxs[c] = the last entry's key in chunks[c]
	n        int      // live entries
	chunkCap int
	mem      Allocator // nil: the Go heap
	// hints are the places of the last two entries found, most recent first: a queue looks up
	// the same ID several times in a row (Get, CheckLease, Ack, delete) and the next ID near one
	// of two fronts (deliveries and acks), so a search first looks within hintSpan of each.
	// A hint may be stale after chunks move; it is only a place to look, every match is checked.
	hints [2]ordHint
}

type ordHint struct{ c, i int }

// hintSpan is how far from a hint a search looks before a full search: 2 × 8 entries, four
// cache lines.
const hintSpan = 8

type ordChunk struct {
	ents   []ordEnt
	live   int
	mapped bool
}

// find returns the slot of the live entry with prefix p; the caller confirms the ID.
func (x *ordIndex) find(p uint64) (uint32, bool) {
	c, i, ok := x.search(p)
	if !ok {
		return 0, false
	}
	slot := x.chunks[c].ents[i].slot
	return slot, slot != deadSlot
}

// search returns the chunk and position of prefix p, if an entry (live or dead) has it.
func (x *ordIndex) search(p uint64) (c, i int, ok bool) {
	nc := len(x.chunks)
	if nc == 0 || p < x.mins[0] || p > x.maxs[nc-1] {
		return 0, 0, false
	}
	for _, h := range x.hints {
		if i, ok, decided := x.nearHint(h, p); decided {
			if ok {
				x.hint(h.c, i)
			}
			return h.c, i, ok
		}
	}
	c, ok = slices.BinarySearch(x.mins, p)
	if !ok {
		c--
		i, ok = searchEnts(x.chunks[c].ents, p, x.mins[c], x.maxs[c])
	}
	if ok {
		x.hint(c, i)
	}
	return c, i, ok
}

// nearHint searches for p within hintSpan entries of h; decided is false when p lies outside
// that window (or h is no longer a place), and then p may be anywhere. Inside it the answer is
// final: prefixes are unique and the chunks hold disjoint ranges.
func (x *ordIndex) nearHint(h ordHint, p uint64) (i int, ok, decided bool) {
	if h.c >= len(x.chunks) {
		return 0, false, false
	}
	ents := x.chunks[h.c].ents
	lo, hi := max(h.i-hintSpan, 0), min(h.i+hintSpan+1, len(ents))
	if lo >= hi || p < ents[lo].key() || p > ents[hi-1].key() {
		return 0, false, false
	}
	i = lowerBound(ents, lo, hi, p)
	return i, ents[i].key() == p, true
}

// hint records that an entry was found at chunk c, position i.
func (x *ordIndex) hint(c, i int) {
	if h := x.hints[0]; h.c != c || i < h.i-hintSpan || i > h.i+hintSpan {
		x.hints[1] = h
	}
	x.hints[0] = ordHint{c, i}
}

// searchEnts returns the position of prefix p in ents if it is there. It first guesses by
// interpolation — IDs made at a steady rate are nearly evenly spread, so the guess usually lands
// within a cache line of the entry — and falls back to binary search on the range left after a
// few guesses, so a skewed chunk costs at most a few probes more than binary search. first and
// last are the keys of the first and the last entry.
func searchEnts(ents []ordEnt, p, first, last uint64) (int, bool) {
	lo, hi := 0, len(ents) // if p is in ents, it is in ents[lo:hi]
	a, b := first, last    // ents[lo].key(), ents[hi-1].key()
	for range 4 {
		if hi-lo <= 16 {
			break
		}
		if p < a || p > b {
			return 0, false
		}
		// a <= p <= b, so lo <= g <= hi-1, and g is neither lo with k > p nor hi-1 with k < p:
		// the range left is never empty.
		g := lo + int(float64(p-a)/float64(b-a)*float64(hi-1-lo))
		switch k := ents[g].key(); {
		case k == p:
			return g, true
		case k < p:
			lo = g + 1
			a = ents[lo].key()
		default:
			hi = g
			b = ents[hi-1].key()
		}
	}
	lo = lowerBound(ents, lo, hi, p)
	return lo, lo < len(ents) && ents[lo].key() == p
}

// lowerBound returns the first position in ents[lo:hi] whose key is not below p (hi if none is),
// by binary search.
func lowerBound(ents []ordEnt, lo, hi int, p uint64) int {
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ents[m].key() < p {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// add appends p → slot if p is greater than every prefix in the index; false (and nothing
// changed) otherwise.
func (x *ordIndex) add(p uint64, slot uint32) bool {
	nc := len(x.chunks)
	switch {
	case nc > 0 && p <= x.maxs[nc-1]:
		return false
	case nc > 0 && x.roomAtTail():
		x.maxs[nc-1] = p
	default: // a new chunk, from p
		n := x.chunkCap
		if nc == 0 {
			n = min(firstOrdCap, x.chunkCap)
		}
		x.chunks = append(x.chunks, newOrdChunk(x.mem, n))
		x.mins = append(x.mins, p)
		x.maxs = append(x.maxs, p)
	}
	t := &x.chunks[len(x.chunks)-1]
	t.ents = append(t.ents, ordEnt{hi: uint32(p >> 32), lo: uint32(p), slot: slot})
	t.live++
	x.n++
	return true
}

// roomAtTail reports whether the last chunk has room for one more entry, making it when it is
// full by compacting it (at most half live) or growing it (below chunkCap).
func (x *ordIndex) roomAtTail() bool {
	c := len(x.chunks) - 1
	t := &x.chunks[c]
	switch {
	case len(t.ents) < cap(t.ents):
	case t.live <= cap(t.ents)/2:
		t.compact()
		x.mins[c] = t.ents[0].key()
	case cap(t.ents) < x.chunkCap:
		t.grow(x.mem, min(2*cap(t.ents), x.chunkCap))
	default:
		return false
	}
	return true
}

// remove deletes the entry p → slot if the index has it; false (and nothing changed) otherwise.
func (x *ordIndex) remove(p uint64, slot uint32) bool {
	c, i, ok := x.search(p)
	if !ok || x.chunks[c].ents[i].slot != slot {
		return false
	}
	ch := &x.chunks[c]
	ch.ents[i].slot = deadSlot
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
	x.chunks[c].free(x.mem)
	x.chunks = slices.Delete(x.chunks, c, c+1)
	x.mins = slices.Delete(x.mins, c, c+1)
	x.maxs = slices.Delete(x.maxs, c, c+1)
	if len(x.chunks) == 0 {
		x.chunks, x.mins, x.maxs = nil, nil, nil
	}
}

// merge moves the live entries of chunks c and c+1, which fit in one chunk, into chunk c and
// frees chunk c+1.
func (x *ordIndex) merge(c int) {
	a, b := &x.chunks[c], &x.chunks[c+1]
	a.compact()
	for _, e := range b.ents {
		if e.slot != deadSlot {
			a.ents = append(a.ents, e)
		}
	}
	a.live += b.live
	x.mins[c], x.maxs[c] = a.ents[0].key(), a.ents[len(a.ents)-1].key()
	x.drop(c + 1)
}

// unmap gives back every chunk and empties the index.
func (x *ordIndex) unmap() {
	for c := range x.chunks {
		x.chunks[c].free(x.mem)
	}
	x.chunks, x.mins, x.maxs, x.n = nil, nil, nil, 0
}

func newOrdChunk(a Allocator, n int) ordChunk {
	ents, mapped := allocBuf[ordEnt](a, n, true)
	return ordChunk{ents: ents[:0], mapped: mapped}
}

// grow moves the chunk's entries to a buffer of capacity n.
func (ch *ordChunk) grow(a Allocator, n int) {
	g := newOrdChunk(a, n)
	g.ents = append(g.ents, ch.ents...)
	g.live = ch.live
	ch.free(a)
	*ch = g
}

// compact drops the dead entries, keeping the order of the others.
func (ch *ordChunk) compact() {
	k := 0
	for _, e := range ch.ents {
		if e.slot != deadSlot {
			ch.ents[k] = e
			k++
		}
	}
	ch.ents = ch.ents[:k]
}

func (ch *ordChunk) free(a Allocator) {
	freeBuf(a, ch.ents, ch.mapped)
	*ch = ordChunk{}
}
