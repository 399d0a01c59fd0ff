package engine

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"pgregory.net/rapid"

	"github.com/filamq/fila/server/offheap"
)

// indexMappedBytes returns the bytes x holds outside the Go heap.
func indexMappedBytes(x *msgIndex) uint64 {
	var n uint64
	for _, ch := range slices.Concat(x.ord.chunks, x.run.chunks) {
		if ch.mapped {
			n += uint64(cap(ch.ents)) * uint64(unsafe.Sizeof(ordEnt{}))
		}
	}
	if x.side.mapped {
		n += uint64(cap(x.side.tab) * 8)
	}
	return n
}

// An ordered entry is 12 bytes, as ordEnt's layout says.
func TestOrdEntSize(t *testing.T) {
	if n := unsafe.Sizeof(ordEnt{}); n != 12 {
		t.Fatalf("ordEnt is %d bytes", n)
	}
}

// prefixID is an ID with prefix p and low half lo.
func prefixID(p, lo uint64) MsgID {
	var id MsgID
	binary.BigEndian.PutUint64(id[0:8], p)
	binary.BigEndian.PutUint64(id[8:16], lo)
	return id
}

// checkOrdIndex verifies the layout ordIndex documents: prefixes strictly increasing over all
// chunks, mins, live counts, capacities and the merge bound.
func checkOrdIndex(x *ordIndex) error {
	n, first := 0, true
	var prev uint64
	for c, ch := range x.chunks {
		if len(ch.ents) == 0 || x.mins[c] != ch.ents[0].key() || x.maxs[c] != ch.ents[len(ch.ents)-1].key() {
			return fmt.Errorf("chunk %d: %d entries, min %d, max %d", c, len(ch.ents), x.mins[c], x.maxs[c])
		}
		if len(x.chunks) > 1 && cap(ch.ents) != x.chunkCap {
			return fmt.Errorf("chunk %d of %d has capacity %d", c, len(x.chunks), cap(ch.ents))
		}
		live := 0
		for i := range ch.ents {
			k := ch.ents[i].key()
			if !first && k <= prev {
				return fmt.Errorf("chunk %d entry %d: prefix %d after %d", c, i, k, prev)
			}
			prev, first = k, false
			if ch.ents[i].slot != deadSlot {
				live++
			}
		}
		if live != ch.live || live == 0 {
			return fmt.Errorf("chunk %d: %d live entries, counted %d", c, live, ch.live)
		}
		if c > 0 && x.chunks[c-1].live+live <= x.chunkCap/2 {
			return fmt.Errorf("chunks %d and %d hold %d+%d live entries and were not merged", c-1, c, x.chunks[c-1].live, live)
		}
		n += live
	}
	if n != x.n || len(x.mins) != len(x.chunks) || len(x.maxs) != len(x.chunks) {
		return fmt.Errorf("%d live entries, n %d, %d mins and %d maxs for %d chunks", n, x.n, len(x.mins), len(x.maxs), len(x.chunks))
	}
	return nil
}

