package throttle

import (
	"runtime"
	"testing"
)

// The bound counts what the heap holds: buckets filled to the default bound hold no more heap
// than they were counted for, for exact and slotted windows, one limit or two. Before, allocator
// rounding went uncounted: a bucket of one 1000-a-minute limit was counted 832 bytes and held
// 849, and one of two limits 976 for 1,004, so the 64 MiB bound held more than 64 MiB. It logs
// the capacity docs/throttles.md gives (buckets per 64 MiB).
func TestCountedMemoryCoversTheHeap(t *testing.T) {
	for _, ls := range [][]Limit{
		{{1, hourMs}},
		{{5, 1000}},
		{{64, 60_000}},
		{{1000, 60_000}},
		{{5, 1000}, {100, hourMs}},
	} {
		r := NewRegistry(DefaultMaxMemory)
		s, err := r.Declare("q", []Declaration{{Name: "a", Key: perKey, Limits: ls}})
		if err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		n := int64(fill(r, s, "m", 1000)) // keys of 7 bytes, like "m000042"
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(r)
		heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		t.Logf("%v: %d buckets in %d MiB; counted %d bytes a bucket, the heap holds %d", ls, n, DefaultMaxMemory>>20, r.held/n, heap/n)
		if heap > r.held {
			t.Errorf("%v: %d buckets counted %d bytes hold %d on the heap", ls, n, r.held, heap)
		}
	}
}
