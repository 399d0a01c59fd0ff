package engine

import (
	"bytes"
	"cmp"
	"runtime"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// The ID index against a Go map, through growth and shrinking, with deletes that exercise
// backward shifting in crowded small tables.
func TestIndexMatchesMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := newSlab(nil)
		var x idIndex
		model := map[MsgID]uint32{}
		var ids []MsgID
		t.Repeat(map[string]func(*rapid.T){
			"insert": func(t *rapid.T) {
				id := mid(rapid.Uint64Range(0, 300).Draw(t, "n"))
				if _, ok := model[id]; ok {
					t.Skip("present")
				}
				slot := s.alloc()
				s.at(slot).id = id
				x.insert(id, slot)
				model[id] = slot
				ids = append(ids, id)
			},
			"remove": func(t *rapid.T) {
				if len(ids) == 0 {
					t.Skip("empty")
				}
				i := rapid.IntRange(0, len(ids)-1).Draw(t, "i")
				id := ids[i]
				ids = slices.Delete(ids, i, i+1)
				x.remove(id, model[id])
				s.at(model[id]).id = MsgID{}
				delete(model, id)
			},
			"": func(t *rapid.T) {
				if x.n != len(model) {
					t.Fatalf("n %d, model %d", x.n, len(model))
				}
				for id, slot := range model {
					if got, ok := x.find(id, s); !ok || got != slot {
						t.Fatalf("find(%v) = %d %v, want %d", id, got, ok, slot)
					}
				}
				if _, ok := x.find(mid(1000), s); ok {
					t.Fatal("found an absent ID")
				}
				if len(x.tab) > minIndexSize && x.n*8 < len(x.tab) {
					t.Fatalf("table of %d for %d entries", len(x.tab), x.n)
				}
			},
		})
	})
}

// heapTestID is the message ID of ref in the heap tests: IDs sort in the opposite order of
// refs, so a heap that broke ties by ref would fail.
func heapTestID(ref uint32) MsgID { return mid(1_000_000 - uint64(ref)) }

// heapTestSlab holds a record with ID heapTestID(ref) at every slot ref below n.
func heapTestSlab(n int) *slab {
	s := newSlab(nil)
	for range n {
		slot := s.alloc()
		s.at(slot).id = heapTestID(slot)
	}
	return s
}

// The timer heap against a sorted model: push, remove by position, retime, and due; ties on time
// by message ID.
func TestTimeHeapMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pos := map[uint32]uint32{}
		h := timeHeap{slab: heapTestSlab(1000), setPos: func(ref, p uint32) { pos[ref] = p }}
		model := map[uint32]int64{}
		next := uint32(0)
		anyRef := func(t *rapid.T) uint32 {
			refs := make([]uint32, 0, len(model))
			for r := range model {
				refs = append(refs, r)
			}
			slices.Sort(refs)
			return rapid.SampledFrom(refs).Draw(t, "ref")
		}
		t.Repeat(map[string]func(*rapid.T){
			"push": func(t *rapid.T) {
				if next == 1000 {
					t.Skip("full")
				}
				at := rapid.Int64Range(0, 50).Draw(t, "at")
				h.push(at, next)
				model[next] = at
				next++
			},
			"remove": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				r := anyRef(t)
				if e := h.remove(pos[r]); e.ref != r || e.at != model[r] {
					t.Fatalf("removed %+v, want ref %d", e, r)
				}
				delete(model, r)
				delete(pos, r)
			},
			"retime": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				r := anyRef(t)
				at := rapid.Int64Range(0, 50).Draw(t, "at")
				h.retime(pos[r], at)
				model[r] = at
			},
			"": func(t *rapid.T) { checkHeapAgainst(t, &h, pos, model) },
		})
	})
}

// checkHeapAgainst compares h with the model (ref → time) and the positions it reported.
func checkHeapAgainst(t *rapid.T, h *timeHeap, pos map[uint32]uint32, model map[uint32]int64) {
	if err := checkHeap(h, "test"); err != nil {
		t.Fatal(err)
	}
	want := make([]heapEnt, 0, len(model))
	for r, at := range model {
		if h.ents[pos[r]] != (heapEnt{at, r}) {
			t.Fatalf("ref %d at position %d holds %+v", r, pos[r], h.ents[pos[r]])
		}
		want = append(want, heapEnt{at, r})
	}
	slices.SortFunc(want, func(a, b heapEnt) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		ia, ib := heapTestID(a.ref), heapTestID(b.ref)
		return bytes.Compare(ia[:], ib[:])
	})
	if top, ok := h.top(); ok != (len(want) > 0) || ok && top != want[0] {
		t.Fatalf("top %+v %v, want %v", top, ok, want)
	}
	now := rapid.Int64Range(-1, 51).Draw(t, "now")
	due := h.due(now, nil)
	n := 0
	for _, e := range want {
		if e.at <= now {
			n++
		}
	}
	if len(due) != n {
		t.Fatalf("due(%d) gave %d, want %d", now, len(due), n)
	}
	for _, e := range due {
		if e.at > now || model[e.ref] != e.at {
			t.Fatalf("due(%d) gave %+v", now, e)
		}
	}
}