// The ordered index with its side table against a Go map: in-order inserts, out-of-order ones
// and prefix ties, deletes in random and FIFO order, finds of present and absent IDs.
func TestMsgIndexMatchesMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := newSlab(testAlloc)
		x := newMsgIndex(rapid.SampledFrom([]int{1, 2, 3, 4, 8, 40}).Draw(t, "chunkCap"), testAlloc)
		model := map[MsgID]uint32{}
		var order []MsgID // insertion order, for FIFO deletes
		var next uint64   // the highest prefix handed out in order
		add := func(t *rapid.T, id MsgID) {
			if _, ok := model[id]; ok {
				t.Skip("present")
			}
			slot := s.alloc()
			s.at(slot).id = id
			x.insert(id, slot)
			model[id] = slot
			order = append(order, id)
		}
		del := func(i int) {
			id := order[i]
			order = slices.Delete(order, i, i+1)
			x.remove(id, model[id])
			s.release(model[id])
			delete(model, id)
		}
		t.Repeat(map[string]func(*rapid.T){
			"in order": func(t *rapid.T) {
				next += rapid.Uint64Range(1, 3).Draw(t, "step")
				add(t, prefixID(next, rapid.Uint64().Draw(t, "lo")))
			},
			"in order, a burst": func(t *rapid.T) {
				for range rapid.IntRange(1, 60).Draw(t, "n") {
					next += rapid.Uint64Range(1, 1<<20).Draw(t, "step")
					add(t, prefixID(next, 0))
				}
			},
			"delete a run": func(t *rapid.T) {
				if len(order) == 0 {
					t.Skip("empty")
				}
				i := rapid.IntRange(0, len(order)-1).Draw(t, "i")
				for range rapid.IntRange(1, min(len(order)-i, 40)).Draw(t, "n") {
					del(i)
				}
			},
			"old IDs in order (a redrive)": func(t *rapid.T) {
				p := rapid.Uint64Range(0, next).Draw(t, "from")
				for range rapid.IntRange(1, 30).Draw(t, "n") {
					p += rapid.Uint64Range(1, 3).Draw(t, "step")
					add(t, prefixID(p, 0))
				}
			},
			"out of order": func(t *rapid.T) {
				add(t, prefixID(rapid.Uint64Range(0, next+1).Draw(t, "p"), rapid.Uint64Range(0, 3).Draw(t, "lo")))
			},
			"prefix tie": func(t *rapid.T) {
				if len(order) == 0 {
					t.Skip("empty")
				}
				of := order[rapid.IntRange(0, len(order)-1).Draw(t, "of")]
				add(t, prefixID(idPrefix(of), rapid.Uint64Range(0, 3).Draw(t, "lo")))
			},
			"delete random": func(t *rapid.T) {
				if len(order) == 0 {
					t.Skip("empty")
				}
				del(rapid.IntRange(0, len(order)-1).Draw(t, "i"))
			},
			"delete oldest": func(t *rapid.T) {
				if len(order) == 0 {
					t.Skip("empty")
				}
				for range rapid.IntRange(1, min(len(order), 5)).Draw(t, "n") {
					del(0)
				}
			},
			"find absent": func(t *rapid.T) {
				id := prefixID(rapid.Uint64Range(0, next+2).Draw(t, "p"), rapid.Uint64Range(0, 4).Draw(t, "lo"))
				if _, ok := model[id]; ok {
					t.Skip("present")
				}
				if slot, ok := x.find(id, s); ok {
					t.Fatalf("found absent %v at %d", id, slot)
				}
			},
			"": func(t *rapid.T) {
				if x.len() != len(model) {
					t.Fatalf("len %d, model %d", x.len(), len(model))
				}
				for id, slot := range model {
					if got, ok := x.find(id, s); !ok || got != slot {
						t.Fatalf("find(%v) = %d %v, want %d", id, got, ok, slot)
					}
				}
				for _, o := range []*ordIndex{&x.ord, &x.run} {
					if err := checkOrdIndex(o); err != nil {
						t.Fatal(err)
					}
				}
			},
		})
	})
}

// A redrive's copies, older IDs than the queue's in the order of their IDs, go to the second
// ordered index, not the hash table: sorted and sweepable, 12 bytes each.
func TestMsgIndexRedriveStaysOrdered(t *testing.T) {
	a := offHeap(t)
	s := newSlab(a)
	x := newMsgIndex(ordChunkCap, a)
	const n = 3 * ordChunkCap
	ids := make([]MsgID, 0, 2*n)
	for i := range uint64(n) { // the queue's own messages
		ids = append(ids, prefixID(1<<40+i, 0))
	}
	for i := range uint64(n) { // then the copies redriven out of its dead-letter queue
		ids = append(ids, prefixID(1<<20+i, 0))
	}
	slots := make([]uint32, len(ids))
	for i, id := range ids {
		slots[i] = s.alloc()
		s.at(slots[i]).id = id
		x.insert(id, slots[i])
	}
	if x.side.n != 0 || x.run.n != n || x.ord.n != n {
		t.Fatalf("%d in order, %d in the second run, %d in the side table; want %d, %d, 0", x.ord.n, x.run.n, x.side.n, n, n)
	}
	for i, id := range ids {
		if got, ok := x.find(id, s); !ok || got != slots[i] {
			t.Fatalf("find(%v) = %d %v, want %d", id, got, ok, slots[i])
		}
	}
	for i, id := range ids {
		x.remove(id, slots[i])
	}
	if x.len() != 0 || indexMappedBytes(x) != 0 {
		t.Fatalf("drained index holds %d entries, %d mapped bytes", x.len(), indexMappedBytes(x))
	}
}

// searchEnts against slices.BinarySearch on strictly increasing keys spread evenly, in bursts
// and with huge gaps, for present and absent prefixes.
func TestSearchEnts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 300).Draw(t, "n")
		keys := make([]uint64, n)
		ents := make([]ordEnt, n)
		k := rapid.Uint64Range(0, 1<<62).Draw(t, "first")
		for i := range keys {
			keys[i] = k
			ents[i] = ordEnt{hi: uint32(k >> 32), lo: uint32(k), slot: uint32(i)}
			gap := rapid.SampledFrom([]uint64{1, 2, 1 << 16, 1 << 40}).Draw(t, "scale")
			k += rapid.Uint64Range(1, gap).Draw(t, "gap")
		}
		for range 20 {
			var p uint64
			if rapid.Bool().Draw(t, "present") {
				p = keys[rapid.IntRange(0, n-1).Draw(t, "i")]
			} else {
				p = rapid.Uint64Range(keys[0]-min(keys[0], 3), k+3).Draw(t, "p")
			}
			want, wantOK := slices.BinarySearch(keys, p)
			got, ok := searchEnts(ents, p, keys[0], keys[n-1])
			if ok != wantOK || (ok && got != want) {
				t.Fatalf("searchEnts(%d) = %d %v, want %d %v", p, got, ok, want, wantOK)
			}
		}
	})
}

