package engine

import (
	"encoding/binary"
	"math/bits"
)

// idIndex maps message IDs to slots: it is the side table of msgIndex (ordindex.go), holding the
// IDs that do not arrive in increasing order. It is an open-addressing hash table with linear
// probing and backward-shift deletion (no tombstones) whose entries hold only a slot and 32 bits
// of hash:
//
//	63                 32 31                  0
//	+--------------------+--------------------+
//	| hash >> 32         | slot + 1           |   0 = empty bucket
//	+--------------------+--------------------+
//
// The ID itself is read from the slab to confirm a match, so an entry costs 8 bytes (about
// 11–21 bytes per message at the table's load factor of 3/8–3/4) instead of the ~32 of a Go map
// keyed by the 16-byte ID. The home bucket is derived from the stored hash bits, so growing and
// shrinking never touch the slab.
type idIndex struct {
	mem    Allocator // nil: the Go heap
	tab    []uint64
	mapped bool // tab came from mem (alloc.go)
	n      int
	mask   uint32
}

const minIndexSize = 8

func hashID(id MsgID) uint64 {
	a := binary.LittleEndian.Uint64(id[0:8])
	b := binary.LittleEndian.Uint64(id[8:16])
	hi, lo := bits.Mul64(a^0xa0761d6478bd642f, b^0xe7037ed1a0b428db)
	h := hi ^ lo
	hi, lo = bits.Mul64(h^0x8ebc6af09c88c6e3, 0x589965cc75374cc3)
	return hi ^ lo
}

// find returns the slot of id.
func (x *idIndex) find(id MsgID, s *slab) (uint32, bool) {
	if x.n == 0 {
		return 0, false
	}
	tag := uint32(hashID(id) >> 32)
	for i := tag & x.mask; ; i = (i + 1) & x.mask {
		e := x.tab[i]
		if e == 0 {
			return 0, false
		}
		if uint32(e>>32) == tag {
			slot := uint32(e) - 1
			if s.at(slot).id == id {
				return slot, true
			}
		}
	}
}

// insert adds id → slot; id must not be present.
func (x *idIndex) insert(id MsgID, slot uint32) {
	if (x.n+1)*4 > len(x.tab)*3 {
		x.resize(max(2*len(x.tab), minIndexSize))
	}
	x.put(uint64(hashID(id)>>32)<<32 | uint64(slot+1))
	x.n++
}

func (x *idIndex) put(e uint64) {
	for i := uint32(e>>32) & x.mask; ; i = (i + 1) & x.mask {
		if x.tab[i] == 0 {
			x.tab[i] = e
			return
		}
	}
}

// remove deletes id, which must be present at slot.
func (x *idIndex) remove(id MsgID, slot uint32) {
	want := uint64(hashID(id)>>32)<<32 | uint64(slot+1)
	i := uint32(want>>32) & x.mask
	for x.tab[i] != want {
		i = (i + 1) & x.mask
	}
	// Backward-shift: move later entries of the probe run into the hole when their home bucket
	// is not cyclically within (hole, j].
	for j := (i + 1) & x.mask; x.tab[j] != 0; j = (j + 1) & x.mask {
		home := uint32(x.tab[j]>>32) & x.mask
		if (j-home)&x.mask >= (j-i)&x.mask {
			x.tab[i] = x.tab[j]
			i = j
		}
	}
	x.tab[i] = 0
	x.n--
	if len(x.tab) > minIndexSize && x.n*8 < len(x.tab) {
		x.resize(max(len(x.tab)/4, minIndexSize))
	}
}

func (x *idIndex) resize(size int) {
	old, oldMapped := x.tab, x.mapped
	x.tab, x.mapped = allocBuf[uint64](x.mem, size, false)
	x.mask = uint32(size - 1)
	for _, e := range old {
		if e != 0 {
			x.put(e)
		}
	}
	freeBuf(x.mem, old, oldMapped)
}

// unmap gives back a table from the Allocator; the index must be dropped afterwards.
func (x *idIndex) unmap() {
	freeBuf(x.mem, x.tab, x.mapped)
	x.tab, x.mapped = nil, false
}
