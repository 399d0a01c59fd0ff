package engine

// nilIdx marks "no element" in every index-linked structure of the package.
const nilIdx = ^uint32(0)

// maxSlots bounds the number of stored messages of one Queue (slot indices are uint32 and
// nilIdx is reserved).
const maxSlots = nilIdx - 1

// rec is the compact, pointer-free form of a stored message: exactly 64 bytes, so a chunk of
// records is one allocation the garbage collector never scans, and a record fills one cache line.
//
//	offset size field
//	     0   16 id          message ID
//	    16    8 enqueuedAt  Unix ms
//	    24    8 notBefore   Unix ms
//	    32    4 weight
//	    36    4 attempts
//	    40    4 redrives
//	    44    4 meta        key index | state | flags
//	    48    4 next        \ per-state links (see below)
//	    52    4 prev        /
//	    56    4 onext       \ enqueue order
//	    60    4 oprev       /
//
// meta packs the fairness-key index (bits 0–24), the state (bits 25–28) and three flags (bit 29:
// the message is in an ordering group, see ordering.go; bit 30: the slot has a body in the side
// table; bit 31: the message has a LastError in q.errs).
//
// next and prev depend on the state: waiting — unused (the message is behind its group's head);
// ready — the key's FIFO links; held — the links of the key's held list (see Queue.Hold);
// parked — the links of its class's group (park.go); unclassified — unused; delayed — next is the position in the
// delayed heap; leased — next is the index of the lease record; free — next links the free list; restored — unused
// (a Restorer has not yet placed the ready message in its FIFO). onext/oprev link every stored
// message in enqueue order.
type rec struct {
	id         MsgID
	enqueuedAt int64
	notBefore  int64
	weight     uint32
	attempts   uint32
	redrives   uint32
	meta       uint32
	next, prev uint32
	onext      uint32
	oprev      uint32
}

const (
	metaKeyBits  = 25
	metaKeyMask  = 1<<metaKeyBits - 1
	metaStShift  = metaKeyBits
	metaStMask   = 15 << metaStShift
	metaGrouped  = 1 << 29
	metaHasBody  = 1 << 30
	metaHasError = 1 << 31

	// maxKeys bounds the number of distinct fairness keys stored at once in one Queue.
	maxKeys = metaKeyMask
)

// Internal states (stored in rec.meta). The first four equal the exported State values; a held,
// waiting or parked message is reported as StateReady, and stRestored exists only inside a
// Restorer.
const (
	stFree         = uint32(StateUnknown)
	stReady        = uint32(StateReady)
	stDelayed      = uint32(StateDelayed)
	stLeased       = uint32(StateLeased)
	stHeld         = 4 // ready, but kept from delivery by Queue.Hold
	stRestored     = 5 // ready in a snapshot, not yet placed in its key's FIFO
	stWaiting      = 6 // behind the head of its ordering group (ordering.go)
	stParked       = 7 // ready, but parked by the Admission (park.go)
	stUnclassified = 8 // unclassified, never delivered until classified (unclassified.go)
)

func (r *rec) key() uint32   { return r.meta & metaKeyMask }
func (r *rec) state() uint32 { return (r.meta & metaStMask) >> metaStShift }
func (r *rec) setState(s uint32) {
	r.meta = r.meta&^metaStMask | s<<metaStShift
}

// stateText names an internal state for error messages.
func stateText(st uint32) string {
	switch st {
	case stHeld:
		return "held"
	case stParked:
		return "throttled"
	case stUnclassified:
		return "unclassified"
	case stRestored:
		return "ready"
	case stWaiting:
		return "waiting behind its ordering group's head"
	}
	return State(st).String()
}

// body holds the opaque parts of a message; it lives in a side table so that rec stays
// pointer-free and messages without headers, payload or attributes cost nothing here.
type body struct {
	headers    map[string]string
	payload    []byte
	attributes map[string]string
}