// Full ordered chunks are mapped memory; FIFO consumption frees them as they empty, and a
// drained index gives everything back.
func TestMsgIndexOffHeap(t *testing.T) {
	a := offHeap(t)
	s, x := newSlab(a), newMsgIndex(ordChunkCap, a)
	n := uint32(3 * ordChunkCap)
	for i := range n {
		slot := s.alloc()
		s.at(slot).id = mid(uint64(i))
		x.insert(mid(uint64(i)), slot)
	}
	if x.side.n != 0 || len(x.ord.chunks) != 3 {
		t.Fatalf("in-order IDs: %d in the side table, %d chunks", x.side.n, len(x.ord.chunks))
	}
	if runtime.GOOS == "linux" && indexMappedBytes(x) != uint64(3*ordChunkCap*12) {
		t.Fatalf("three full chunks map %d bytes", indexMappedBytes(x))
	}
	for i := range n {
		if slot, ok := x.find(mid(uint64(i)), s); !ok || slot != i {
			t.Fatalf("message %d: slot %d, found %v", i, slot, ok)
		}
	}
	for i := range n {
		x.remove(mid(uint64(i)), i)
		if want := 3 - int(i+1)/ordChunkCap; len(x.ord.chunks) != want {
			t.Fatalf("after %d FIFO deletes: %d chunks, want %d", i+1, len(x.ord.chunks), want)
		}
	}
	if x.ord.chunks != nil || x.len() != 0 || indexMappedBytes(x) != 0 {
		t.Fatalf("drained index kept %d chunks, %d entries", len(x.ord.chunks), x.len())
	}
}

// indexBench is the population of an index benchmark: n in-order IDs in a slab.
type indexBench struct {
	s   *slab
	ids []MsgID
}

func newIndexBench(n int) indexBench {
	ib := indexBench{s: newSlab(benchAlloc()), ids: make([]MsgID, n)}
	for i := range ib.ids {
		ib.ids[i] = mid(uint64(i))
		ib.s.at(ib.s.alloc()).id = ib.ids[i]
	}
	return ib
}

// benchIndex is the operations the benchmarks compare: the hash table alone (today's index
// before the ordered one) and msgIndex.
type benchIndex interface {
	find(MsgID, *slab) (uint32, bool)
	insert(MsgID, uint32)
	remove(MsgID, uint32)
	unmap()
}

var benchIndexes = []struct {
	name string
	make func() benchIndex
}{
	{"hash", func() benchIndex { return &idIndex{mem: benchAlloc()} }},
	{"ordered", func() benchIndex { return newMsgIndex(ordChunkCap, benchAlloc()) }},
}