// The index ring against a slice model whose first element is the head.
func TestRingMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := newRing()
		var model []uint32
		idx := func(v uint32) int { return slices.Index(model, v) }
		t.Repeat(map[string]func(*rapid.T){
			"pushBack": func(t *rapid.T) {
				v := rapid.Uint32Range(0, 20).Draw(t, "v")
				if idx(v) >= 0 {
					t.Skip("member")
				}
				r.pushBack(v)
				model = append(model, v)
			},
			"remove": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				v := rapid.SampledFrom(model).Draw(t, "v")
				r.remove(v)
				model = slices.Delete(model, idx(v), idx(v)+1)
			},
			"moveToBack": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				v := rapid.SampledFrom(model).Draw(t, "v")
				r.moveToBack(v)
				i := idx(v)
				model = append(slices.Delete(model, i, i+1), v)
			},
			"": func(t *rapid.T) {
				if err := checkRing(&r, "test"); err != nil {
					t.Fatal(err)
				}
				var got []uint32
				for i, v := 0, r.head; i < r.n; i, v = i+1, r.next[v] {
					got = append(got, v)
				}
				if !slices.Equal(got, model) {
					t.Fatalf("ring %v, model %v", got, model)
				}
				for v := range uint32(22) {
					if r.contains(v) != (idx(v) >= 0) {
						t.Fatalf("contains(%d) = %v", v, r.contains(v))
					}
				}
			},
		})
	})
}

func TestSlabChunksAndBodies(t *testing.T) {
	s := newSlab(nil)
	n := uint32(2*chunkSize + 5)
	for i := range n {
		if got := s.alloc(); got != i {
			t.Fatalf("alloc %d gave %d", i, got)
		}
		s.at(i).weight = i
		if i%1000 == 0 {
			s.setBody(i, body{payload: []byte{byte(i)}})
		}
	}
	for i := range n {
		if s.at(i).weight != i {
			t.Fatalf("slot %d lost its record", i)
		}
		if b := s.body(i); (b.payload != nil) != (i%1000 == 0) {
			t.Fatalf("slot %d body %v", i, b)
		}
	}
	if cap(s.chunks[0]) != chunkSize || cap(s.chunks[1]) != chunkSize {
		t.Fatalf("chunk capacities %d %d", cap(s.chunks[0]), cap(s.chunks[1]))
	}
	s.release(1000)
	s.release(7)
	if s.alloc() != 7 || s.alloc() != 1000 {
		t.Fatal("free list is not LIFO")
	}
	if s.body(1000).payload != nil {
		t.Fatal("a released slot kept its body")
	}
}

// Full chunks and big index tables live in mapped memory, which a drained store gives back at
// once; the records read the same wherever they live.
func TestOffHeapStore(t *testing.T) {
	a := offHeap(t)
	s, x := newSlab(a), &idIndex{mem: a}
	n := uint32(3 * chunkSize)
	for i := range n {
		slot := s.alloc()
		s.at(slot).id = mid(uint64(i))
		x.insert(mid(uint64(i)), slot)
	}
	if runtime.GOOS == "linux" && (!s.mapped[1] || !x.mapped) {
		t.Fatalf("full chunks and the index table should be mapped: chunks %v, index %v", s.mapped, x.mapped)
	}
	for i := range n {
		if slot, ok := x.find(mid(uint64(i)), s); !ok || slot != i {
			t.Fatalf("message %d: slot %d, found %v", i, slot, ok)
		}
	}
	for i := range n {
		x.remove(mid(uint64(i)), i)
		s.release(i)
	}
	if len(s.chunks) != 0 || x.mapped || x.n != 0 {
		t.Fatalf("drained store kept %d chunks, index mapped %v with %d entries", len(s.chunks), x.mapped, x.n)
	}
}

// The Allocator counts what the store maps and gives back.
func TestMappedBytesAccounting(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("no mapped memory on this system")
	}
	a := offHeap(t)
	before := a.Stats().Mapped
	s := newSlab(a)
	for range 2 * chunkSize {
		s.alloc()
	}
	if got := a.Stats().Mapped - before; got != 2*chunkSize*int64(recSize) {
		t.Fatalf("two full chunks map %d bytes, want %d", got, 2*chunkSize*recSize)
	}
	for i := range uint32(2 * chunkSize) {
		s.release(i)
	}
	if got := a.Stats().Mapped - before; got != 0 {
		t.Fatalf("a drained store still maps %d bytes", got)
	}
}
