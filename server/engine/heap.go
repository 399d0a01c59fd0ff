package engine

import "encoding/binary"

// heapEnt is one timer: a time and the slot of the message it belongs to.
type heapEnt struct {
	at  int64
	ref uint32
}

// timeHeap is an indexed binary min-heap of timers: setPos is told every element's position so
// that the owner can remove or re-time an element in O(log n) without a search.
//
// Timers are ordered by time, then by the ID of the message they belong to (read from the
// slab), never by slot: slots depend on allocation history, which a restored queue does not
// share, while IDs are part of the state. The tie-break costs two record reads and only
// happens on equal times.
type timeHeap struct {
	ents   []heapEnt
	slab   *slab
	setPos func(ref, pos uint32)
}

// less orders timers by time, then by message ID (bytes, ascending).
func (h *timeHeap) less(a, b heapEnt) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return compareIDs(&h.slab.at(a.ref).id, &h.slab.at(b.ref).id) < 0
}

// compare is less as a three-way comparison, for sorting.
func (h *timeHeap) compare(a, b heapEnt) int {
	switch {
	case a.at < b.at:
		return -1
	case a.at > b.at:
		return 1
	}
	return compareIDs(&h.slab.at(a.ref).id, &h.slab.at(b.ref).id)
}

// compareIDs orders message IDs by their bytes, ascending: the canonical tie-break of every
// order the engine reports. (Two big-endian words compare like the 16 bytes.)
func compareIDs(a, b *MsgID) int {
	a0, b0 := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(b[:8])
	if a0 == b0 {
		a0, b0 = binary.BigEndian.Uint64(a[8:]), binary.BigEndian.Uint64(b[8:])
	}
	switch {
	case a0 < b0:
		return -1
	case a0 > b0:
		return 1
	}
	return 0
}

func (h *timeHeap) len() int { return len(h.ents) }

// top returns the earliest timer.
func (h *timeHeap) top() (heapEnt, bool) {
	if len(h.ents) == 0 {
		return heapEnt{}, false
	}
	return h.ents[0], true
}

func (h *timeHeap) push(at int64, ref uint32) {
	h.ents = append(h.ents, heapEnt{at, ref})
	i := len(h.ents) - 1
	h.setPos(ref, uint32(i))
	h.up(i)
}

// remove deletes the timer at position pos and returns it.
func (h *timeHeap) remove(pos uint32) heapEnt {
	i := int(pos)
	e := h.ents[i]
	last := len(h.ents) - 1
	if i != last {
		h.ents[i] = h.ents[last]
		h.setPos(h.ents[i].ref, uint32(i))
	}
	h.ents = h.ents[:last]
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
	if len(h.ents) == 0 && cap(h.ents) > 1024 {
		h.ents = nil
	}
	return e
}

// retime changes the time of the timer at position pos.
func (h *timeHeap) retime(pos uint32, at int64) {
	i := int(pos)
	h.ents[i].at = at
	if !h.down(i) {
		h.up(i)
	}
}

func (h *timeHeap) up(i int) {
	e := h.ents[i]
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(e, h.ents[p]) {
			break
		}
		h.ents[i] = h.ents[p]
		h.setPos(h.ents[i].ref, uint32(i))
		i = p
	}
	h.ents[i] = e
	h.setPos(e.ref, uint32(i))
}

// down sifts the element at i towards the leaves and reports whether it moved.
func (h *timeHeap) down(i0 int) bool {
	i := i0
	e := h.ents[i]
	n := len(h.ents)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h.less(h.ents[r], h.ents[c]) {
			c = r
		}
		if !h.less(h.ents[c], e) {
			break
		}
		h.ents[i] = h.ents[c]
		h.setPos(h.ents[i].ref, uint32(i))
		i = c
	}
	h.ents[i] = e
	h.setPos(e.ref, uint32(i))
	return i > i0
}

// due appends to dst every timer whose time is at or before now, in heap order: a pre-order walk
// that prunes subtrees whose root is later than now, so it costs O(k) for k results. The
// recursion depth is the heap's height.
func (h *timeHeap) due(now int64, dst []heapEnt) []heapEnt {
	return h.dueWalk(0, now, dst)
}

func (h *timeHeap) dueWalk(i int, now int64, dst []heapEnt) []heapEnt {
	if i >= len(h.ents) || h.ents[i].at > now {
		return dst
	}
	dst = append(dst, h.ents[i])
	dst = h.dueWalk(2*i+1, now, dst)
	return h.dueWalk(2*i+2, now, dst)
}