// BenchmarkIndex measures insert, find (random and in ID order) and delete (FIFO and random order) per operation with n
// in-order IDs stored, for the hash table and the ordered index.
func BenchmarkIndex(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		if n > 1_000_000 && testing.Short() {
			continue
		}
		ib := newIndexBench(n)
		perm := rand.New(rand.NewPCG(1, 2)).Perm(n)
		for _, kind := range benchIndexes {
			fill := func() benchIndex {
				x := kind.make()
				for i, id := range ib.ids {
					x.insert(id, uint32(i))
				}
				return x
			}
			b.Run(fmt.Sprintf("n=%d/%s/insert", n, kind.name), func(b *testing.B) {
				for b.Loop() {
					fill().unmap()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
			})
			x := fill()
			b.Run(fmt.Sprintf("n=%d/%s/find", n, kind.name), func(b *testing.B) {
				i := 0
				for b.Loop() {
					if _, ok := x.find(ib.ids[perm[i]], ib.s); !ok {
						b.Fatal("not found")
					}
					i = (i + 1) % n
				}
			})
			b.Run(fmt.Sprintf("n=%d/%s/find-fifo", n, kind.name), func(b *testing.B) {
				i := 0
				for b.Loop() {
					if _, ok := x.find(ib.ids[i], ib.s); !ok {
						b.Fatal("not found")
					}
					i = (i + 1) % n
				}
			})
			b.Run(fmt.Sprintf("n=%d/%s/find-absent", n, kind.name), func(b *testing.B) {
				i := 0
				for b.Loop() {
					if _, ok := x.find(mid(uint64(n+i)), ib.s); ok {
						b.Fatal("found")
					}
					i++
				}
			})
			x.unmap()
			for _, order := range []string{"fifo", "random"} {
				b.Run(fmt.Sprintf("n=%d/%s/delete-%s", n, kind.name, order), func(b *testing.B) {
					for b.Loop() {
						b.StopTimer()
						x := fill()
						b.StartTimer()
						for i := range n {
							j := i
							if order == "random" {
								j = perm[i]
							}
							x.remove(ib.ids[j], uint32(j))
						}
						x.unmap()
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
				})
			}
		}
	}
}

// Under FIFO consumption (append at the tail, find and delete the oldest) the ordered index
// touches only its first and last chunks: after a sweep the chunks between stay out of memory.
func TestMsgIndexFIFOTouchesOnlyItsEnds(t *testing.T) {
	a := useScratch(t, false)
	const chunks = 5
	s, x := newSlab(nil), newMsgIndex(ordChunkCap, a)
	defer s.unmap()
	defer x.unmap()
	next, oldest := uint64(0), uint64(0)
	slots := map[uint64]uint32{}
	add := func() {
		slot := s.alloc()
		s.at(slot).id = mid(next)
		x.insert(mid(next), slot)
		slots[next] = slot
		next++
	}
	for range chunks*ordChunkCap + 1 { // the last one starts the tail chunk
		add()
	}
	if got, want := a.Stats().Scratch, int64(len(x.ord.chunks)*ordChunkCap*12); got != want {
		t.Fatalf("%d bytes of scratch regions, want the %d chunks' %d", got, len(x.ord.chunks), want)
	}
	a.Sweep()
	for range 10_000 {
		add()
		slot, ok := x.find(mid(oldest), s)
		if !ok || slot != slots[oldest] {
			t.Fatalf("message %d: slot %d %v, want %d", oldest, slot, ok, slots[oldest])
		}
		x.remove(mid(oldest), slot)
		delete(slots, oldest)
		oldest++
	}
	// The tail chunk was written since the sweep, so it must read as resident; if it does not,
	// residency cannot be read here and the check below would prove nothing.
	if res, _ := offheap.Residency(bytesOf(x.ord.chunks[len(x.ord.chunks)-1].ents)); res == 0 {
		t.Fatal("the tail chunk, written since the sweep, reads as not resident")
	}
	for c := 1; c < len(x.ord.chunks)-1; c++ {
		ch := x.ord.chunks[c]
		if res, _ := offheap.Residency(bytesOf(ch.ents)); res != 0 {
			t.Errorf("middle chunk %d of %d: %d bytes back in memory", c, len(x.ord.chunks), res)
		}
	}
}

// A starved fairness key keeps one live entry in every chunk while the others are consumed:
// the index merges the sparse chunks as they empty instead of keeping one chunk per survivor,
// and still finds every survivor and nothing else.
func TestMsgIndexStarvedKeyMerges(t *testing.T) {
	const chunkCap, chunks = 256, 64
	s := newSlab(nil)
	x := newMsgIndex(chunkCap, nil)
	slots := map[MsgID]uint32{}
	var ids []MsgID
	for i := range uint64(chunkCap * chunks) {
		id := mid(i + 1)
		slot := s.alloc()
		s.at(slot).id = id
		x.insert(id, slot)
		slots[id] = slot
		ids = append(ids, id)
	}
	if len(x.ord.chunks) != chunks || x.side.n != 0 {
		t.Fatalf("%d ordered chunks, %d side entries after in-order inserts", len(x.ord.chunks), x.side.n)
	}
	for i, id := range ids {
		if i%chunkCap == chunkCap/2 {
			continue // the starved key's message in this chunk
		}
		x.remove(id, slots[id])
		s.release(slots[id])
		delete(slots, id)
		if i%chunkCap != 0 {
			continue
		}
		if err := checkOrdIndex(&x.ord); err != nil {
			t.Fatalf("after removing %d: %v", i, err)
		}
	}
	if len(slots) != chunks || len(x.ord.chunks) != 1 || x.len() != chunks {
		t.Fatalf("%d survivors in %d chunks (len %d), want %d in one", len(slots), len(x.ord.chunks), x.len(), chunks)
	}
	for id, slot := range slots {
		if got, ok := x.find(id, s); !ok || got != slot {
			t.Fatalf("find(%v) = %d %v, want %d", id, got, ok, slot)
		}
	}
	for i, id := range ids {
		if _, live := slots[id]; !live {
			if slot, ok := x.find(id, s); ok {
				t.Fatalf("removed ID %d found at slot %d", i, slot)
			}
		}
	}
}