const (
	chunkShift = 13
	chunkSize  = 1 << chunkShift // records per chunk: 8192 × 64 B = 512 KiB
	chunkMask  = chunkSize - 1
	firstChunk = 16 // initial capacity of chunk 0, so an empty queue stays small
)

// slab stores records in fixed-size chunks (growing never copies more than one chunk, and never
// doubles the whole store), with a free list threaded through rec.next. Chunks come from the
// Queue's Allocator when it gives them (alloc.go).
type slab struct {
	mem    Allocator // nil: the Go heap
	chunks [][]rec
	mapped []bool   // parallel to chunks: the chunk came from mem (freeBuf)
	bodies [][]body // parallel to chunks; a nil chunk has no bodies yet
	used   uint32   // slots ever handed out (the high-water mark)
	free   uint32   // head of the free list
	live   uint32   // slots in use
}

func newSlab(a Allocator) *slab { return &slab{mem: a, free: nilIdx} }

// at returns the record of slot; the pointer is valid until the next alloc or release.
func (s *slab) at(slot uint32) *rec {
	return &s.chunks[slot>>chunkShift][slot&chunkMask]
}

// alloc returns a free slot whose record is zero except for being state free.
func (s *slab) alloc() uint32 {
	s.live++
	if s.free != nilIdx {
		slot := s.free
		r := s.at(slot)
		s.free = r.next
		*r = rec{}
		return slot
	}
	slot := s.used
	s.used++
	c := int(slot >> chunkShift)
	if c == len(s.chunks) {
		n := chunkSize
		if c == 0 {
			n = firstChunk
		}
		ch, mapped := allocBuf[rec](s.mem, n, true)
		s.chunks = append(s.chunks, ch[:0])
		s.mapped = append(s.mapped, mapped)
		s.bodies = append(s.bodies, nil)
	}
	ch := s.chunks[c]
	if len(ch) == cap(ch) {
		grown, mapped := allocBuf[rec](s.mem, min(2*cap(ch), chunkSize), true)
		copy(grown, ch)
		freeBuf(s.mem, ch, s.mapped[c])
		ch, s.mapped[c] = grown[:len(ch)], mapped
	}
	s.chunks[c] = append(ch, rec{})
	return slot
}

// release returns slot to the free list, dropping its body. When the last slot is released the
// whole store is dropped, so a drained queue gives its memory back.
func (s *slab) release(slot uint32) {
	r := s.at(slot)
	if r.meta&metaHasBody != 0 {
		s.bodies[slot>>chunkShift][slot&chunkMask] = body{}
	}
	*r = rec{next: s.free}
	s.free = slot
	s.live--
	if s.live == 0 {
		s.unmap()
		*s = slab{mem: s.mem, free: nilIdx}
	}
}

// unmap gives back the slab's chunks from its Allocator; the slab must be reset or dropped afterwards.
func (s *slab) unmap() {
	for c, ch := range s.chunks {
		freeBuf(s.mem, ch, s.mapped[c])
		s.chunks[c], s.mapped[c] = nil, false
	}
}

// setBody stores headers, payload and attributes for slot (at least one is non-nil).
func (s *slab) setBody(slot uint32, b body) {
	c, i := slot>>chunkShift, int(slot&chunkMask)
	bs := s.bodies[c]
	if i >= len(bs) {
		n := max(i+1, min(2*len(bs), chunkSize), firstChunk)
		if c > 0 {
			n = chunkSize
		}
		grown := make([]body, n)
		copy(grown, bs)
		bs = grown
		s.bodies[c] = bs
	}
	bs[i] = b
	s.at(slot).meta |= metaHasBody
}

// body returns the body of slot (zero if it has none).
func (s *slab) body(slot uint32) body {
	if s.at(slot).meta&metaHasBody == 0 {
		return body{}
	}
	return s.bodies[slot>>chunkShift][slot&chunkMask]
}
